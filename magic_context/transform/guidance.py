"""System-prompt guidance: a concise block about tags, ctx_reduce and history, plus a frozen date line.

The block is joined to the first system entry with a blank line (one system message stays one
system message). The `Today's date:` line is frozen per session and moves only on busting passes,
so the system prompt stays byte-stable between busts.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final


REDUCE_GUIDANCE: Final = """## Magic Context
Every message part you see carries a tag such as §12§. Context is limited: when you have used a tool \
output, long text or file content and no longer need it verbatim, drop it with the ctx_reduce tool \
(drop: "3-5,9"). Dropped parts become [dropped §N§] (user text keeps a short [truncated §N§] preview); \
the newest tags are protected. Do not write § tags yourself.
Older history is summarized into <session-history> at the start of the conversation; newer summaries \
appear in <session-history-since>. Use ctx_expand to read a range of the original messages and \
ctx_search to search memories and past messages."""

PLAIN_GUIDANCE: Final = """## Magic Context
Older history is summarized into <session-history> at the start of the conversation; newer summaries \
appear in <session-history-since>. Use ctx_expand to read a range of the original messages and \
ctx_search to search memories and past messages when they are available."""


def date_line(now_ms: int) -> str:
    return "Today's date: " + time.strftime("%Y-%m-%d", time.gmtime(now_ms / 1000))


def guidance_text(*, reduce_available: bool, frozen_date: str) -> str:
    body = REDUCE_GUIDANCE if reduce_available else PLAIN_GUIDANCE
    return f"{body}\n{frozen_date}"


def join(system_text: str, guidance: str) -> str:
    """Append the guidance to a system entry with a blank line; idempotent if it is already there."""
    if guidance in system_text:
        return system_text
    return f"{system_text.rstrip()}\n\n{guidance}" if system_text.strip() else guidance


def skipped(system_text: str, skip_signatures: list[str]) -> bool:
    return any(signature and signature in system_text for signature in skip_signatures)


__all__ = ["PLAIN_GUIDANCE", "REDUCE_GUIDANCE", "date_line", "guidance_text", "join", "skipped"]
