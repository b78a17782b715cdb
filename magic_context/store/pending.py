"""The `pending_ops` table: ctx_reduce drops queued until a pass that busts the cache anyway applies them.

Stdlib only (hot path: every pass drains what it can).
"""

from __future__ import annotations

import sqlite3

DROP = "drop"


def queued_drops(conn: sqlite3.Connection, session_pk: int) -> list[tuple[int, int]]:
    """`(tag_number, forced)` of every queued drop, in storage order."""
    rows = conn.execute("SELECT tag_number, forced FROM pending_ops WHERE session_pk = ? AND operation = 'drop'",
                        (session_pk,)).fetchall()
    return [(int(r[0]), int(r[1])) for r in rows]


def queued_numbers(conn: sqlite3.Connection, session_pk: int) -> list[int]:
    """The tag numbers of every queued operation, ascending."""
    return [r[0] for r in conn.execute(
        "SELECT tag_number FROM pending_ops WHERE session_pk = ? ORDER BY tag_number", (session_pk,))]


def count(conn: sqlite3.Connection, session_pk: int) -> int:
    """How many operations are queued."""
    return int(conn.execute("SELECT count(*) FROM pending_ops WHERE session_pk = ?", (session_pk,)).fetchone()[0])


def queue(conn: sqlite3.Connection, session_pk: int, numbers: list[int], *, forced: bool, now_ms: int) -> None:
    """Queue drops of `numbers` (a number already queued is left as it is)."""
    conn.executemany(
        "INSERT OR IGNORE INTO pending_ops (session_pk, tag_number, operation, forced, queued_at) VALUES (?,?,?,?,?)",
        [(session_pk, n, DROP, int(forced), now_ms) for n in numbers],
    )


def clear(conn: sqlite3.Connection, session_pk: int, numbers: list[int]) -> None:
    """Remove the queued operations of `numbers` (they were applied)."""
    conn.executemany("DELETE FROM pending_ops WHERE session_pk = ? AND tag_number = ?",
                     [(session_pk, n) for n in numbers])


__all__ = ["DROP", "clear", "count", "queue", "queued_drops", "queued_numbers"]
