"""The `leases` table: named, expiring locks between processes (the historian's per-session run lease).

Stdlib only (hot path: the pass checks whether a historian run is live).
"""

from __future__ import annotations

import sqlite3

from magic_context.store.db import atomic


def historian_lease(session_pk: int) -> str:
    """The name of a session's historian lease."""
    return f"historian:{session_pk}"


def expires_at(conn: sqlite3.Connection, name: str) -> int | None:
    """When the lease `name` expires (ms), or None when nobody holds it."""
    row = conn.execute("SELECT expires_at FROM leases WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def is_live(conn: sqlite3.Connection, name: str, now_ms: int) -> bool:
    """Whether someone holds the lease `name` at `now_ms`."""
    expiry = expires_at(conn, name)
    return expiry is not None and expiry > now_ms


def acquire(conn: sqlite3.Connection, name: str, holder: str, now_ms: int, ttl_ms: int) -> bool:
    """Take (or renew) the lease for `holder` until `now_ms + ttl_ms`; False while another holder's is live."""
    with atomic(conn):
        row = conn.execute("SELECT holder, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
        if row is not None and row[0] != holder and int(row[1]) > now_ms:
            return False
        conn.execute("INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, "
                     "expires_at = excluded.expires_at", (name, holder, now_ms, now_ms + ttl_ms))
    return True


def release(conn: sqlite3.Connection, name: str, holder: str) -> None:
    """Give the lease up if `holder` still holds it."""
    with atomic(conn):
        conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))


__all__ = ["acquire", "expires_at", "historian_lease", "is_live", "release"]
