"""`mc expand` / `ctx_expand` (§7.2): read folded history back — a range, one message, or one tag's message.

A range shows each message as `[N] U:` / `[N] A:` / `[N] T:` lines holding the same text the search index
holds (prose, tool inputs, a bounded head of tool outputs), within a 15 000-token budget; a cut range
ends with a footer naming the call that continues it. Ranges stop at the last compartment end: the live
tail is already in context. `message=N` shows one message whole (text, each tool call's full input and
output), dropped outputs included.
"""

from __future__ import annotations

import sqlite3
from enum import StrEnum
from typing import Any, Final

from magic_context.errors import BadInput, NotFound
from magic_context.records import Factory, record
from magic_context.results import Result
from magic_context.store.db import fits_integer

BUDGET_TOKENS: Final = 15_000
ROLE_LETTER: Final = {"user": "U", "assistant": "A", "tool": "T", "system": "S"}
USAGE: Final = "provide either message=<ordinal>, or start and end (positive integers, start <= end)."


class ExpandKind(StrEnum):
    """What `mc expand` / `ctx_expand` showed (`kind` in `mc expand --json`)."""

    RANGE = "range"
    MESSAGE = "message"
    LIVE_TAIL = "live_tail"  # the range is all after the last compartment: already in context
    EMPTY = "empty"


@record
class Expanded:
    kind: ExpandKind
    text: str
    start: int | None = None
    end: int | None = None
    messages: list[dict[str, Any]] = Factory(factory=list)
    tokens: int = 0
    truncated_at: int | None = None
    next_range: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "start": self.start, "end": self.end, "tokens": self.tokens,
                "truncated_at": self.truncated_at, "next_range": self.next_range, "messages": self.messages,
                "text": self.text}

    def to_result(self) -> Result:
        """`mc expand`'s result (the `text` is what people read)."""
        return Result("expand", self.as_dict())


def parse_range(value: str) -> tuple[int, int]:
    """`A-B` (or a single `N`) as integers with 0 ≤ A ≤ B; BadInput otherwise."""
    parts = value.strip().split("-")
    try:
        if len(parts) == 1:
            start = end = int(parts[0])
        elif len(parts) == 2:
            start, end = int(parts[0]), int(parts[1])
        else:
            raise ValueError(value)
    except ValueError:
        raise BadInput(f"--range {value!r} is not A-B", fix="e.g. --range 120-140 (ordinals from mc search)") from None
    if start < 0 or end < start:
        raise BadInput(f"--range {value!r}: {USAGE}", fix="start and end are ordinals with start <= end")
    return start, end


def _decode(conn: sqlite3.Connection, session_pk: int, start: int, end: int) -> list[Any]:
    from magic_context.history.runner import _decode
    from magic_context.store import raw
    from magic_context.store.search_index import session_field

    harness = session_field(conn, session_pk, "harness")
    return _decode(harness, raw.read_range(conn, session_pk, start, end))


def expand_range(conn: sqlite3.Connection, session_pk: int, start: int, end: int, *, cli: bool = False,
                 session_id: str | None = None, harness: str | None = None, budget: int = BUDGET_TOKENS) -> Expanded:
    from magic_context.search import text as st
    from magic_context.search.indexer import cutoff
    from magic_context.tokens import estimate

    last = cutoff(conn, session_pk)
    if start > last:
        folded = f"after the last compacted message {last}" if last >= 0 else "after the last compacted message " \
                                                                               "(nothing is compacted yet)"
        return Expanded(ExpandKind.LIVE_TAIL, f"Range {start}-{end} is entirely within the live tail ({folded}); "
                        "those messages are already visible in context.", start, end)
    end = min(end, last)
    messages = _decode(conn, session_pk, start, end)
    if not messages:
        return Expanded(ExpandKind.EMPTY, f"No messages found in range {start}-{end}. The range may be outside "
                        "this session's history.", start, end)
    lines: list[str] = []
    shown: list[dict[str, Any]] = []
    used = 0
    truncated = None
    for msg in messages:
        body = st.message_text(msg)
        if not body:
            continue
        line = f"[{msg.ordinal}] {ROLE_LETTER.get(msg.role, msg.role[:1].upper())}: {body}"
        cost = estimate(line)
        if shown and used + cost > budget:
            truncated = shown[-1]["ordinal"]
            break
        lines.append(line)
        used += cost
        shown.append({"ordinal": msg.ordinal, "role": msg.role, "text": body})
    header = f"Messages {start}-{end} ({len(shown)} messages, ~{used} tokens):"
    out = Expanded(ExpandKind.RANGE, "", start, end, shown, used)
    text = [header, *lines]
    if truncated is not None:
        out.truncated_at, out.next_range = truncated, f"{truncated + 1}-{end}"
        which = f"--session {session_id}" + (f" --harness {harness}" if harness else "")  # as the caller named it
        how = (f"mc expand {which} --range {truncated + 1}-{end}" if cli
               else f"start={truncated + 1} end={end}")
        text.append(f"Truncated at message {truncated} (budget: ~{budget} tokens). Call again with {how} for more.")
    out.text = "\n".join(text)
    return out


def expand_message(conn: sqlite3.Connection, session_pk: int, ordinal: int) -> Expanded:
    from magic_context.search import text as st

    messages = _decode(conn, session_pk, ordinal, ordinal) if fits_integer(ordinal) else []
    if not messages:
        return Expanded(ExpandKind.EMPTY, f"No messages found in range {ordinal}-{ordinal}. The range may be outside "
                        "this session's history.", ordinal, ordinal)
    msg = messages[0]
    body = st.message_full_text(msg)
    # an output mc dropped from the served context is still whole in the raw store
    text = f"[{msg.ordinal}] {ROLE_LETTER.get(msg.role, msg.role[:1].upper())}:\n{body}"
    from magic_context.tokens import estimate

    return Expanded(ExpandKind.MESSAGE, text, ordinal, ordinal,
                    [{"ordinal": msg.ordinal, "role": msg.role, "text": body}], estimate(text))


def tag_ordinal(conn: sqlite3.Connection, session_pk: int, tag: int) -> int:
    """The ordinal of the message holding tag §N§; NotFound when the tag or its message is unknown."""
    from magic_context.store.search_index import live_ordinal, tag_message_id

    message_id = tag_message_id(conn, session_pk, tag)
    if message_id is None:
        raise NotFound(f"no tag {tag} in this session", fix="tags are the §N§ numbers shown in the context")
    found = live_ordinal(conn, session_pk, message_id)
    if found is None:
        raise NotFound(f"tag {tag}'s message is no longer in the raw history")
    return int(found)


__all__ = ["BUDGET_TOKENS", "ExpandKind", "Expanded", "expand_message", "expand_range", "parse_range", "tag_ordinal"]
