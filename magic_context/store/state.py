"""The `session_state` table: per-session JSON values by key (cached head, watermarks, historian state).

Stdlib only (hot path). Values are stored as compact JSON; a corrupt value reads as None.
"""

from __future__ import annotations

import json
import sqlite3

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def _loads(value: str | None) -> Any:
    try:
        return json.loads(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # a corrupt value behaves like a missing one


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_state(conn: sqlite3.Connection, session_pk: int, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """The session's values by key (only `keys` when given), JSON-decoded."""
    if keys is None:
        rows = conn.execute("SELECT key, value FROM session_state WHERE session_pk = ?", (session_pk,)).fetchall()
    else:
        wanted = list(keys)
        rows = conn.execute(f"SELECT key, value FROM session_state WHERE session_pk = ? AND key IN "
                            f"({','.join('?' * len(wanted))})", (session_pk, *wanted)).fetchall()
    return {key: _loads(value) for key, value in rows}


def write_state(conn: sqlite3.Connection, session_pk: int, values: dict[str, Any], now_ms: int) -> int:
    """Upsert `values` (in key order); returns how many rows were written."""
    rows = [(session_pk, key, _dumps(values[key]), now_ms) for key in sorted(values)]
    conn.executemany(
        "INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?,?,?,?) "
        "ON CONFLICT(session_pk, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        rows,
    )
    return len(rows)


def set_state(conn: sqlite3.Connection, session_pk: int, key: str, value: object, now_ms: int) -> None:
    """Write one value (None deletes the key)."""
    if value is None:
        conn.execute("DELETE FROM session_state WHERE session_pk = ? AND key = ?", (session_pk, key))
        return
    conn.execute(
        "INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(session_pk, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (session_pk, key, _dumps(value), now_ms))


def newest_value(conn: sqlite3.Connection, key: str) -> Any:
    """The most recently written value of `key` in any session (replay reports), or None. (session_state is
    WITHOUT ROWID: ordering by rowid raised, and callers that swallow sqlite3.Error saw None.)"""
    row = conn.execute("SELECT value FROM session_state WHERE key = ? ORDER BY updated_at DESC LIMIT 1",
                       (key,)).fetchone()
    return None if row is None else _loads(row[0])


__all__ = ["load_state", "newest_value", "set_state", "write_state"]
