"""All SQL over `memories` and `memory_mutations` (the engine in `magic_context.memory` decides, this reads/writes).

Rows come back as plain dicts with the `COLUMNS` keys (`merged_from` decoded to a list of ids).
"Eligible" means what the agent may see: status active or permanent, not superseded, not expired at
`now_ms` (the head passes its frozen materialization time so replays stay byte-stable).
Stdlib only: the transform reads eligible memories on busting passes.
"""

from __future__ import annotations

import json
import sqlite3

from magic_context.store.db import INTEGER_MAX, fits_integer

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

COLUMNS = ("id", "project_id", "category", "content", "normalized_hash", "status", "importance", "source_session",
           "source_type", "seen_count", "retrieval_count", "created_at", "updated_at", "last_seen_at",
           "last_retrieved_at", "expires_at", "superseded_by", "merged_from", "metadata_json")
RENDER_COLUMNS = ("id", "category", "content", "status", "importance", "last_seen_at")
VISIBLE_STATE_KEY = "visible_memory_ids"
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM memories"
_ELIGIBLE = ("status IN ('active', 'permanent') AND superseded_by IS NULL "
             "AND (expires_at IS NULL OR expires_at > ?)")


def _row(values: Any) -> dict[str, Any]:
    row = dict(zip(COLUMNS, tuple(values), strict=True))
    row["merged_from"] = json.loads(row["merged_from"]) if row["merged_from"] else []
    return row


# --- reads -------------------------------------------------------------------------------------


def get(conn: sqlite3.Connection, memory_id: int) -> dict[str, Any] | None:
    if not fits_integer(memory_id):
        return None
    found = conn.execute(_SELECT + " WHERE id = ?", (memory_id,)).fetchone()
    return _row(found) if found is not None else None


def get_many(conn: sqlite3.Connection, ids: Iterable[int]) -> list[dict[str, Any]]:
    wanted = sorted(i for i in set(ids) if fits_integer(i))
    if not wanted:
        return []
    marks = ",".join("?" * len(wanted))
    return [_row(r) for r in conn.execute(_SELECT + f" WHERE id IN ({marks}) ORDER BY id", wanted)]


def find_by_hash(conn: sqlite3.Connection, project_id: str, category: str, digest: str) -> dict[str, Any] | None:
    found = conn.execute(_SELECT + " WHERE project_id = ? AND category = ? AND normalized_hash = ?",
                         (project_id, category, digest)).fetchone()
    return _row(found) if found is not None else None


def eligible(conn: sqlite3.Connection, project_id: str, now_ms: int, *, after_id: int = 0,
             ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """What the head renders: the project's eligible memories with id > after_id (or among `ids`), by id."""
    sql = "SELECT " + ", ".join(RENDER_COLUMNS) + f" FROM memories WHERE project_id = ? AND {_ELIGIBLE} AND id > ?"
    args: list[Any] = [project_id, now_ms, after_id]
    if ids is not None:
        wanted = sorted(set(ids))
        if not wanted:
            return []
        sql += f" AND id IN ({','.join('?' * len(wanted))})"
        args += wanted
    rows = conn.execute(sql + " ORDER BY id", args).fetchall()
    return [dict(zip(RENDER_COLUMNS, tuple(r), strict=True)) for r in rows]


def for_prompt(conn: sqlite3.Connection, project_id: str, now_ms: int, limit: int) -> list[dict[str, str]]:
    """{category, content} of the project's eligible memories for the historian prompt, most important first."""
    rows = conn.execute(f"SELECT category, content FROM memories WHERE project_id = ? AND {_ELIGIBLE} "
                        "ORDER BY status = 'permanent' DESC, importance DESC, id LIMIT ?",
                        (project_id, now_ms, limit)).fetchall()
    return [{"category": str(r[0]), "content": str(r[1])} for r in rows]


def max_id(conn: sqlite3.Connection, project_id: str) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM memories WHERE project_id = ?",
                            (project_id,)).fetchone()[0])


