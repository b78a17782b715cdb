"""Requests as sequences of cache units: one `(content key, exact cl100k tokens)` pair per message.

The cost model compares consecutive requests unit by unit, so a unit's key must change exactly when
the bytes the provider would see change. A message is rendered from its canonical blocks (role,
kind, text / tool output, tool name and arguments as JSON, media and opaque parts by their JSON) and
keyed by a BLAKE2b digest of that rendering. Token counts follow `store.raw.message_tokens` but
exactly: text, reasoning and tool output as text, tool-call arguments as JSON plus 12, images 500,
unknown parts as their JSON, plus 4 per message. Counts are memoized by content digest.

Reasoning blocks count as prompt tokens except Chat Completions reasoning fields (`model.in_prompt`, the
rule the raw store's estimate follows): Chat Completions has no reasoning input, and DeepSeek drops
earlier rounds' `reasoning_content`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any, Final

from magic_context.wire import model as m

Unit = tuple[str, int]  # (content key, tokens)

MESSAGE_OVERHEAD: Final = 4
TOOL_CALL_OVERHEAD: Final = 12
MEDIA_TOKENS: Final = 500


def _digest(data: str) -> bytes:
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


class TokenCounter:
    """Exact cl100k counts memoized by content digest, and message → unit rendering.

    `count` defaults to `tokens.count_exact`; tests may pass a simple function instead. Blocks the
    provider does not read (`model.in_prompt`) are not part of the prompt (neither tokens nor key); with
    `reasoning=False` no reasoning block is.
    """

    def __init__(self, count: Callable[[str], int] | None = None, *, reasoning: bool = True) -> None:
        if count is None:
            from magic_context.tokens import count_exact

            count = count_exact
        self._count = count
        self.reasoning = reasoning
        self._texts: dict[bytes, int] = {}
        self._messages: dict[tuple[int, tuple[tuple[int, str], ...]], tuple[m.Message, Unit]] = {}

    def text(self, text: str) -> int:
        """Exact tokens of `text` (memoized)."""
        if not text:
            return 0
        key = _digest(text)
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = self._count(text)
        return found

    def block(self, block: m.Block) -> tuple[str, int]:
        """(rendering, tokens) of one block."""
        if block.kind == m.TOOL_CALL:
            args = _json(block.input)
            return f"call\x1f{block.tool_name}\x1f{block.tool_id}\x1f{args}", self.text(args) + TOOL_CALL_OVERHEAD
        if block.kind == m.MEDIA:
            return f"media\x1f{block.media_type}\x1f{_json(block.raw)}", MEDIA_TOKENS
        if block.kind == m.OPAQUE:
            body = _json(block.raw) if block.raw is not None else ""
            return f"opaque\x1f{body}", self.text(body)
        if block.kind == m.TOOL_RESULT:
            return f"result\x1f{block.tool_id}\x1f{block.text}", self.text(block.text)
        return f"{block.kind}\x1f{block.text}", self.text(block.text)

    def message(self, msg: m.Message, replace: dict[int, str] | None = None, *, memo: bool = True) -> Unit:
        """The unit of `msg`; `replace` maps block indexes to text served instead (a placeholder).

        With `memo` the unit is cached by object identity (safe for messages that live for the whole
        replay, such as the decoded history); pass memo=False for short-lived messages.
        """
        rkey = tuple(sorted(replace.items())) if replace else ()
        if memo:
            hit = self._messages.get((id(msg), rkey))
            if hit is not None and hit[0] is msg:
                return hit[1]
        parts = [msg.role]
        total = MESSAGE_OVERHEAD
        for index, block in enumerate(msg.blocks):
            if block.kind == m.REASONING and not (self.reasoning and m.in_prompt(block)):
                continue
            if replace and index in replace:
                text = replace[index]
                parts.append(f"result\x1f{block.tool_id}\x1f{text}")
                total += self.text(text)
                continue
            rendering, tokens = self.block(block)
            parts.append(rendering)
            total += tokens
        unit = (_digest("\x1e".join(parts)).hex(), total)
        if memo:
            self._messages[(id(msg), rkey)] = (msg, unit)
        return unit

    def system(self, texts: Iterable[str]) -> list[Unit]:
        """Units for system prompt entries (one per entry)."""
        out = []
        for text in texts:
            if text:
                out.append(("sys:" + _digest(text).hex(), self.text(text) + MESSAGE_OVERHEAD))
        return out


def total(units: Iterable[Unit]) -> int:
    """Tokens of a request."""
    return sum(u[1] for u in units)


__all__ = ["MEDIA_TOKENS", "MESSAGE_OVERHEAD", "TOOL_CALL_OVERHEAD", "TokenCounter", "Unit", "total"]
