"""Per-session key/value state (`session_state`): cached m[0]/m[1], frozen date, nudges, LKG, watermarks.

Values are JSON. Everything a pass needs is read with one query and only changed keys are written.
"""

from __future__ import annotations

import sqlite3

from magic_context.store import state as state_store

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
        return cls(session_pk, state_store.load_state(conn, session_pk))

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
        written = state_store.write_state(conn, self.session_pk, {k: self._values[k] for k in self._dirty}, now_ms)
        self._dirty.clear()
        return written


__all__ = ["SessionState"]
