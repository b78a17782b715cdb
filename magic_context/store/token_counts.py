"""The `token_counts` table: exact token counts memoized by content key (stdlib only: hot path)."""

from __future__ import annotations

import sqlite3

from magic_context.store.db import atomic

_SQL_BATCH = 500  # keys per lookup: well under SQLite's bound-parameter limit


def lookup(conn: sqlite3.Connection, keys: list[str]) -> dict[str, int]:
    """The stored counts of those `keys` that have one (one query per 500 keys)."""
    found: dict[str, int] = {}
    for i in range(0, len(keys), _SQL_BATCH):
        batch = keys[i:i + _SQL_BATCH]
        marks = ",".join("?" * len(batch))
        rows = conn.execute(f"SELECT content_hash, tokens FROM token_counts WHERE content_hash IN ({marks})", batch)
        found.update((row[0], int(row[1])) for row in rows)
    return found


def store(conn: sqlite3.Connection, counts: dict[str, int]) -> None:
    """Insert new counts in one short transaction (or the caller's open one); a stored key is kept."""
    with atomic(conn):
        conn.executemany("INSERT OR IGNORE INTO token_counts (content_hash, tokens) VALUES (?, ?)", counts.items())


__all__ = ["lookup", "store"]
