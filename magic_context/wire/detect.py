"""Tell which harness format a document is in, from its shape (used when the input names no `harness`).

The document is a bare messages array, a provider request body or an envelope with `messages`; an
object with an `input` array (or string) and no `messages` is an OpenAI Responses body. Otherwise
the marks are read in this order, so every real client's body lands in its own format (the captured
bodies in `../shared/data/requests` are tested):

1. The first message with a format-specific mark decides: Pi roles and fields; OpenAI `developer` /
   `tool` roles and tool-call fields; Anthropic block types; Responses item types and parts.
2. A `role: "system"` message is no mark by itself: Claude Code puts them inside Anthropic
   `messages`. A body with a top-level key only the Anthropic API has (`system`, `stop_sequences`,
   `context_management`, `output_config`) is Anthropic; else a system message means OpenAI Chat.
3. A plain user/assistant conversation is Anthropic when the body has `max_tokens`, else OpenAI
   (OpenAI Chat bodies may carry `max_tokens` too, as OpenCode's do, but those hold a system message).
"""

from __future__ import annotations

from magic_context.errors import BadInput
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

_PI_ROLES = frozenset({"toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_OPENAI_ROLES = frozenset({"developer", "tool"})
_OPENAI_FIELDS = ("tool_calls", "tool_call_id", "function_call", "reasoning_content")
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
                               "web_search_tool_result", "document"})
_ANTHROPIC_KEYS = ("system", "stop_sequences", "context_management", "output_config")
# Responses items without a role (`message` is no mark: Anthropic response objects carry it too).
_RESPONSES_ITEMS = frozenset({"function_call", "function_call_output", "custom_tool_call",
                              "custom_tool_call_output", "reasoning", "item_reference"})
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_KNOWN_ROLES = frozenset({"user", "assistant", "system"})


def _mark(msg: dict) -> str | None:
    """The format this one message proves, or None when it could be any of them."""
    role = msg.get("role")
    if isinstance(role, str) and role in _PI_ROLES:
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
        if not isinstance(kind, str):
            continue  # no format's block: the codec names it
        # Pi's thinking carries `thinkingSignature` (or nothing), Anthropic's always `signature`
        if kind == "toolCall" or (kind == "thinking" and "signature" not in block) \
                or (kind == "image" and "mimeType" in block):
            return m.PI
        if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
            return m.ANTHROPIC
        if kind in _OPENAI_PARTS:
            return m.OPENAI
        if kind in _RESPONSES_PARTS:
            return m.OPENAI_RESPONSES
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
        if "messages" not in doc and isinstance(doc.get("input"), list | str):
            return m.OPENAI_RESPONSES
        body, doc = doc, doc.get("messages")
        if not isinstance(doc, list):
            raise BadInput("unknown message shape: the object has no `messages` array (nor a Responses `input`)")
    elif not isinstance(doc, list):
        raise BadInput("unknown message shape: expected an array of messages or an object with `messages`")
    if doc and isinstance(doc[0], dict) and "info" in doc[0] and "parts" in doc[0]:
        return m.OPENCODE
    odd: str | None = None
    system_role = False
    for i, msg in enumerate(doc):
        if not isinstance(msg, dict):
            raise BadInput(f"unknown message shape: messages[{i}] is not an object")
        if isinstance(msg.get("type"), str) and msg["type"] in _RESPONSES_ITEMS:
            return m.OPENAI_RESPONSES
        role = msg.get("role")
        if not isinstance(role, str):
            raise BadInput(f"unknown message shape: messages[{i}] has no role")
        found = _mark(msg)
        if found is not None:
            return found
        system_role = system_role or role == "system"
        if odd is None and role not in _KNOWN_ROLES:
            odd = f"messages[{i}] has role {role[:40]!r}"
    if body is not None and any(body.get(key) is not None for key in _ANTHROPIC_KEYS):
        return m.ANTHROPIC
    if system_role:  # a system message vouches for a chat array: stray records (mini-swe-agent `exit`) are fine
        return m.OPENAI
    if odd is not None:
        raise BadInput(f"unknown message shape: {odd}")
    if body is not None and "max_tokens" in body:
        return m.ANTHROPIC
    return m.OPENAI


__all__ = ["detect_harness"]
