"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages, OpenAI Chat Completions and OpenAI
Responses wire formats, as JSON or as SSE streams (`"stream": true`), and answers from a script — so tests
exercise real clients (httpx, and the real harness binaries in tests/e2e/), never a patched one.

    with FakeLLMServer() as server:
        server.script(["first answer", error(429, retry_after="1"), slow(2.0), malformed(), empty()])
        ...  # point historian.openai.base_url at server.openai_base_url, historian.anthropic.base_url at server.url
        server.requests[0].body["messages"]

The wire format of each answer follows the request path: `…/v1/messages` is Anthropic,
`…/chat/completions` is OpenAI Chat, `…/responses` is OpenAI Responses. A script item is a `Reply`, a plain
string (shorthand for `ok(text)`), or a callable `(RecordedRequest) -> Reply | str` for answers that depend
on the prompt; `tool_round(NAME, ARGS, final)` is such a callable: one call of tool NAME while the request
offers it and carries no tool result yet, else the final text — so a client's second request carries the
tool result. When the script runs out, `default` answers (same kinds); without one the server answers 418
so a stray request fails loudly. Every request is recorded with its exact body bytes and its headers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC = "anthropic"
OPENAI = "openai"
RESPONSES = "openai-responses"


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes; `id` is generated from the request number when empty."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `raw` or `json_body`, when set, replace the wire-format body entirely."""

    text: str = ""
    status: int = 200
    retry_after: str | None = None
    delay_s: float = 0.0
    raw: bytes | None = None
    json_body: Any = None
    message: str | None = None
    usage: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()
    event_delay_s: float = 0.0  # pause before each streamed event after the first


def ok(text: str, *, usage: dict[str, Any] | None = None) -> Reply:
    """A successful answer whose text is `text`."""
    return Reply(text=text, usage=usage)


def error(status: int, *, retry_after: str | None = None, message: str | None = None) -> Reply:
    """An error status with the wire format's error body and an optional Retry-After header."""
    return Reply(status=status, retry_after=retry_after, message=message)


def tool_call(name: str, arguments: dict[str, Any], *, text: str = "") -> Reply:
    """An answer that calls tool `name` with `arguments` (after an optional text)."""
    return Reply(text=text, tool_calls=(ToolCall(name, arguments),))


def tool_round(name: str, arguments: dict[str, Any], final: str) -> Callable[[RecordedRequest], Reply]:
    """Call tool `name` once (while offered and not yet answered), then answer `final`."""
    return tool_sequence([(name, arguments)], final)


def tool_sequence(calls: list[tuple[str, dict[str, Any]]], final: str) -> Callable[[RecordedRequest], Reply]:
    """Make the calls one per request (the k-th once the history holds k-1 tool results), then answer `final`.

    A request that offers no tools (a harness's side call, e.g. a title) gets `final` too."""

    def answer(request: RecordedRequest) -> Reply:
        done = request.tool_result_count
        if request.tool_names and done < len(calls) and calls[done][0] in request.tool_names:
            return tool_call(*calls[done])
        return ok(final)

    return answer


def slow(delay_s: float, text: str = "too late") -> Reply:
    """A valid answer sent only after `delay_s` seconds (longer than the client timeout, typically)."""
    return Reply(text=text, delay_s=delay_s)


def malformed(body: bytes = b'{"id": "broken", "content": [') -> Reply:
    """A 200 whose body is not valid JSON."""
    return Reply(raw=body)


def empty() -> Reply:
    """A 200 in the right format with no text (Anthropic: no content blocks; OpenAI: empty content)."""
    return Reply(text="")