def select(conn: sqlite3.Connection, project_id: str | None, *, statuses: Iterable[str] | None = None,
           category: str | None = None, now_ms: int | None = None, expired: bool | None = None,
           limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Rows for listings and export, by id. `expired`: None = both, True = only expired, False = unexpired."""
    where: list[str] = []
    args: list[Any] = []
    if project_id is not None:
        where.append("project_id = ?")
        args.append(project_id)
    if statuses is not None:
        wanted = sorted(set(statuses))
        where.append(f"status IN ({','.join('?' * len(wanted))})")
        args += wanted
    if category is not None:
        where.append("category = ?")
        args.append(category)
    if expired is not None and now_ms is not None:
        where.append("(expires_at IS NOT NULL AND expires_at <= ?)" if expired
                     else "(expires_at IS NULL OR expires_at > ?)")
        args.append(now_ms)
    sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        args += [min(limit, INTEGER_MAX), offset]  # `--limit 2**64` means no limit, not an OverflowError
    return [_row(r) for r in conn.execute(sql, args)]


def counts(conn: sqlite3.Connection, project_id: str, now_ms: int) -> dict[str, int]:
    """{active, permanent, archived, expired, superseded, total} for one project (expired = past TTL, not archived)."""
    row = conn.execute(
        "SELECT "
        "count(*) FILTER (WHERE status = 'active' AND superseded_by IS NULL "
        "AND (expires_at IS NULL OR expires_at > ?)),"
        "count(*) FILTER (WHERE status = 'permanent' AND superseded_by IS NULL),"
        "count(*) FILTER (WHERE status = 'archived'),"
        "count(*) FILTER (WHERE status != 'archived' AND expires_at IS NOT NULL AND expires_at <= ?),"
        "count(*) FILTER (WHERE superseded_by IS NOT NULL),"
        "count(*) FROM memories WHERE project_id = ?",
        (now_ms, now_ms, project_id)).fetchone()
    keys = ("active", "permanent", "archived", "expired", "superseded", "total")
    return dict(zip(keys, (int(v or 0) for v in tuple(row)), strict=True))


# --- writes ------------------------------------------------------------------------------------


def insert(conn: sqlite3.Connection, row: dict[str, Any]) -> int:
    """Insert one memory from a dict with `COLUMNS` keys (id optional); returns its id."""
    values = dict(row)
    values["merged_from"] = json.dumps(sorted(values["merged_from"])) if values.get("merged_from") else None
    names = [c for c in COLUMNS if c in values and (c != "id" or values[c] is not None)]
    cur = conn.execute(f"INSERT INTO memories ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                       [values[c] for c in names])
    return int(cur.lastrowid or 0)


def update(conn: sqlite3.Connection, memory_id: int, **fields: Any) -> None:
    """Set the given columns of one memory (`merged_from` as a list)."""
    if "merged_from" in fields:
        fields["merged_from"] = json.dumps(sorted(fields["merged_from"])) if fields["merged_from"] else None
    names = sorted(fields)
    conn.execute(f"UPDATE memories SET {', '.join(f'{n} = ?' for n in names)} WHERE id = ?",
                 [fields[n] for n in names] + [memory_id])


def bump_seen(conn: sqlite3.Connection, memory_id: int, now_ms: int, *, expires_at: int | None = None) -> None:
    """A repeat of an existing fact: seen_count + 1; a TTL, when the row has one, is renewed to `expires_at`."""
    conn.execute("UPDATE memories SET seen_count = seen_count + 1, last_seen_at = ?, updated_at = ?, "
                 "expires_at = CASE WHEN expires_at IS NULL OR ? IS NULL THEN expires_at "
                 "ELSE max(expires_at, ?) END WHERE id = ?",
                 (now_ms, now_ms, expires_at, expires_at, memory_id))


def delete(conn: sqlite3.Connection, memory_id: int) -> None:
    conn.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = ?", (memory_id,))
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))


def record_retrieval(conn: sqlite3.Connection, ids: Iterable[int], now_ms: int) -> int:
    """retrieval_count + 1 and last_retrieved_at for memories an explicit search returned; how many rows."""
    wanted = sorted(set(ids))
    if not wanted:
        return 0
    cur = conn.execute(f"UPDATE memories SET retrieval_count = retrieval_count + 1, last_retrieved_at = ? "
                       f"WHERE id IN ({','.join('?' * len(wanted))})", [now_ms, *wanted])
    return int(cur.rowcount)


# --- the mutation log (m[1] `<memory-updates>`) -----------------------------------------------


def log_mutation(conn: sqlite3.Connection, project_id: str, memory_id: int, kind: str, now_ms: int, *,
                 superseded_by: int | None = None) -> None:
    """Record a non-additive change (update, archive, delete, superseded, restore) for m[1] deltas."""
    conn.execute("INSERT INTO memory_mutations (project_id, memory_id, kind, superseded_by, at) VALUES (?,?,?,?,?)",
                 (project_id, memory_id, kind, superseded_by, now_ms))


def prune_mutations(conn: sqlite3.Connection, before_ms: int) -> int:
    """Forget mutations older than `before_ms` (a head that old has been folded again long since)."""
    return int(conn.execute("DELETE FROM memory_mutations WHERE at < ?", (before_ms,)).rowcount)


def mutation_cursor(conn: sqlite3.Connection, project_id: str) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM memory_mutations WHERE project_id = ?",
                            (project_id,)).fetchone()[0])


def mutations_after(conn: sqlite3.Connection, project_id: str, cursor: int) -> Iterator[tuple[int, str, int | None]]:
    """(memory_id, kind, superseded_by) of the project's mutations after `cursor`, oldest first."""
    for memory_id, kind, by in conn.execute(
            "SELECT memory_id, kind, superseded_by FROM memory_mutations WHERE project_id = ? AND id > ? ORDER BY id",
            (project_id, cursor)):
        yield int(memory_id), str(kind), (int(by) if by is not None else None)


# --- what a session's head shows (search hides these) -----------------------------------------


def visible_ids(conn: sqlite3.Connection, session_pk: int) -> list[int]:
    """Ids of the memories the session's current m[0]/m[1] show, sorted (empty before the first render)."""
    found = conn.execute("SELECT value FROM session_state WHERE session_pk = ? AND key = ?",
                         (session_pk, VISIBLE_STATE_KEY)).fetchone()
    if found is None or found[0] is None:
        return []
    try:
        ids = json.loads(found[0])
    except (TypeError, ValueError):
        return []
    return sorted(int(i) for i in ids if isinstance(i, int)) if isinstance(ids, list) else []


__all__ = [
    "COLUMNS",
    "VISIBLE_STATE_KEY",
    "bump_seen",
    "counts",
    "delete",
    "eligible",
    "find_by_hash",
    "for_prompt",
    "get",
    "get_many",
    "insert",
    "log_mutation",
    "max_id",
    "mutation_cursor",
    "mutations_after",
    "prune_mutations",
    "record_retrieval",
    "select",
    "update",
    "visible_ids",
]
