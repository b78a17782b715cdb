"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages and OpenAI Chat Completions wire
formats and answers from a script — so tests exercise the real httpx client, never a patched one.

    with FakeLLMServer() as server:
        server.script(["first answer", error(429, retry_after="1"), slow(2.0), malformed(), empty()])
        ...  # point historian.openai.base_url at server.openai_base_url, historian.anthropic.base_url at server.url
        server.requests[0].body["messages"]

The wire format of each answer follows the request path: `…/v1/messages` is Anthropic,
`…/chat/completions` is OpenAI Chat, `…/responses` is OpenAI Responses. A request with `"stream": true`
is answered as the wire's SSE event stream (chunked, one event per text word, `Reply.event_delay_s`
apart; Chat includes its usage chunk only when `stream_options.include_usage` is set). A script item is
a `Reply`, a plain string (shorthand for `ok(text)`), or a callable `(RecordedRequest) -> Reply | str`
for answers that depend on the prompt. When the script runs out, `default` answers (same kinds);
without one the server answers 418 so a stray request fails loudly. `GET …/models` and
`POST …/messages/count_tokens` answer fixed bodies (pass-through routes of a proxy) and are recorded too.
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
RESPONSES = "responses"
MODELS_BODY = {"object": "list", "data": [{"id": "fake-model", "object": "model", "type": "model"}]}


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
    event_delay_s: float = 0.0  # pause before each streamed event after the first


def ok(text: str, *, usage: dict[str, Any] | None = None) -> Reply:
    """A successful answer whose text is `text`."""
    return Reply(text=text, usage=usage)


def error(status: int, *, retry_after: str | None = None, message: str | None = None) -> Reply:
    """An error status with the wire format's error body and an optional Retry-After header."""
    return Reply(status=status, retry_after=retry_after, message=message)


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
    def prompt(self) -> str:
        """The user message text in either format (the last user message)."""
        body = self.body if isinstance(self.body, dict) else {}
        users = [m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"]
        return users[-1] if users and isinstance(users[-1], str) else ""


ScriptItem = Reply | str | Callable[[RecordedRequest], "Reply | str"]


def _wire(path: str) -> str | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/v1/messages"):
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

    def do_GET(self) -> None:
        self.fake._note(self._recorded("GET", b""))
        if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
            self._send(200, MODELS_BODY)
            return
        self._send(404, {"error": {"message": "not found", "type": "not_found_error"}})

    def _recorded(self, method: str, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        received = {k.lower(): v for k, v in self.headers.items()}
        return RecordedRequest(method=method, path=self.path, headers=received, body=body, raw=raw)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = self._recorded("POST", raw)
        body = request.body
        wire = request.wire
        if wire is None and self.path.split("?", 1)[0].rstrip("/").endswith("/count_tokens"):
            self.fake._note(request)
            self._send(200, {"input_tokens": _words(json.dumps(body))})
            return
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
            if isinstance(body, dict) and body.get("stream"):
                self._stream(reply, _EVENTS[wire](reply, model, number, request), headers)
                return
            build = {ANTHROPIC: _anthropic_body, OPENAI: _openai_body, RESPONSES: _responses_body}[wire]
            self._send(reply.status, build(reply, model, number, request), headers)

    def _stream(self, reply: Reply, events: list[bytes], headers: dict[str, str]) -> None:
        """Send `events` as an SSE answer in HTTP/1.1 chunks, flushed one by one."""
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            for index, event in enumerate(events):
                if index and reply.event_delay_s:
                    self.fake._sleep(reply.event_delay_s)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
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


def _words(text: str) -> int:
    return max(1, len(text.split()))


def _anthropic_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    usage = reply.usage or {"input_tokens": _words(request.system + " " + request.prompt),
                            "output_tokens": _words(reply.text) if reply.text else 0}
    return {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": reply.text}] if reply.text else [],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}


def _openai_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    prompt_tokens = _words(request.system + " " + request.prompt)
    completion_tokens = _words(reply.text) if reply.text else 0
    usage = reply.usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens}
    return {"id": f"chatcmpl-fake-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "usage": usage,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                         "finish_reason": "stop"}]}


def _responses_usage(reply: Reply, request: RecordedRequest) -> dict[str, Any]:
    if reply.usage is not None:
        return reply.usage
    prompt, output = _words(json.dumps((request.body or {}).get("input", ""))), _words(reply.text)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + output}


def _responses_body(reply: Reply, model: str, number: int, request: RecordedRequest) -> dict[str, Any]:
    item = {"id": f"msg_fake_{number}", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
    return {"id": f"resp_fake_{number}", "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": [item], "usage": _responses_usage(reply, request), "error": None}


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode()


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


def _anthropic_events(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[bytes]:
    usage = _anthropic_body(reply, model, number, request)["usage"]
    start = {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    events = [_sse({"type": "message_start", "message": start}, "message_start"),
              _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                   "content_block_start")]
    events += [_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                    "content_block_delta") for piece in _pieces(reply.text)]
    events += [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
               _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                     "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta"),
               _sse({"type": "message_stop"}, "message_stop")]
    return events


def _openai_events(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[bytes]:
    whole = _openai_body(reply, model, number, request)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": model}
    events = [_sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]})]
    events += [_sse({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
               for piece in _pieces(reply.text)]
    events.append(_sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    if ((request.body or {}).get("stream_options") or {}).get("include_usage"):
        events.append(_sse({**base, "choices": [], "usage": whole["usage"]}))
    return [*events, _sse("[DONE]")]


def _responses_events(reply: Reply, model: str, number: int, request: RecordedRequest) -> list[bytes]:
    done = _responses_body(reply, model, number, request)
    pending = {**done, "status": "in_progress", "output": [], "usage": None}
    item_id = done["output"][0]["id"]
    events = [_sse({"type": "response.created", "response": pending}, "response.created")]
    events += [_sse({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0,
                     "delta": piece}, "response.output_text.delta") for piece in _pieces(reply.text)]
    return [*events, _sse({"type": "response.completed", "response": done}, "response.completed")]


_EVENTS = {ANTHROPIC: _anthropic_events, OPENAI: _openai_events, RESPONSES: _responses_events}


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


def _error_body(wire: str, reply: Reply) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(reply.status, "api_error")
    message = reply.message or f"fake {kind} (HTTP {reply.status})"
    if wire == ANTHROPIC:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": str(reply.status)}}


__all__ = ["FakeLLMServer", "RecordedRequest", "Reply", "empty", "error", "malformed", "ok", "slow"]