@dataclass(frozen=True)
class RecordedRequest:
    """What the client sent: headers have lower-case names; `body` is the parsed JSON or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def wire(self) -> str | None:
        return _wire(self.path)

    @property
    def system(self) -> str:
        """The system prompt in either format."""
        body = self.body if isinstance(self.body, dict) else {}
        if self.wire == ANTHROPIC:
            system = body.get("system", "")
            return system if isinstance(system, str) else json.dumps(system)
        return "\n".join(m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system")

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offers, in any of the three formats."""
        body = self.body if isinstance(self.body, dict) else {}
        names = []
        for tool in body.get("tools") or []:
            if isinstance(tool, dict):
                names.append(tool.get("name") or (tool.get("function") or {}).get("name"))
        return [n for n in names if n]

    @property
    def tool_result_count(self) -> int:
        """How many tool results the history carries (Anthropic, Chat or Responses)."""
        body = self.body if isinstance(self.body, dict) else {}
        count = 0
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            count += message.get("role") == "tool"
            count += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result") \
                if isinstance(content, list) else 0
        items = body.get("input") if isinstance(body.get("input"), list) else []
        return count + sum(1 for i in items if isinstance(i, dict) and str(i.get("type", "")).endswith("call_output"))

    @property
    def has_tool_result(self) -> bool:
        return self.tool_result_count > 0

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def prompt(self) -> str:
        """The user message text in either format (the last user message)."""
        body = self.body if isinstance(self.body, dict) else {}
        users = [m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"]
        return users[-1] if users and isinstance(users[-1], str) else ""


ScriptItem = Reply | str | Callable[[RecordedRequest], "Reply | str"]


def _wire(path: str) -> str | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/messages"):
        return ANTHROPIC
    if path.endswith("/chat/completions"):
        return OPENAI
    if path.endswith("/responses"):
        return RESPONSES
    return None


class FakeLLMServer:
    """Threaded scripted LLM server; use as a context manager or call `start()` / `stop()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._queue: deque[ScriptItem] = deque()
        self._default: ScriptItem | None = None
        self._requests: list[RecordedRequest] = []
        self.embeddings_status = 200  # set to e.g. 503 to make /v1/embeddings fail
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # lifecycle -------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        self._stopping.clear()
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses -------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL without a version segment: use as `historian.anthropic.base_url`."""
        if self._httpd is None:
            raise RuntimeError("fake LLM server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        """`url` + "/v1": use as `historian.openai.base_url`."""
        return self.url + "/v1"

    # script and records ----------------------------------------------------
    def script(self, replies: Iterable[ScriptItem], *, default: ScriptItem | None = None) -> None:
        """Replace the queue of answers (served in order) and the answer used once it runs out."""
        with self._lock:
            self._queue = deque(replies)
            self._default = default

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        """Scripted answers not yet served."""
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        """Forget recorded requests (the script is kept)."""
        with self._lock:
            self._requests.clear()

    # used by the handler ---------------------------------------------------
    def _take(self, request: RecordedRequest) -> tuple[Reply, int]:
        with self._lock:
            self._requests.append(request)
            self._counter += 1
            item = self._queue.popleft() if self._queue else self._default
            number = self._counter
        if item is None:
            return Reply(status=418, message="fake LLM server: no scripted reply left"), number
        if callable(item) and not isinstance(item, Reply):
            item = item(request)
        return (Reply(text=item) if isinstance(item, str) else item), number

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _note(self, request: RecordedRequest) -> None:
        """Record a request that is not answered from the script (pass-through routes, unknown paths)."""
        with self._lock:
            self._requests.append(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()  # answers go out in several writes: without TCP_NODELAY each waits for a delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _recorded(self, method: str, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        received = {k.lower(): v for k, v in self.headers.items()}
        return RecordedRequest(method=method, path=self.path, headers=received, body=body, raw=raw)

    def do_GET(self) -> None:
        self.fake._note(self._recorded("GET", b""))
        if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]})
            return
        self._send(404, {"error": {"message": "not found", "type": "not_found_error"}})

    def do_HEAD(self) -> None:  # some clients probe the base URL first
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def do_POST(self) -> None:
        raw = self._read_body()
        request = self._recorded("POST", raw)
        body = request.body
        if self.path.split("?", 1)[0].rstrip("/").endswith("/embeddings"):
            self.fake._note(request)
            status = self.fake.embeddings_status
            if status != 200:
                self._send(status, {"error": {"message": "embeddings unavailable", "type": "server_error"}})
                return
            inputs = body.get("input") if isinstance(body, dict) else None
            inputs = [inputs] if isinstance(inputs, str) else inputs if isinstance(inputs, list) else []
            self._send(200, {"object": "list", "model": body.get("model") if isinstance(body, dict) else None,
                             "data": [{"object": "embedding", "index": i, "embedding": bag_of_words(str(text))}
                                      for i, text in enumerate(inputs)],
                             "usage": {"prompt_tokens": sum(_words(str(t)) for t in inputs), "total_tokens": 0}})
            return
        if self.path.split("?", 1)[0].rstrip("/").endswith("/count_tokens"):
            self.fake._note(request)
            self._send(200, {"input_tokens": max(1, len(raw) // 4)})
            return
        wire = request.wire
        if wire is None:
            self.fake._note(request)
            self._send(404, {"error": {"message": f"unknown path {self.path}", "type": "not_found_error"}})
            return
        reply, number = self.fake._take(request)
        if reply.delay_s:
            self.fake._sleep(reply.delay_s)
        headers = dict(reply.headers)
        if reply.retry_after is not None:
            headers["retry-after"] = reply.retry_after
        if reply.raw is not None:
            self._send(reply.status, reply.raw, headers)
        elif reply.json_body is not None:
            self._send(reply.status, reply.json_body, headers)
        elif reply.status >= 400:
            self._send(reply.status, _error_body(wire, reply), headers)
        else:
            model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
            if request.stream:
                self._stream(reply, _EVENTS[wire](reply, model, number, request), headers)
            else:
                self._send(reply.status, _BODIES[wire](reply, model, number, request), headers)

    def _stream(self, reply: Reply, events: list[bytes], headers: dict[str, str]) -> None:
        """Send SSE `events` as one chunked response, flushed one by one, `reply.event_delay_s` apart."""
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            for index, frame in enumerate(events):
                if index and reply.event_delay_s:
                    self.fake._sleep(reply.event_delay_s)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True  # the client gave up (e.g. timed out)


EMBEDDING_DIMS = 64


def bag_of_words(text: str) -> list[float]:
    """A deterministic toy embedding for `/v1/embeddings`: lower-cased words hashed into 64 counts."""
    import hashlib

    vector = [0.0] * EMBEDDING_DIMS
    for token in text.lower().split():
        word = token.strip(".,:;!?()[]{}\"'`")
        if word:
            vector[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % EMBEDDING_DIMS] += 1.0
    return vector


def _words(text: str) -> int:
    return max(1, len(text.split()))


def _calls(reply: Reply, number: int) -> list[ToolCall]:
    return [ToolCall(c.name, c.arguments, c.id or f"call_fake_{number}_{i}") for i, c in enumerate(reply.tool_calls)]


def _anthropic_usage(reply: Reply, request: RecordedRequest) -> dict[str, Any]:
    return reply.usage or {"input_tokens": _words(request.system + " " + request.prompt),
                           "output_tokens": _words(reply.text) if reply.text else 0,
                           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _anthropic_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in _calls(reply, number)]
    return {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None,
            "usage": _anthropic_usage(reply, request)}


def _pieces(text: str) -> list[str]:
    """A streamed text's deltas: one per word, so a stream has several events to interleave or delay."""
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


def _anthropic_stream(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[tuple[str | None, Any]]:
    body = _anthropic_body(reply, model, number, request)
    start = dict(body, content=[], stop_reason=None, usage=dict(body["usage"], output_tokens=1))
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            first, deltas = dict(block, text=""), [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            first = dict(block, input={})
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                   for delta in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": body["stop_reason"],
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": body["usage"].get("output_tokens", 0)}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def _openai_usage(reply: Reply, request: RecordedRequest) -> dict[str, Any]:
    prompt_tokens = _words(request.system + " " + request.prompt)
    completion_tokens = _words(reply.text) if reply.text else 0
    return reply.usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}


def _openai_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    content = reply.text if reply.text or not reply.tool_calls else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                 for c in _calls(reply, number)]
    return {"id": f"chatcmpl-fake-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "usage": _openai_usage(reply, request),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}]}


def _openai_stream(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[tuple[str | None, Any]]:
    base = {"id": f"chatcmpl-fake-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        events += [chunk({"content": piece}) for piece in _pieces(reply.text)]
    for index, call in enumerate(_calls(reply, number)):
        events += [chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": ""}}]}),
                   chunk({"tool_calls": [{"index": index, "function": {"arguments": json.dumps(call.arguments)}}]})]
    events.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if isinstance(request.body, dict) and (request.body.get("stream_options") or {}).get("include_usage"):
        events.append((None, dict(base, choices=[], usage=_openai_usage(reply, request))))
    events.append((None, "[DONE]"))
    return events


def _responses_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append({"id": f"msg_fake_{number}", "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    output += [{"id": f"fc_fake_{number}_{i}", "type": "function_call", "status": "completed", "call_id": c.id,
                "name": c.name, "arguments": json.dumps(c.arguments)} for i, c in enumerate(_calls(reply, number))]
    usage = reply.usage or {"input_tokens": _words(request.prompt), "input_tokens_details": {"cached_tokens": 0},
                            "output_tokens": _words(reply.text), "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": _words(request.prompt) + _words(reply.text)}
    return {"id": f"resp_fake_{number}", "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": output, "usage": usage, "error": None, "incomplete_details": None}


def _responses_stream(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[tuple[str | None, Any]]:
    body = _responses_body(reply, model, number, request)
    events: list[tuple[str | None, Any]] = []

    def event(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    pending = dict(body, status="in_progress", output=[], usage=None)
    event("response.created", response=pending)
    event("response.in_progress", response=pending)
    for index, item in enumerate(body["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            event("response.output_item.added", output_index=index, item=dict(item, content=[], status="in_progress"))
            event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part)
            for piece in _pieces(text):
                event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                      delta=piece)
            event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text)
            event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                  part=dict(part, text=text))
        else:
            event("response.output_item.added", output_index=index,
                  item=dict(item, arguments="", status="in_progress"))
            event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                  delta=item["arguments"])
            event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                  arguments=item["arguments"])
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=body)
    return events


_BODIES = {ANTHROPIC: _anthropic_body, OPENAI: _openai_body, RESPONSES: _responses_body}
_STREAMS = {ANTHROPIC: _anthropic_stream, OPENAI: _openai_stream, RESPONSES: _responses_stream}


def _frames(build: Callable[..., list[tuple[str | None, Any]]]) -> Callable[..., list[bytes]]:
    """`build`'s events as SSE frames, each `event:` line only when named."""

    def frames(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[bytes]:
        out = []
        for event, data in build(reply, model, number, request):
            text = data if isinstance(data, str) else json.dumps(data)
            out.append(((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode("utf-8"))
        return out

    return frames


_anthropic_events, _openai_events, _responses_events = (_frames(_STREAMS[w]) for w in (ANTHROPIC, OPENAI, RESPONSES))
_EVENTS = {ANTHROPIC: _anthropic_events, OPENAI: _openai_events, RESPONSES: _responses_events}


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


def _error_body(wire: str, reply: Reply) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(reply.status, "api_error")
    message = reply.message or f"fake {kind} (HTTP {reply.status})"
    if wire == ANTHROPIC:
        return {"type": "error", "error": {"type": kind, "message": message}}
    if wire == RESPONSES:
        return {"error": {"message": message, "type": kind, "code": str(reply.status)}}
    return {"error": {"message": message, "type": kind, "param": None, "code": str(reply.status)}}


__all__ = ["ANTHROPIC", "OPENAI", "RESPONSES", "FakeLLMServer", "RecordedRequest", "Reply", "ToolCall", "empty",
           "error", "malformed", "ok", "slow", "tool_call", "tool_round", "tool_sequence"]
