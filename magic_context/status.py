"""Everything `mc status` shows for one session, as plain data (the command renders it)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from magic_context import paths
from magic_context.errors import NotFound
from magic_context.store import responses
from magic_context.tools.reduce import find_session

RECENT_PASSES = 10


def latest_session(conn: sqlite3.Connection, project_id: str | None = None) -> int | None:
    if project_id:
        row = conn.execute("SELECT id FROM sessions WHERE project_id = ? ORDER BY updated_at DESC, id DESC LIMIT 1",
                           (project_id,)).fetchone()
    else:
        row = conn.execute("SELECT id FROM sessions ORDER BY updated_at DESC, id DESC LIMIT 1").fetchone()
    return int(row[0]) if row else None


def cache_split(reports: list[dict[str, Any]]) -> dict[str, float]:
    """Estimated cache-read / cache-write tokens over consecutive passes (oldest first).

    A defer pass re-reads the previous request from cache and writes only what was appended; a
    busting pass is counted as written in full (conservative: a SOFT pass really keeps m[0] cached).
    """
    read = written = 0
    previous = None
    for report in reports:
        size = int(report.get("tokens_after", 0))
        if previous is not None and report.get("pass") == "defer":
            reused = min(previous, size)
            read += reused
            written += size - reused
        else:
            written += size
        previous = size
    total = read + written
    return {"read_tokens": read, "write_tokens": written, "read_share": round(read / total, 4) if total else 0.0}


def session_status(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any]:
    row = conn.execute("SELECT harness, session_id, project_id, project_dir, agent, model_key, context_limit, "
                       "tag_counter, created_at, updated_at FROM sessions WHERE id = ?", (session_pk,)).fetchone()
    if row is None:
        raise NotFound(f"session #{session_pk} not found")
    harness, session_id, project_id, project_dir, agent, model_key, limit, counter, created, updated = tuple(row)
    tag_counts = dict(conn.execute("SELECT status, count(*) FROM tags WHERE session_pk = ? GROUP BY status",
                                   (session_pk,)).fetchall())
    pending = [r[0] for r in conn.execute(
        "SELECT tag_number FROM pending_ops WHERE session_pk = ? ORDER BY tag_number", (session_pk,))]
    rows = conn.execute("SELECT sequence, start_ordinal, end_ordinal, title, importance FROM compartments "
                        "WHERE session_pk = ? ORDER BY sequence", (session_pk,))
    compartments = [dict(zip(("sequence", "start", "end", "title", "importance"), r, strict=True)) for r in rows]
    memories = conn.execute("SELECT count(*) FROM memories WHERE project_id = ? AND status IN ('active','permanent')",
                            (project_id,)).fetchone()[0]
    raw_count = conn.execute("SELECT count(*) FROM raw_messages WHERE session_pk = ? AND superseded_at IS NULL",
                             (session_pk,)).fetchone()[0]
    reports = [json.loads(r[0]) for r in conn.execute(
        "SELECT report_json FROM pass_reports WHERE session_pk = ? ORDER BY id DESC LIMIT 200", (session_pk,))]
    reports.reverse()
    last = reports[-1] if reports else {}
    state = {k: v for k, v in conn.execute(
        "SELECT key, value FROM session_state WHERE session_pk = ? AND key IN ('historian', 'historian_failure')",
        (session_pk,))}
    used = int(last.get("tokens_after", 0))
    window = int(last.get("context_limit") or limit or 0)
    if compartments:
        from magic_context.history import decay

        tiers = decay.assign_tiers([{"importance": c["importance"]} for c in compartments],
                                   max(1, int(0.15 * window * 0.65)) if window else None)
        for compartment, tier in zip(compartments, tiers, strict=True):
            compartment["tier"] = tier
    return {
        "session": {"harness": harness, "session_id": session_id, "project_id": project_id,
                    "project_dir": project_dir, "agent": agent, "model": model_key,
                    "created_at": created, "updated_at": updated},
        "context": {"used_tokens": used, "limit_tokens": window,
                    "percent": round(100 * used / window, 1) if window else None,
                    "usage_tokens": last.get("usage_tokens"), "usage_source": last.get("usage_source"),
                    "last_response_usage": responses.describe(conn, session_pk)},
        "tags": {"total": counter, "active": tag_counts.get("active", 0), "dropped": tag_counts.get("dropped", 0)},
        "pending_drops": pending,
        "raw_messages": raw_count,
        "compartments": compartments,
        "memories": memories,
        "historian": {"state": json.loads(state["historian"]) if state.get("historian") else "idle",
                      "last_failure": json.loads(state["historian_failure"]) if state.get("historian_failure")
                      else None},
        "search": _search(conn, session_pk),
        "passes": reports[-RECENT_PASSES:],
        "cache": cache_split(reports),
        "paths": paths.all_paths(),
    }


def _search(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any]:
    """Search index and embedding state (issue #12): indexed messages, vectors, the last embedding failure."""
    from magic_context.search.indexer import describe

    return describe(conn, session_pk)


def status(conn: sqlite3.Connection, *, session_id: str | None = None, harness: str | None = None,
           project_id: str | None = None) -> dict[str, Any]:
    """Status of the named session, else the latest one; `{"session": None, ...}` when there is none."""
    pk = find_session(conn, session_id, harness) if session_id else latest_session(conn, project_id)
    if pk is None:
        return {"session": None, "paths": paths.all_paths()}
    return session_status(conn, pk)


__all__ = ["cache_split", "latest_session", "session_status", "status"]
