"""The usage a model response reports, read on the side while its bytes pass through unchanged.

Streams are parsed line by line (only `data:` lines mentioning usage are decoded), so nothing is
buffered beyond one incomplete line:
* Anthropic: `message_start` carries the prompt figures, `message_delta` the final output count
  (and, on newer APIs, final prompt figures);
* OpenAI Chat: the chunk with a non-null `usage` (sent when the client asked for
  `stream_options.include_usage`); `prompt_tokens` includes the cached tokens;
* OpenAI Responses: `response.completed` (or `.incomplete` / `.failed`) → `response.usage`, whose
  `input_tokens` includes `input_tokens_details.cached_tokens`.
A JSON (non-streamed) answer carries `usage` at its top level in all three.
"""

from __future__ import annotations

from magic_context.proxy.routes import ANTHROPIC, CHAT, RESPONSES
from magic_context.wire import model as m
from magic_context.wire.importers.base import anthropic_usage, as_int, make_usage, openai_usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a declared dependency
    import json

    _loads = json.loads  # type: ignore[assignment]  # same documents; orjson's signature is narrower

MAX_LINE_BYTES = 16 * 1024 * 1024  # one SSE line larger than this is not parsed (the bytes still pass)
_RESPONSES_DONE = frozenset({"response.completed", "response.incomplete", "response.failed"})


def responses_usage(usage: Any) -> dict[str, int] | None:
    """OpenAI Responses usage; `input_tokens` includes the cached ones, which are split out."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return make_usage(max(as_int(usage.get("input_tokens")) - cached, 0), usage.get("output_tokens"), cached, 0)


_NORMALIZE = {ANTHROPIC: anthropic_usage, CHAT: openai_usage, RESPONSES: responses_usage}


def _object(data: bytes) -> dict[str, Any] | None:
    """`data` parsed, if it is a JSON object."""
    try:
        value = _loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def from_json(wire: str, body: bytes) -> m.Usage | None:
    """The usage of a whole JSON answer, or None."""
    document = _object(body)
    usage = _NORMALIZE[wire](document.get("usage")) if document is not None else None
    return m.Usage(**usage) if usage else None


class UsageTap:
    """Fed the bytes of an SSE answer as they pass; `feed` is True for the chunk that completes the usage."""

    def __init__(self, wire: str) -> None:
        self.wire = wire
        self.usage: m.Usage | None = None
        self._fields: dict[str, int] = {}
        self._partial = bytearray()
        self._done = False

    def feed(self, chunk: bytes) -> bool:
        if self._done:
            return False
        self._partial += chunk
        if b"\n" not in chunk:
            if len(self._partial) > MAX_LINE_BYTES:
                self._partial.clear()
            return False
        *lines, rest = bytes(self._partial).split(b"\n")
        self._partial = bytearray(rest)
        for line in lines:
            if line.startswith(b"data:") and b'"usage"' in line and self._event(line[5:].strip()):
                self._done = True
                return True
        return False

    def _event(self, payload: bytes) -> bool:
        """Take the usage of one event; True when it is the response's final usage."""
        event = _object(payload)
        if event is None:
            return False
        if self.wire == ANTHROPIC:
            kind = event.get("type")
            if kind == "message_start" and isinstance(event.get("message"), dict):
                self._merge(event["message"].get("usage"))
            elif kind == "message_delta":
                self._merge(event.get("usage"))
                return self.usage is not None
            return False
        if self.wire == CHAT:
            fields = openai_usage(event.get("usage"))
        elif event.get("type") in _RESPONSES_DONE and isinstance(event.get("response"), dict):
            fields = responses_usage(event["response"].get("usage"))
        else:
            return False
        if fields:
            self.usage = m.Usage(**fields)
        return fields is not None

    def _merge(self, raw: Any) -> None:
        """Anthropic: later events restate some counts (always the output); a figure present wins."""
        if not isinstance(raw, dict):
            return
        fields = {name: value for name, value in (anthropic_usage(raw) or {}).items() if raw.get(name) is not None}
        self._fields.update(fields)
        self.usage = m.Usage(**{**make_usage(0, 0), **self._fields})


__all__ = ["MAX_LINE_BYTES", "UsageTap", "from_json", "responses_usage"]
