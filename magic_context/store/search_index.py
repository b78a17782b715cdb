"""SQL of the search index (migration m004): message text rows, FTS5 queries per source, vectors.

Every function takes an open connection; writers run inside the caller's transaction or their own
short one. FTS5 `MATCH` errors (a malformed expression) surface as `sqlite3.OperationalError`; the
search lanes pass only sanitized expressions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from magic_context.store.db import classify, fits_integer


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    try:
        return conn.execute(sql, tuple(params)).fetchall()
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc) or "MATCH" in str(exc) or "syntax" in str(exc):
            return []  # a query FTS5 cannot parse finds nothing
        raise classify(exc) from exc
    except sqlite3.Error as exc:
        raise classify(exc) from exc


# --- message text -------------------------------------------------------------------------------------

def indexed_hashes(conn: sqlite3.Connection, session_pk: int) -> dict[int, str]:
    """ordinal → content_hash of the session's indexed message rows."""
    return {r[0]: r[1] for r in _rows(conn, "SELECT ordinal, content_hash FROM message_text WHERE session_pk = ?",
                                      (session_pk,))}


def upsert_messages(conn: sqlite3.Connection, session_pk: int,
                    rows: Iterable[tuple[int, str, str, int | None, str]]) -> int:
    """Insert or replace (ordinal, role, content_hash, at_ms, text) rows; the FTS triggers follow. Returns the count."""
    n = 0
    for ordinal, role, digest, at_ms, text in rows:
        conn.execute("INSERT INTO message_text (session_pk, ordinal, role, content_hash, at_ms, text) "
                     "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_pk, ordinal) DO UPDATE SET role = excluded.role, "
                     "content_hash = excluded.content_hash, at_ms = excluded.at_ms, text = excluded.text",
                     (session_pk, ordinal, role, digest, at_ms, text))
        n += 1
    return n


def delete_messages(conn: sqlite3.Connection, session_pk: int, ordinals: Iterable[int]) -> int:
    n = 0
    for ordinal in ordinals:
        n += conn.execute("DELETE FROM message_text WHERE session_pk = ? AND ordinal = ?",
                          (session_pk, ordinal)).rowcount
    return n


def term_count(conn: sqlite3.Connection, expression: str, cap: int) -> int:
    """Rows of the whole message index matching `expression`, counted up to `cap` (cheap: stops there)."""
    return int(_rows(conn, "SELECT count(*) FROM (SELECT 1 FROM message_fts WHERE message_fts MATCH ? LIMIT ?)",
                     (expression, cap))[0][0])


def message_count(conn: sqlite3.Connection, session_pk: int, cutoff: int) -> int:
    return int(_rows(conn, "SELECT count(*) FROM message_text WHERE session_pk = ? AND ordinal <= ?",
                     (session_pk, cutoff))[0][0])


def match_messages(conn: sqlite3.Connection, session_pk: int, expression: str, cutoff: int, limit: int,
                   *, prose_only: bool = False) -> list[sqlite3.Row]:
    """Message rows of the session at or below `cutoff` matching `expression`, best BM25 first, ties by ordinal.
    `prose_only` leaves out tool-result rows (role `tool`)."""
    role = " AND t.role != 'tool'" if prose_only else ""
    return _rows(conn, "SELECT t.id, t.ordinal, t.role, t.at_ms, t.text FROM message_fts f "
                       "JOIN message_text t ON t.id = f.rowid WHERE message_fts MATCH ? AND t.session_pk = ? "
                       f"AND t.ordinal <= ?{role} ORDER BY bm25(message_fts), t.ordinal LIMIT ?",
                 (expression, session_pk, cutoff, limit))


def message_rows(conn: sqlite3.Connection, session_pk: int, start: int, end: int) -> list[sqlite3.Row]:
    return _rows(conn, "SELECT id, ordinal, role, at_ms, text FROM message_text WHERE session_pk = ? "
                       "AND ordinal BETWEEN ? AND ? ORDER BY ordinal", (session_pk, start, end))


def prompt_before(conn: sqlite3.Connection, session_pk: int, ordinal: int, reach: int) -> int | None:
    """The nearest indexed user message in `ordinal - reach` .. `ordinal`, or None."""
    return _one(conn, "SELECT max(ordinal) FROM message_text WHERE session_pk = ? AND role = 'user' "
                      "AND ordinal BETWEEN ? AND ?", (session_pk, ordinal - reach, ordinal))


