"""Temporal markers: `<!-- +2h 15m -->` before a user message that follows a gap of ≥ 5 minutes.

A pure function of message timestamps, so it replays byte-identically on every pass.
"""

from __future__ import annotations

import re

from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

MIN_GAP_MS: Final = 5 * 60_000
MARKER_RE: Final = re.compile(r"^<!-- \+\d+[mhdw](?: \d+[mhdw])? -->\n")


def format_gap(ms: int) -> str:
    minutes = ms // 60_000
    if minutes < 60:
        return f"+{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"+{hours}h {minutes}m" if minutes else f"+{hours}h"
    days, hours = divmod(hours, 24)
    if days < 7:
        return f"+{days}d {hours}h" if hours else f"+{days}d"
    weeks, days = divmod(days, 7)
    return f"+{weeks}w {days}d" if days else f"+{weeks}w"


def markers(messages: list[m.Message]) -> dict[str, str]:
    """Id of each user message that deserves a marker → the marker line (with its newline)."""
    out: dict[str, str] = {}
    previous: int | None = None
    for message in messages:
        at = message.created_at
        if message.role == m.USER and at is not None and previous is not None and at - previous >= MIN_GAP_MS:
            out[message.id] = f"<!-- {format_gap(at - previous)} -->\n"
        stamp = message.completed_at or message.created_at
        if stamp is not None:
            previous = stamp
    return out


def apply(messages: list[m.Message], found: dict[str, str]) -> None:
    """Prefix the first text block of each marked message (after tagging, so the marker leads)."""
    for message in messages:
        marker = found.get(message.id)
        if marker is None:
            continue
        for block in message.blocks:
            if block.kind == m.TEXT and block.text.strip():
                if not MARKER_RE.match(block.text):
                    block.text = marker + block.text
                break


__all__ = ["MARKER_RE", "MIN_GAP_MS", "apply", "format_gap", "markers"]
