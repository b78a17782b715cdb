"""ctx_reduce: queue drops of tagged parts; they apply on the next pass that busts the cache anyway.

Errors name the tags that are unknown, protected (the newest `protected_tags`) or already dropped,
and nothing is queued when any requested tag is invalid. Tags already queued are skipped.
"""

from __future__ import annotations

import sqlite3

from magic_context.errors import BadInput
from magic_context.records import record
from magic_context.results import Result
from magic_context.store import pending as pending_ops
from magic_context.store import tags as tag_rows
from magic_context.store.db import fits_integer
from magic_context.store.sessions import find_session
from magic_context.transform.ranges import format_ranges, parse_ranges


@record(frozen=True)
class ReduceResult:
    queued: list[int]
    already_pending: list[int]

    def message(self) -> str:
        parts = []
        if self.queued:
            parts.append(f"Queued drop of §{format_ranges(self.queued)}§; it applies on the next cache-busting pass.")
        if self.already_pending:
            parts.append(f"Already queued: {format_ranges(self.already_pending)}.")
        return " ".join(parts) or "Nothing to drop."

    def to_result(self) -> Result:
        return Result("reduce", {"queued": self.queued, "already_pending": self.already_pending,
                                 "message": self.message()})


def protected_numbers(conn: sqlite3.Connection, session_pk: int, protected_tags: int) -> set[int]:
    return tag_rows.newest_active(conn, session_pk, protected_tags)


def queue_drops(conn: sqlite3.Connection, session_pk: int, drop: str, *, protected_tags: int, now_ms: int,
                forced: bool = False) -> ReduceResult:
    """Validate and queue pending drops for the tags named by `drop` ("3-5,9")."""
    numbers = parse_ranges(drop)
    # a number beyond SQLite's INTEGER range names no tag (binding it would raise OverflowError): it stays unknown
    status = tag_rows.statuses(conn, session_pk, [n for n in numbers if fits_integer(n)])
    unknown = [n for n in numbers if n not in status]
    dropped = [n for n in numbers if status.get(n) == "dropped"]
    protected = sorted(protected_numbers(conn, session_pk, protected_tags).intersection(numbers)) if not forced else []
    problems = []
    if unknown:
        problems.append(f"unknown tags {format_ranges(unknown)}")
    if dropped:
        problems.append(f"already dropped {format_ranges(dropped)}")
    if protected:
        problems.append(f"protected (newest {protected_tags}) {format_ranges(protected)}")
    if problems:
        raise BadInput("cannot drop: " + "; ".join(problems), fix="drop only older, active tags")
    pending = {number for number, _forced in pending_ops.queued_drops(conn, session_pk)}
    fresh = [n for n in numbers if n not in pending]
    pending_ops.queue(conn, session_pk, fresh, forced=forced, now_ms=now_ms)
    return ReduceResult(fresh, sorted(pending.intersection(numbers)))


__all__ = ["ReduceResult", "find_session", "protected_numbers", "queue_drops"]