def message_rows_at(conn: sqlite3.Connection, session_pk: int, ordinals: Sequence[int]) -> list[sqlite3.Row]:
    out: list[sqlite3.Row] = []
    for i in range(0, len(ordinals), 500):
        part = list(ordinals[i:i + 500])
        out += _rows(conn, "SELECT id, ordinal, role, at_ms, text FROM message_text WHERE session_pk = ? "
                           f"AND ordinal IN ({','.join('?' * len(part))})", [session_pk, *part])
    return out


# --- compartments, commits, memories, notes -----------------------------------------------------------

def match_compartments(conn: sqlite3.Connection, session_pk: int, expression: str, cutoff: int, limit: int,
                       ) -> list[sqlite3.Row]:
    return _rows(conn, "SELECT c.id, c.start_ordinal, c.end_ordinal, c.title, c.content, "
                       "coalesce(c.end_time, c.created_at) AS at_ms FROM compartment_fts f "
                       "JOIN compartments c ON c.id = f.rowid WHERE compartment_fts MATCH ? AND c.session_pk = ? "
                       "AND c.end_ordinal <= ? ORDER BY bm25(compartment_fts), c.start_ordinal LIMIT ?",
                 (expression, session_pk, cutoff, limit))


def compartments(conn: sqlite3.Connection, session_pk: int, ids: Sequence[int] | None = None) -> list[sqlite3.Row]:
    sql = ("SELECT id, start_ordinal, end_ordinal, title, content, coalesce(end_time, created_at) AS at_ms "
           "FROM compartments WHERE session_pk = ?")
    params: list[Any] = [session_pk]
    if ids is not None:
        if not ids:
            return []
        sql += f" AND id IN ({','.join('?' * len(ids))})"
        params += list(ids)
    return _rows(conn, sql + " ORDER BY start_ordinal", params)


def match_commits(conn: sqlite3.Connection, project_id: str, expression: str, limit: int) -> list[sqlite3.Row]:
    return _rows(conn, "SELECT g.id, g.sha, g.message, g.author, g.committed_at FROM git_commit_fts f "
                       "JOIN git_commits g ON g.id = f.rowid WHERE git_commit_fts MATCH ? AND g.project_id = ? "
                       "ORDER BY bm25(git_commit_fts), g.committed_at DESC LIMIT ?", (expression, project_id, limit))


def like_commits(conn: sqlite3.Connection, project_id: str, needle: str, limit: int) -> list[sqlite3.Row]:
    escaped = needle.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _rows(conn, "SELECT id, sha, message, author, committed_at FROM git_commits WHERE project_id = ? "
                       "AND lower(message) LIKE ? ESCAPE '\\' ORDER BY committed_at DESC LIMIT ?",
                 (project_id, f"%{escaped}%", limit))


def commits(conn: sqlite3.Connection, project_id: str, ids: Sequence[int] | None = None) -> list[sqlite3.Row]:
    sql = "SELECT id, sha, message, author, committed_at FROM git_commits WHERE project_id = ?"
    params: list[Any] = [project_id]
    if ids is not None:
        if not ids:
            return []
        sql += f" AND id IN ({','.join('?' * len(ids))})"
        params += list(ids)
    return _rows(conn, sql + " ORDER BY committed_at DESC", params)


MEMORY_LIVE = "m.status IN ('active', 'permanent') AND (m.expires_at IS NULL OR m.expires_at > ?)"


def match_memories(conn: sqlite3.Connection, project_id: str, expression: str, now_ms: int, limit: int,
                   ) -> list[sqlite3.Row]:
    return _rows(conn, "SELECT m.id, m.category, m.content, m.updated_at FROM memories_fts f "
                       "JOIN memories m ON m.id = f.rowid WHERE memories_fts MATCH ? AND m.project_id = ? AND "
                       f"{MEMORY_LIVE} ORDER BY bm25(memories_fts), m.updated_at DESC, m.id LIMIT ?",
                 (expression, project_id, now_ms, limit))


def memories(conn: sqlite3.Connection, project_id: str, now_ms: int, ids: Sequence[int] | None = None,
             *, any_status: bool = False) -> list[sqlite3.Row]:
    sql = "SELECT m.id, m.category, m.content, m.updated_at, m.status FROM memories m WHERE m.project_id = ?"
    params: list[Any] = [project_id]
    if not any_status:
        sql += f" AND {MEMORY_LIVE}"
        params.append(now_ms)
    if ids is not None:
        if not ids:
            return []
        sql += f" AND m.id IN ({','.join('?' * len(ids))})"
        params += list(ids)
    return _rows(conn, sql + " ORDER BY m.id", params)


