"""The `sessions` table: one row per (harness, session_id), shared by every table family (stdlib only)."""

from __future__ import annotations

import sqlite3

from magic_context.errors import BadInput, NotFound
from magic_context.store.db import classify

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

INFO_COLUMNS = ("harness", "session_id", "project_id", "project_dir", "agent", "model_key", "context_limit",
                "tag_counter", "created_at", "updated_at")


def ensure_session(
    conn: sqlite3.Connection,
    harness: str,
    session_id: str,
    *,
    project_id: str | None = None,
    project_dir: str | None = None,
    now_ms: int,
) -> int:
    """The `sessions.id` of (harness, session_id), creating the row; writes only when something is new."""
    try:
        row = conn.execute(
            "SELECT id, project_id, project_dir FROM sessions WHERE harness = ? AND session_id = ?",
            (harness, session_id),
        ).fetchone()
        if row is not None and project_id in (None, row[1]) and project_dir in (None, row[2]):
            return int(row[0])
        row = conn.execute(
            "INSERT INTO sessions (harness, session_id, project_id, project_dir, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (harness, session_id) DO UPDATE SET"
            " project_id = COALESCE(excluded.project_id, sessions.project_id),"
            " project_dir = COALESCE(excluded.project_dir, sessions.project_dir),"
            " updated_at = excluded.updated_at"
            " RETURNING id",
            (harness, session_id, project_id, project_dir, now_ms, now_ms),
        ).fetchone()
    except sqlite3.Error as exc:
        raise classify(exc) from exc
    return int(row[0])


def lookup_session(conn: sqlite3.Connection, harness: str, session_id: str) -> tuple[int, str | None] | None:
    """`(sessions.id, project_id)` of (harness, session_id), or None when it was never stored."""
    row = conn.execute("SELECT id, project_id FROM sessions WHERE harness = ? AND session_id = ?",
                       (harness, session_id)).fetchone()
    return None if row is None else (int(row[0]), row[1])


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


def latest_session(conn: sqlite3.Connection, project_id: str | None = None) -> int | None:
    """The most recently updated session (of `project_id` when given), or None."""
    if project_id:
        row = conn.execute("SELECT id FROM sessions WHERE project_id = ? ORDER BY updated_at DESC, id DESC LIMIT 1",
                           (project_id,)).fetchone()
    else:
        row = conn.execute("SELECT id FROM sessions ORDER BY updated_at DESC, id DESC LIMIT 1").fetchone()
    return int(row[0]) if row else None


def session_info(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any] | None:
    """The session's descriptive columns (`INFO_COLUMNS`) by name, or None when the row is gone."""
    row = conn.execute(f"SELECT {', '.join(INFO_COLUMNS)} FROM sessions WHERE id = ?", (session_pk,)).fetchone()
    return None if row is None else dict(zip(INFO_COLUMNS, tuple(row), strict=True))


def tag_counter(conn: sqlite3.Connection, session_pk: int) -> int:
    """The highest tag number handed out in the session (0 before the first tag)."""
    row = conn.execute("SELECT tag_counter FROM sessions WHERE id = ?", (session_pk,)).fetchone()
    return int(row[0]) if row else 0


def record_pass(conn: sqlite3.Connection, session_pk: int, *, tag_counter: int, now_ms: int, model_key: str | None,
                context_limit: int | None) -> None:
    """After a pass: the new tag counter, the model and window it ran under, and the activity time."""
    conn.execute("UPDATE sessions SET tag_counter = ?, updated_at = ?, model_key = ?, context_limit = ? WHERE id = ?",
                 (tag_counter, now_ms, model_key, context_limit, session_pk))


def touch(conn: sqlite3.Connection, session_pk: int, now_ms: int) -> None:
    """Mark the session as active at `now_ms` (the raw store does after writing messages)."""
    conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now_ms, session_pk))


__all__ = [
    "INFO_COLUMNS",
    "ensure_session",
    "find_session",
    "latest_session",
    "lookup_session",
    "record_pass",
    "session_info",
    "tag_counter",
    "touch",
]
