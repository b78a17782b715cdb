"""The `tags` and `source_contents` tables: one numbered tag per taggable part, its drop decision, and the
pristine text it had when first tagged.

A pristine text is stored zlib-compressed (a BLOB; rows written before hold TEXT, and `source` reads both):
a 50 MB tool output bound as text cost SQLite a 50 MB record plus as many dirty pages (+100 MB of peak
RSS in the pass, issue #14 item 10); compressed a megabyte at a time it costs one megabyte and its output.

Stdlib only (hot path). Reads return plain tuples in `COLUMNS` order; `transform.tags` turns them into
`Tag` records.
"""

from __future__ import annotations

import json
import sqlite3
import zlib

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from collections.abc import Iterable

COLUMNS = "tag_number, part_key, kind, message_id, status, drop_mode, byte_size, tokens, tool_name, input_tokens"


def load_rows(conn: sqlite3.Connection, session_pk: int) -> list[tuple]:
    """Every tag row of the session."""
    return conn.execute(f"SELECT {COLUMNS} FROM tags WHERE session_pk = ?", (session_pk,)).fetchall()


def rows_for_messages(conn: sqlite3.Connection, session_pk: int, message_ids: list[str]) -> list[tuple]:
    """The tag rows recorded under any of `message_ids` (one query, however many ids)."""
    cursor = conn.execute(f"SELECT {COLUMNS} FROM tags WHERE session_pk = ? AND message_id IN "
                          "(SELECT value FROM json_each(?))", (session_pk, json.dumps(message_ids)))
    cursor.row_factory = None  # plain tuples: cheaper than sqlite3.Row on the hot path
    return cursor.fetchall()


def row_by_part_key(conn: sqlite3.Connection, session_pk: int, part_key: str) -> tuple | None:
    """The tag row of one part, or None."""
    return conn.execute(f"SELECT {COLUMNS} FROM tags WHERE session_pk = ? AND part_key = ?",
                        (session_pk, part_key)).fetchone()


def insert_rows(conn: sqlite3.Connection, rows: Iterable[tuple]) -> None:
    """Insert tags, each `(session_pk, number, part_key, kind, message_id, status, drop_mode, byte_size, tokens,
    input_tokens, tool_name, created_at)`; a number already stored is kept."""
    conn.executemany(
        "INSERT OR IGNORE INTO tags (session_pk, tag_number, part_key, kind, message_id, status, drop_mode, "
        "byte_size, tokens, input_tokens, tool_name, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )


def set_statuses(conn: sqlite3.Connection, session_pk: int, changes: Iterable[tuple[str, str | None, int]]) -> None:
    """Record drop decisions: `(status, drop_mode, tag_number)` each."""
    conn.executemany("UPDATE tags SET status = ?, drop_mode = ? WHERE session_pk = ? AND tag_number = ?",
                     [(status, mode, session_pk, number) for status, mode, number in changes])


SOURCE_LEVEL = 1  # as the raw store: the first pass of a long session compresses all of it
_SOURCE_SLICE = 1 << 20  # characters encoded at once (the UTF-8 copy of a huge text never exists whole)


def pack_source(text: str) -> bytes:
    """`text` as stored in `source_contents`: its UTF-8, zlib-compressed."""
    packer = zlib.compressobj(SOURCE_LEVEL)
    parts = [packer.compress(text[i:i + _SOURCE_SLICE].encode("utf-8", "surrogatepass"))
             for i in range(0, len(text), _SOURCE_SLICE)]
    parts.append(packer.flush())
    return b"".join(parts)


def save_sources(conn: sqlite3.Connection, session_pk: int, items: Iterable[tuple[int, str]]) -> None:
    """Store each tag's pristine text once (`(tag_number, text)` each), compressed (`pack_source`)."""
    conn.executemany("INSERT OR IGNORE INTO source_contents (session_pk, tag_number, content) VALUES (?,?,?)",
                     ((session_pk, number, pack_source(text)) for number, text in items))


def source(conn: sqlite3.Connection, session_pk: int, number: int) -> str | None:
    """The pristine text stored for tag `number`, or None."""
    row = conn.execute("SELECT content FROM source_contents WHERE session_pk = ? AND tag_number = ?",
                       (session_pk, number)).fetchone()
    if row is None:
        return None
    value = row[0]
    return zlib.decompress(value).decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def status_counts(conn: sqlite3.Connection, session_pk: int) -> dict[str, int]:
    """How many tags have each status."""
    return dict(conn.execute("SELECT status, count(*) FROM tags WHERE session_pk = ? GROUP BY status",
                             (session_pk,)).fetchall())


def statuses(conn: sqlite3.Connection, session_pk: int, numbers: list[int]) -> dict[int, str]:
    """The status of each of `numbers` that exists."""
    return dict(conn.execute(
        f"SELECT tag_number, status FROM tags WHERE session_pk = ? AND tag_number IN ({','.join('?' * len(numbers))})",
        (session_pk, *numbers),
    ).fetchall())


def newest_active(conn: sqlite3.Connection, session_pk: int, limit: int) -> set[int]:
    """The numbers of the newest `limit` active tags (the protected window)."""
    rows = conn.execute(
        "SELECT tag_number FROM tags WHERE session_pk = ? AND status = 'active' ORDER BY tag_number DESC LIMIT ?",
        (session_pk, limit),
    ).fetchall()
    return {r[0] for r in rows}


__all__ = ["COLUMNS", "insert_rows", "load_rows", "newest_active", "pack_source", "row_by_part_key",
           "rows_for_messages", "save_sources", "set_statuses", "source", "status_counts", "statuses"]
