"""Tell which harness format a document is in, from its shape (used when the input names no `harness`).

The document is a bare messages array, a provider request body or an envelope with `messages`. The first
message that carries a format-specific mark decides; a plain user/assistant conversation with nothing
specific is Anthropic when the body has a top-level `system` or `max_tokens`, else OpenAI.
"""

from __future__ import annotations

from magic_context.errors import BadInput
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

_PI_ROLES = frozenset({"toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool"})
_OPENAI_FIELDS = ("tool_calls", "tool_call_id", "function_call", "reasoning_content")
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
                               "web_search_tool_result", "document"})
_PLAIN_ROLES = frozenset({"user", "assistant"})


def _mark(msg: dict) -> str | None:
    """The format this one message proves, or None when it could be any of them."""
    role = msg.get("role")
    if role in _PI_ROLES:
        return m.PI
    if role in _OPENAI_ROLES or any(f in msg for f in _OPENAI_FIELDS):
        return m.OPENAI
    stamp = msg.get("timestamp")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return m.PI
    content = msg.get("content")
    if not isinstance(content, list):
        return None
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        # Pi's thinking carries `thinkingSignature` (or nothing), Anthropic's always `signature`
        if kind == "toolCall" or (kind == "thinking" and "signature" not in block) \
                or (kind == "image" and "mimeType" in block):
            return m.PI
        if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
            return m.ANTHROPIC
        if kind in _OPENAI_PARTS:
            return m.OPENAI
    return None


def detect_harness(doc: Any) -> str:
    """One of model.HARNESSES for a messages array, a provider request body or an envelope.

    An envelope's own valid `harness` wins. Raises BadInput("unknown message shape: ...") when the
    document matches no format.
    """
    body: dict | None = None
    if isinstance(doc, dict):
        named = doc.get("harness")
        if named is not None:
            if named not in m.HARNESSES:
                raise BadInput(f"unknown harness {str(named)[:40]!r}", fix=f"use one of {', '.join(m.HARNESSES)}")
            return named
        body, doc = doc, doc.get("messages")
        if not isinstance(doc, list):
            raise BadInput("unknown message shape: the object has no `messages` array")
    elif not isinstance(doc, list):
        raise BadInput("unknown message shape: expected an array of messages or an object with `messages`")
    if doc and isinstance(doc[0], dict) and "info" in doc[0] and "parts" in doc[0]:
        return m.OPENCODE
    odd: str | None = None
    for i, msg in enumerate(doc):
        if not isinstance(msg, dict):
            raise BadInput(f"unknown message shape: messages[{i}] is not an object")
        role = msg.get("role")
        if not isinstance(role, str):
            raise BadInput(f"unknown message shape: messages[{i}] has no role")
        found = _mark(msg)
        if found is not None:
            return found
        if odd is None and role not in _PLAIN_ROLES:
            odd = f"messages[{i}] has role {role[:40]!r}"
    if odd is not None:
        raise BadInput(f"unknown message shape: {odd}")
    if body is not None and (body.get("system") is not None or "max_tokens" in body):
        return m.ANTHROPIC
    return m.OPENAI


__all__ = ["detect_harness"]
