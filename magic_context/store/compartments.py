"""The `compartments` and `compartment_events` tables: the historian's published summaries of folded history.

Stdlib only (hot path: the pass reads the fold watermark and renders the head from these rows).
"""

from __future__ import annotations

import json
import sqlite3

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

HEAD_COLUMNS = ("sequence, start_ordinal, end_ordinal, title, p1, p2, p3, p4, content, importance, episode_type, "
                "legacy, start_time, end_time")


def last_end(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The highest published end ordinal of the session, or None before its first compartment."""
    row = conn.execute("SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (session_pk,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def last_sequence(conn: sqlite3.Connection, session_pk: int) -> int:
    """The session's highest compartment sequence (0 before the first)."""
    row = conn.execute("SELECT coalesce(max(sequence), 0) FROM compartments WHERE session_pk = ?",
                       (session_pk,)).fetchone()
    return int(row[0])


def insert(conn: sqlite3.Connection, session_pk: int, *, sequence: int, start: int, end: int,
           start_message_id: str | None, end_message_id: str | None, title: str, p1: str, p2: str, p3: str, p4: str,
           content: str, importance: int, episode_type: str | None, start_time: int | None, end_time: int | None,
           now_ms: int) -> int:
    """Store one compartment; returns its id."""
    cur = conn.execute(
        "INSERT INTO compartments (session_pk, sequence, start_ordinal, end_ordinal, start_message_id, "
        "end_message_id, title, p1, p2, p3, p4, content, importance, episode_type, legacy, start_time, "
        "end_time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
        (session_pk, sequence, start, end, start_message_id, end_message_id, title, p1, p2, p3, p4, content,
         importance, episode_type, start_time, end_time, now_ms))
    return int(cur.lastrowid or 0)


def insert_event(conn: sqlite3.Connection, session_pk: int, compartment_id: int | None, kind: str,
                 fields: dict[str, Any]) -> None:
    """Store one historian event (anchored to a compartment when it names one)."""
    conn.execute("INSERT INTO compartment_events (session_pk, compartment_id, kind, fields_json) VALUES (?, ?, ?, ?)",
                 (session_pk, compartment_id, kind, json.dumps(fields, ensure_ascii=False)))


def for_head(conn: sqlite3.Connection, session_pk: int, after_sequence: int = -1) -> list[sqlite3.Row]:
    """The compartments after `after_sequence`, in order, with everything the head renders."""
    return conn.execute(f"SELECT {HEAD_COLUMNS} FROM compartments WHERE session_pk = ? AND sequence > ? "
                        "ORDER BY sequence", (session_pk, after_sequence)).fetchall()


def references(conn: sqlite3.Connection, session_pk: int, limit: int) -> list[sqlite3.Row]:
    """The newest `limit` compartments, oldest first: what the historian's prompt shows as prior context."""
    return conn.execute("SELECT start_ordinal, end_ordinal, title, p2, p3, content FROM compartments "
                        "WHERE session_pk = ? ORDER BY sequence DESC LIMIT ?", (session_pk, limit)).fetchall()[::-1]


def outline(conn: sqlite3.Connection, session_pk: int) -> list[dict[str, Any]]:
    """Each compartment's sequence, start, end, title and importance, in order (`mc status`)."""
    rows = conn.execute("SELECT sequence, start_ordinal, end_ordinal, title, importance FROM compartments "
                        "WHERE session_pk = ? ORDER BY sequence", (session_pk,))
    return [dict(zip(("sequence", "start", "end", "title", "importance"), r, strict=True)) for r in rows]


def count_all(conn: sqlite3.Connection) -> int:
    """Compartments in the whole database (replay reports)."""
    return int(conn.execute("SELECT count(*) FROM compartments").fetchone()[0])


__all__ = ["HEAD_COLUMNS", "count_all", "for_head", "insert", "insert_event", "last_end", "last_sequence",
           "outline", "references"]
