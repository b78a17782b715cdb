"""All SQL over `notes`: session notes (one session) and project notes (every session of a project).

Rows come back as dicts with the `COLUMNS` keys. A note with a `surface_condition` starts `pending`
and becomes `ready` when the dreamer finds the condition met; one without starts `active`; either
ends `dismissed`. Stdlib only.
"""

from __future__ import annotations

import sqlite3

from magic_context.store.db import INTEGER_MAX, fits_integer

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

COLUMNS = ("id", "type", "status", "content", "session_pk", "project_id", "surface_condition", "created_at",
           "updated_at", "ready_at", "ready_reason", "last_checked_at", "dismissed_at", "anchor_ordinal")
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM notes"


def _scope(session_pk: int | None, project_id: str | None) -> tuple[str | None, list[Any]]:
    """The WHERE clause (parenthesized) for the notes a session sees, or a project's notes; None for neither."""
    scopes: list[str] = []
    args: list[Any] = []
    if session_pk is not None:
        scopes.append("(type = 'session' AND session_pk = ?)")
        args.append(session_pk)
    if project_id is not None:
        scopes.append("(type = 'project' AND project_id = ?)" if session_pk is not None else "project_id = ?")
        args.append(project_id)
    return ("(" + " OR ".join(scopes) + ")" if scopes else None), args


def _row(values: Any) -> dict[str, Any]:
    return dict(zip(COLUMNS, tuple(values), strict=True))


def insert(conn: sqlite3.Connection, row: dict[str, Any]) -> int:
    names = [c for c in COLUMNS if c in row and c != "id"]
    cur = conn.execute(f"INSERT INTO notes ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                       [row[c] for c in names])
    return int(cur.lastrowid or 0)


def get(conn: sqlite3.Connection, note_id: int) -> dict[str, Any] | None:
    if not fits_integer(note_id):
        return None
    found = conn.execute(_SELECT + " WHERE id = ?", (note_id,)).fetchone()
    return _row(found) if found is not None else None


def get_in_scope(conn: sqlite3.Connection, note_id: int, *, session_pk: int | None,
                 project_id: str | None) -> dict[str, Any] | None:
    """The note if `select` with the same scope would list it (any status), else None."""
    where, args = _scope(session_pk, project_id)
    if where is None or not fits_integer(note_id):
        return None
    found = conn.execute(_SELECT + " WHERE id = ? AND " + where, [note_id, *args]).fetchone()
    return _row(found) if found is not None else None


def select(conn: sqlite3.Connection, *, session_pk: int | None, project_id: str | None,
           statuses: Iterable[str] | None = None, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Notes a session sees (its own session notes and its project's notes), newest first.

    With `session_pk` None: the project's notes of every kind; with `project_id` None: the session's only.
    """
    where, args = _scope(session_pk, project_id)
    if where is None:
        return []
    sql = _SELECT + " WHERE " + where
    if statuses is not None:
        wanted = sorted(set(statuses))
        sql += f" AND status IN ({','.join('?' * len(wanted))})"
        args += wanted
    sql += " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        args += [min(limit, INTEGER_MAX), offset]  # `--limit 2**64` means no limit, not an OverflowError
    return [_row(r) for r in conn.execute(sql, args)]


def update(conn: sqlite3.Connection, note_id: int, **fields: Any) -> None:
    names = sorted(fields)
    conn.execute(f"UPDATE notes SET {', '.join(f'{n} = ?' for n in names)} WHERE id = ?",
                 [fields[n] for n in names] + [note_id])


def counts(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None) -> dict[str, int]:
    """{active, pending, ready, dismissed} over the notes a session sees (or a project's notes)."""
    out = {"active": 0, "pending": 0, "ready": 0, "dismissed": 0}
    where, args = _scope(session_pk, project_id)
    if where is None:
        return out
    for status, count in conn.execute("SELECT status, count(*) FROM notes WHERE " + where + " GROUP BY status", args):
        out[str(status)] = int(count)
    return out


def latest_change(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None,
                  statuses: Iterable[str]) -> int | None:
    """The newest `updated_at` (ms) among the notes a session sees with one of `statuses`, or None.

    Every write that changes what a note shows sets `updated_at`: add, dismiss, the dreamer marking it ready.
    """
    where, args = _scope(session_pk, project_id)
    if where is None:
        return None
    wanted = sorted(set(statuses))
    sql = f"SELECT max(updated_at) FROM notes WHERE {where} AND status IN ({','.join('?' * len(wanted))})"
    found = conn.execute(sql, [*args, *wanted]).fetchone()
    return found[0] if found is not None else None


__all__ = ["COLUMNS", "counts", "get", "get_in_scope", "insert", "latest_change", "select", "update"]
