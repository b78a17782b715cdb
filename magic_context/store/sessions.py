"""The `sessions` table: one row per (harness, session_id), shared by every table family (stdlib only)."""

from __future__ import annotations

import sqlite3

from magic_context.store.db import classify


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


__all__ = ["ensure_session"]
