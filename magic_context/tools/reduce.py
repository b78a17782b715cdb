"""ctx_reduce: queue drops of tagged parts; they apply on the next pass that busts the cache anyway.

Errors name the tags that are unknown, protected (the newest `protected_tags`) or already dropped,
and nothing is queued when any requested tag is invalid. Tags already queued are skipped.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from magic_context.errors import BadInput, NotFound
from magic_context.transform.ranges import format_ranges, parse_ranges


@dataclass(frozen=True)
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


def find_session(conn: sqlite3.Connection, session_id: str, harness: str | None = None) -> int:
    """The session row id for a harness session id; BadInput when ambiguous, NotFound when unknown."""
    if harness:
        rows = conn.execute("SELECT id FROM sessions WHERE session_id = ? AND harness = ?",
                            (session_id, harness)).fetchall()
    else:
        rows = conn.execute("SELECT id, harness FROM sessions WHERE session_id = ?", (session_id,)).fetchall()
    if not rows:
        raise NotFound(f"no session {session_id!r} in the database", fix="check the id with `mc status --latest`")
    if len(rows) > 1:
        raise BadInput(f"session id {session_id!r} exists for several harnesses", fix="pass --harness")
    return int(rows[0][0])


def protected_numbers(conn: sqlite3.Connection, session_pk: int, protected_tags: int) -> set[int]:
    rows = conn.execute(
        "SELECT tag_number FROM tags WHERE session_pk = ? AND status = 'active' ORDER BY tag_number DESC LIMIT ?",
        (session_pk, protected_tags),
    ).fetchall()
    return {r[0] for r in rows}


def queue_drops(conn: sqlite3.Connection, session_pk: int, drop: str, *, protected_tags: int, now_ms: int,
                forced: bool = False) -> ReduceResult:
    """Validate and queue pending drops for the tags named by `drop` ("3-5,9")."""
    numbers = parse_ranges(drop)
    status = dict(conn.execute(
        f"SELECT tag_number, status FROM tags WHERE session_pk = ? AND tag_number IN ({','.join('?' * len(numbers))})",
        (session_pk, *numbers),
    ).fetchall())
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
    pending = {r[0] for r in conn.execute(
        "SELECT tag_number FROM pending_ops WHERE session_pk = ? AND operation = 'drop'", (session_pk,))}
    fresh = [n for n in numbers if n not in pending]
    conn.executemany(
        "INSERT OR IGNORE INTO pending_ops (session_pk, tag_number, operation, forced, queued_at) VALUES (?,?,?,?,?)",
        [(session_pk, n, "drop", int(forced), now_ms) for n in fresh],
    )
    return ReduceResult(fresh, sorted(pending.intersection(numbers)))


__all__ = ["ReduceResult", "find_session", "protected_numbers", "queue_drops"]
