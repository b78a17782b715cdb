"""Errors the proxy itself answers with, shaped like the provider's own so every client shows them.

Anthropic: `{"type": "error", "error": {"type", "message"}}`; OpenAI (Chat and Responses):
`{"error": {"message", "type", "param", "code"}}`. Every message passes through the log redaction.
"""

from __future__ import annotations

import json

from magic_context import log
from magic_context.proxy.routes import ANTHROPIC

# status → Anthropic error type (OpenAI clients get the OpenAI-style type and a code).
_ANTHROPIC_TYPES = {400: "invalid_request_error", 413: "request_too_large", 502: "api_error", 504: "api_error"}
_OPENAI_TYPES = {400: "invalid_request_error", 413: "invalid_request_error", 502: "server_error", 504: "server_error"}


def error_body(wire: str, status: int, message: str, *, code: str | None = None) -> bytes:
    """The JSON error body for `wire` ("anthropic" or an OpenAI wire)."""
    message = log.redact(message)
    if wire == ANTHROPIC:
        document = {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    else:
        document = {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "server_error"), "param": None,
                              "code": code}}
    return json.dumps(document, ensure_ascii=False).encode()


def error_event(wire: str, message: str) -> bytes:
    """An SSE event telling a client whose stream broke off what happened (Anthropic's `error` event)."""
    body = error_body(wire, 502, message).decode()
    return f"event: error\ndata: {body}\n\n".encode() if wire == ANTHROPIC else f"data: {body}\n\n".encode()


def emergency_message(detail: str) -> str:
    """The context-emergency answer: what happened and what to do (the wording clients key on first)."""
    return f"prompt is too long: mc stopped this request — {detail}"


__all__ = ["emergency_message", "error_body", "error_event"]
