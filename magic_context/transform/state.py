"""Per-session key/value state (`session_state`): cached m[0]/m[1], frozen date, nudges, LKG, watermarks.

Values are JSON. Everything a pass needs is read with one query and only changed keys are written.
"""

from __future__ import annotations

import json
import sqlite3

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any



class SessionState:
    """The key/value state of one session, loaded once per pass; tracks which keys changed."""

    def __init__(self, session_pk: int, values: dict[str, Any]) -> None:
        self.session_pk = session_pk
        self._values = values
        self._dirty: set[str] = set()

    @classmethod
    def load(cls, conn: sqlite3.Connection, session_pk: int) -> SessionState:
        rows = conn.execute("SELECT key, value FROM session_state WHERE session_pk = ?", (session_pk,)).fetchall()
        values = {}
        for key, value in rows:
            try:
                values[key] = json.loads(value) if value is not None else None
            except (TypeError, ValueError):
                values[key] = None  # a corrupt value behaves like a missing one
        return cls(session_pk, values)

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        if self._values.get(key) != value or key not in self._values:
            self._values[key] = value
            self._dirty.add(key)

    @property
    def dirty(self) -> bool:
        return bool(self._dirty)

    def save(self, conn: sqlite3.Connection, now_ms: int) -> int:
        """Write changed keys; returns how many rows were written."""
        rows = [(self.session_pk, key, json.dumps(self._values[key], ensure_ascii=False, separators=(",", ":")),
                 now_ms) for key in sorted(self._dirty)]
        conn.executemany(
            "INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT(session_pk, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            rows,
        )
        self._dirty.clear()
        return len(rows)


__all__ = ["SessionState"]