def bump_retrievals(conn: sqlite3.Connection, ids: Sequence[int], now_ms: int) -> None:
    """Count a search's returned memories (retrieval_count, last_retrieved_at), as `store.memories` does."""
    from magic_context.store.memories import record_retrieval

    record_retrieval(conn, ids, now_ms)


def notes(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None) -> list[sqlite3.Row]:
    """Session notes of this session and project (smart) notes of the project, newest first."""
    return _rows(conn, "SELECT * FROM notes "
                       "WHERE (session_pk = ? AND type = 'session') OR (project_id = ? AND type != 'session') "
                       "ORDER BY created_at DESC, id", (session_pk, project_id))


# --- vectors -----------------------------------------------------------------------------------------

def put_vector(conn: sqlite3.Connection, kind: str, ref: str, model_id: str, *, scope: str, text_hash: str,
               vector: bytes, dims: int, now_ms: int, start: int | None = None, end: int | None = None) -> None:
    """Insert or replace one vector. A replaced row also gets a new, highest id, so `vector_stamp` (count, max
    and sum of the ids) changes with every insert, replacement and delete."""
    conn.execute("INSERT INTO embeddings (kind, ref, model_id, scope, start_ordinal, end_ordinal, text_hash, dims, "
                 "vector, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(kind, scope, ref, model_id) "
                 "DO UPDATE SET id = (SELECT max(id) + 1 FROM embeddings), "
                 "start_ordinal = excluded.start_ordinal, "
                 "end_ordinal = excluded.end_ordinal, "
                 "text_hash = excluded.text_hash, dims = excluded.dims, vector = excluded.vector, "
                 "created_at = excluded.created_at",
                 (kind, ref, model_id, scope, start, end, text_hash, dims, vector, now_ms))


