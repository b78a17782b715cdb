"""The `leases` table: named, expiring locks between processes (the historian's per-session run lease).

Stdlib only (hot path: the pass checks whether a historian run is live).
"""

from __future__ import annotations

import os
import sqlite3

from magic_context.store.db import atomic


def historian_lease(session_pk: int) -> str:
    """The name of a session's historian lease."""
    return f"historian:{session_pk}"


# A holder is `<token> pid=<pid> host=<host>` (issue #14 item 8): the token is its identity (a renewal or
# an adoption matches on it), the pid and host say which process holds it, so a lease whose process died
# (kill -9, a crash, a reboot) is taken over at once instead of blocking its session until it expires.
_HOST = os.uname().nodename if hasattr(os, "uname") else ""


def holder_of(token: str, pid: int | None = None) -> str:
    """The holder string of `token` held by process `pid` (default: this one) on this host."""
    return f"{token} pid={os.getpid() if pid is None else pid} host={_HOST}"


def _token(holder: str) -> str:
    return holder.split(" ", 1)[0]


def _fields(holder: str) -> tuple[int | None, str | None]:
    pid, host = None, None
    for part in holder.split(" ")[1:]:
        key, _, value = part.partition("=")
        if key == "pid" and value.isdigit():
            pid = int(value)
        elif key == "host":
            host = value
    return pid, host


def holder_alive(holder: str) -> bool:
    """False only when the holder ran on this host and its process is gone (another host: assume alive)."""
    pid, host = _fields(holder)
    if pid is None or host != _HOST:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process killed but not reaped yet still answers kill(0): read its state where /proc has it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def holder(conn: sqlite3.Connection, name: str) -> tuple[str, int] | None:
    """(holder, expires_at) of the lease `name`, or None when nobody holds it."""
    row = conn.execute("SELECT holder, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def expires_at(conn: sqlite3.Connection, name: str) -> int | None:
    """When the lease `name` expires (ms), or None when nobody holds it."""
    found = holder(conn, name)
    return None if found is None else found[1]


def is_live(conn: sqlite3.Connection, name: str, now_ms: int) -> bool:
    """Whether someone holds the lease `name` at `now_ms`: not expired, and its process still alive."""
    found = holder(conn, name)
    return found is not None and found[1] > now_ms and holder_alive(found[0])


def acquire(conn: sqlite3.Connection, name: str, token: str, now_ms: int, ttl_ms: int, *,
            pid: int | None = None) -> bool:
    """Take (or renew) the lease for `token` (held by process `pid`, default this one) until `now_ms + ttl_ms`;
    False while another token's lease is live. A lease whose holder died is taken over at once."""
    mine = holder_of(_token(token), pid)
    with atomic(conn):
        found = holder(conn, name)
        if found is not None and _token(found[0]) != _token(token) and found[1] > now_ms and holder_alive(found[0]):
            return False
        conn.execute("INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, "
                     "expires_at = excluded.expires_at", (name, mine, now_ms, now_ms + ttl_ms))
    return True


def hand_over(conn: sqlite3.Connection, name: str, token: str, pid: int) -> None:
    """Record that process `pid` now holds `token`'s lease (a launcher handing it to the child it started)."""
    with atomic(conn):
        conn.execute("UPDATE leases SET holder = ? WHERE name = ? AND substr(holder, 1, ?) = ?",
                     (holder_of(_token(token), pid), name, len(_token(token)) + 1, _token(token) + " "))


def release(conn: sqlite3.Connection, name: str, token: str) -> None:
    """Give the lease up if `token` still holds it."""
    with atomic(conn):
        conn.execute("DELETE FROM leases WHERE name = ? AND (holder = ? OR substr(holder, 1, ?) = ?)",
                     (name, token, len(_token(token)) + 1, _token(token) + " "))


__all__ = ["acquire", "expires_at", "hand_over", "historian_lease", "holder", "holder_alive", "holder_of", "is_live",
           "release"]
