"""The `pass_reports` table: what each transform pass did (kind, bust, tokens, timing), newest kept per session.

Stdlib only (hot path: every pass writes its report).
"""

from __future__ import annotations

import json
import sqlite3
from enum import StrEnum

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


class PassKind(StrEnum):
    """A pass report's `pass` (`pass_reports.pass_kind`): defer (the cached prefix is kept), execute (the pass
    busts the cache and applies queued work) or fold (HARD: m[0] is rebuilt)."""

    DEFER = "defer"
    EXECUTE = "execute"
    FOLD = "fold"


class HistorianActivity(StrEnum):
    """A pass report's `historian`: what the pass found or did: idle, running (a live run holds the lease)
    or fired (the pass started a run)."""

    IDLE = "idle"
    RUNNING = "running"
    FIRED = "fired"


def record_report(conn: sqlite3.Connection, session_pk: int, report: dict[str, Any], *, now_ms: int,
                  keep: int) -> None:
    """Store one pass report and prune the session's reports to the newest `keep`."""
    conn.execute(
        "INSERT INTO pass_reports (session_pk, at, pass_kind, bust, reason, tokens_before, tokens_after, ms, "
        "report_json) VALUES (?,?,?,?,?,?,?,?,?)",
        (session_pk, now_ms, report["pass"], int(report["bust"]), report["reason"], report["tokens_before"],
         report["tokens_after"], report["ms"], json.dumps(report, ensure_ascii=False)),
    )
    conn.execute(
        "DELETE FROM pass_reports WHERE session_pk = ? AND id <= "
        "(SELECT id FROM pass_reports WHERE session_pk = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (session_pk, session_pk, keep),
    )


def last_report(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any]:
    """The newest stored report (usage, threshold as the pass computed them), or {} (none, or unreadable)."""
    row = conn.execute("SELECT report_json FROM pass_reports WHERE session_pk = ? ORDER BY id DESC LIMIT 1",
                       (session_pk,)).fetchone()
    if row is None:
        return {}
    try:
        report = json.loads(row[0])
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def recent_reports(conn: sqlite3.Connection, session_pk: int, limit: int = 200) -> list[dict[str, Any]]:
    """The newest `limit` reports, oldest first."""
    rows = conn.execute("SELECT report_json FROM pass_reports WHERE session_pk = ? ORDER BY id DESC LIMIT ?",
                        (session_pk, limit)).fetchall()
    return [json.loads(r[0]) for r in reversed(rows)]


__all__ = ["last_report", "recent_reports", "record_report"]