def vector_hashes(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> dict[str, str]:
    return {r[0]: r[1] for r in _rows(conn, "SELECT ref, text_hash FROM embeddings WHERE kind = ? AND scope = ? "
                                            "AND model_id = ?", (kind, scope, model_id))}


def vectors(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> list[sqlite3.Row]:
    return _rows(conn, "SELECT ref, start_ordinal, end_ordinal, dims, vector FROM embeddings "
                       "WHERE kind = ? AND scope = ? AND model_id = ?", (kind, scope, model_id))


def vectors_full(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> list[sqlite3.Row]:
    """Every vector row of (kind, scope, model) with its id and text hash, in id order (sidecar builds)."""
    return _rows(conn, "SELECT id, ref, start_ordinal, end_ordinal, text_hash, dims, vector FROM embeddings "
                       "WHERE kind = ? AND scope = ? AND model_id = ? ORDER BY id", (kind, scope, model_id))


def vector_stamp(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> str:
    """"count:max id:sum of ids" of the rows of (kind, scope, model), read from the `embeddings_by_scope` index
    alone: it changes with every row added, re-embedded (`put_vector` gives it a new id) or deleted."""
    row = _rows(conn, "SELECT count(*), max(id), total(id) FROM embeddings WHERE kind = ? AND scope = ? "
                      "AND model_id = ?", (kind, scope, model_id))[0]
    return f"{int(row[0])}:{row[1] or 0}:{int(row[2])}"


def vector_dims(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> list[int]:
    return [int(r[0]) for r in _rows(conn, "SELECT DISTINCT dims FROM embeddings WHERE kind = ? AND scope = ? "
                                           "AND model_id = ? ORDER BY dims", (kind, scope, model_id))]


def database_file(conn: sqlite3.Connection) -> str:
    """The main database's file path ("" for an in-memory or temporary database)."""
    for row in _rows(conn, "PRAGMA database_list"):
        if row[1] == "main":
            return str(row[2] or "")
    return ""


def delete_vectors(conn: sqlite3.Connection, kind: str, refs: Iterable[str]) -> None:
    for ref in refs:
        conn.execute("DELETE FROM embeddings WHERE kind = ? AND ref = ?", (kind, ref))


def count_vectors(conn: sqlite3.Connection, kind: str, scope: str | None = None) -> int:
    if scope is None:
        return int(_rows(conn, "SELECT count(*) FROM embeddings WHERE kind = ?", (kind,))[0][0])
    return int(_rows(conn, "SELECT count(*) FROM embeddings WHERE kind = ? AND scope = ?", (kind, scope))[0][0])




def all_session_pks(conn: sqlite3.Connection) -> list[int]:
    """Every session, most recently active first (the embedding backlog's `--all`)."""
    return [int(r[0]) for r in _rows(conn, "SELECT id FROM sessions ORDER BY updated_at DESC, id DESC")]


def memory_projects(conn: sqlite3.Connection) -> list[str]:
    """Every project id that has a memory (the embedding backlog's `--all`: projects with no session too)."""
    return [str(r[0]) for r in _rows(conn, "SELECT DISTINCT project_id FROM memories ORDER BY project_id")]


def missing_vectors(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None, model_id: str, *,
                    block: int, now_ms: int) -> dict[str, tuple[int, int]]:
    """kind -> (total, without a vector for `model_id`) for the session's message blocks and compartments and its
    project's live memories, in one statement over indexes (`mc status`); stale vectors count as present. A
    None session or project counts nothing of its kinds (`mc doctor` sums sessions and projects separately).

    Blocks are counted from the (session_pk, ordinal) index alone: 4.5 ms at 100k messages where also skipping
    messages without text (as the backlog does) read the table, 35 ms; a block whose 256 messages all lack text
    would count as missing, which a real session does not have."""
    scope = "" if session_pk is None else str(session_pk)
    row = _rows(conn, f"""SELECT
        (SELECT count(DISTINCT ordinal / ?) FROM message_text WHERE session_pk = ?),
        (SELECT count(*) FROM embeddings WHERE kind = 'msgblock' AND scope = ? AND model_id = ?),
        (SELECT count(*) FROM compartments WHERE session_pk = ?),
        (SELECT count(*) FROM embeddings WHERE kind = 'compartment' AND scope = ? AND model_id = ?),
        (SELECT count(*) FROM memories m WHERE m.project_id = ? AND {MEMORY_LIVE}),
        (SELECT count(*) FROM memories m JOIN embeddings e ON e.kind = 'memory' AND e.scope = m.project_id
            AND e.model_id = ? AND e.ref = CAST(m.id AS TEXT) WHERE m.project_id = ? AND {MEMORY_LIVE})""",
                (block, session_pk, scope, model_id, session_pk, scope, model_id,
                 project_id, now_ms, model_id, project_id, now_ms))[0]
    totals = {"msgblock": (row[0], row[1]), "compartment": (row[2], row[3]), "memory": (row[4], row[5])}
    return {kind: (int(total), max(0, int(total) - int(have))) for kind, (total, have) in totals.items()}


def get_state(conn: sqlite3.Connection, key: str) -> str | None:
    rows = _rows(conn, "SELECT value FROM search_state WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def set_state(conn: sqlite3.Connection, key: str, value: str | None, now_ms: int) -> None:
    if value is None:
        conn.execute("DELETE FROM search_state WHERE key = ?", (key,))
        return
    conn.execute("INSERT INTO search_state (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE "
                 "SET value = excluded.value, updated_at = excluded.updated_at", (key, value, now_ms))


# --- small reads the search engine needs (store owns SQL) ----------------------------------------------

def _one(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    rows = _rows(conn, sql, params)
    return rows[0][0] if rows else None


def folded_through(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The session's last compartment end, or None when nothing is folded."""
    return _one(conn, "SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (session_pk,))


def raw_marker(conn: sqlite3.Connection, session_pk: int) -> tuple[int | None, int]:
    """(newest live raw row id, live row count): changes whenever sync writes or supersedes a row."""
    row = _rows(conn, "SELECT max(id), count(*) FROM raw_messages WHERE session_pk = ? AND superseded_at IS NULL",
                (session_pk,))[0]
    return row[0], int(row[1])


def session_field(conn: sqlite3.Connection, session_pk: int, column: str) -> Any:
    """One column (harness, project_id, project_dir, session_id) of a session row."""
    if column not in ("harness", "project_id", "project_dir", "session_id"):
        raise ValueError(column)
    return _one(conn, f"SELECT {column} FROM sessions WHERE id = ?", (session_pk,))


def session_ids(conn: sqlite3.Connection, session_pks: Sequence[int]) -> dict[int, str]:
    if not session_pks:
        return {}
    return {int(r[0]): str(r[1]) for r in _rows(
        conn, f"SELECT id, session_id FROM sessions WHERE id IN ({','.join('?' * len(session_pks))})", session_pks)}


def project_sessions(conn: sqlite3.Connection, project_id: str) -> list[sqlite3.Row]:
    """(id, project_dir, session_id) of the project's sessions, most recently active first."""
    return _rows(conn, "SELECT id, project_dir, session_id FROM sessions WHERE project_id = ? ORDER BY updated_at DESC",
                 (project_id,))


def has_project_records(conn: sqlite3.Connection, project_id: str) -> bool:
    """Whether the project has a memory, note or indexed commit of its own (the lanes that need no session)."""
    return bool(_one(conn, "SELECT EXISTS (SELECT 1 FROM memories WHERE project_id = ?) "
                           "OR EXISTS (SELECT 1 FROM notes WHERE project_id = ?) "
                           "OR EXISTS (SELECT 1 FROM git_commits WHERE project_id = ?)",
                     (project_id, project_id, project_id)))


def indexed_count(conn: sqlite3.Connection, session_pk: int) -> int:
    return int(_one(conn, "SELECT count(*) FROM message_text WHERE session_pk = ?", (session_pk,)))


def last_text_ordinal(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The highest indexed ordinal with searchable text."""
    return _one(conn, "SELECT max(ordinal) FROM message_text WHERE session_pk = ? AND text != ''", (session_pk,))


def message_texts(conn: sqlite3.Connection, session_pk: int) -> list[sqlite3.Row]:
    """(ordinal, content_hash, text) of every indexed message with text, in ordinal order."""
    return _rows(conn, "SELECT ordinal, content_hash, text FROM message_text WHERE session_pk = ? AND text != '' "
                       "ORDER BY ordinal", (session_pk,))


def vectors_end(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> int | None:
    return _one(conn, "SELECT max(end_ordinal) FROM embeddings WHERE kind = ? AND scope = ? AND model_id = ?",
                (kind, scope, model_id))


def newest_commit_at(conn: sqlite3.Connection, project_id: str) -> int | None:
    return _one(conn, "SELECT max(committed_at) FROM git_commits WHERE project_id = ?", (project_id,))


def upsert_commit(conn: sqlite3.Connection, project_id: str, sha: str, message: str, *, author: str | None,
                  committed_at: int, now_ms: int) -> int:
    """Insert a commit (or update its message when it changed); the number of rows written."""
    cur = conn.execute("INSERT INTO git_commits (project_id, sha, message, author, committed_at, indexed_at) "
                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(project_id, sha) DO UPDATE SET "
                       "message = excluded.message WHERE message != excluded.message",
                       (project_id, sha, message, author, committed_at, now_ms))
    return int(cur.rowcount)


def evict_commits(conn: sqlite3.Connection, project_id: str, max_commits: int, floor_ms: int) -> int:
    """Drop the project's commits beyond the newest `max_commits` and those older than `floor_ms`."""
    evicted = conn.execute("DELETE FROM git_commits WHERE project_id = ? AND id NOT IN (SELECT id FROM git_commits "
                           "WHERE project_id = ? ORDER BY committed_at DESC LIMIT ?)",
                           (project_id, project_id, max_commits)).rowcount
    return int(evicted) + int(conn.execute("DELETE FROM git_commits WHERE project_id = ? AND committed_at < ?",
                                           (project_id, floor_ms)).rowcount)


def tag_message_id(conn: sqlite3.Connection, session_pk: int, tag: int) -> str | None:
    if not fits_integer(tag):
        return None
    return _one(conn, "SELECT message_id FROM tags WHERE session_pk = ? AND tag_number = ?", (session_pk, tag))


def live_ordinal(conn: sqlite3.Connection, session_pk: int, message_id: str) -> int | None:
    return _one(conn, "SELECT ordinal FROM raw_messages WHERE session_pk = ? AND message_id = ? "
                      "AND superseded_at IS NULL", (session_pk, message_id))


__all__ = [
    "all_session_pks",
    "bump_retrievals", "commits", "compartments", "count_vectors", "database_file", "delete_messages",
    "delete_vectors", "evict_commits", "folded_through", "get_state", "has_project_records", "indexed_count",
    "indexed_hashes",
    "last_text_ordinal",
    "like_commits", "live_ordinal", "match_commits", "match_compartments", "match_memories", "match_messages",
    "memories", "memory_projects", "message_count", "message_rows", "message_rows_at", "message_texts",
    "missing_vectors", "newest_commit_at",
    "notes", "project_sessions", "prompt_before", "put_vector", "raw_marker", "session_field", "session_ids",
    "set_state",
    "tag_message_id", "term_count", "upsert_commit", "upsert_messages", "vector_dims", "vector_hashes",
    "vector_stamp", "vectors", "vectors_end", "vectors_full",
]
