"""Message-block vectors of different sessions never replace each other (m005: vectors keyed per scope).

A block's ref is its block number, which every session has: under m004's key (kind, ref, model_id) block 0 of
one session replaced block 0 of every other one. These tests fail on that key.
"""

from __future__ import annotations

import sqlite3

from magic_context.store import db, migrations, search_index

MODEL = "toy-model"


def _put(conn: sqlite3.Connection, scope: str, ref: str = "0", vector: bytes = b"\x01\x02", now: int = 1) -> None:
    with db.atomic(conn):
        search_index.put_vector(conn, "msgblock", ref, MODEL, scope=scope, text_hash=f"h{scope}{ref}{now}",
                                vector=vector, dims=2, now_ms=now, start=0, end=255)


def test_block_zero_of_two_sessions_keeps_both_vectors(conn: sqlite3.Connection) -> None:
    _put(conn, "1", vector=b"\x01\x01")
    _put(conn, "2", vector=b"\x02\x02")
    assert [bytes(r["vector"]) for r in search_index.vectors(conn, "msgblock", "1", MODEL)] == [b"\x01\x01"]
    assert [bytes(r["vector"]) for r in search_index.vectors(conn, "msgblock", "2", MODEL)] == [b"\x02\x02"]
    assert set(search_index.vector_hashes(conn, "msgblock", "1", MODEL)) == {"0"}


def test_re_embedding_a_block_replaces_only_its_own_sessions_row(conn: sqlite3.Connection) -> None:
    _put(conn, "1", now=1)
    _put(conn, "2", now=1)
    _put(conn, "1", vector=b"\x09\x09", now=2)
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 2
    assert [bytes(r["vector"]) for r in search_index.vectors(conn, "msgblock", "1", MODEL)] == [b"\x09\x09"]
    assert [bytes(r["vector"]) for r in search_index.vectors(conn, "msgblock", "2", MODEL)] == [b"\x01\x02"]


def test_an_m004_database_keeps_its_vectors_and_gains_the_per_scope_key() -> None:
    conn = db.open_db()
    try:  # put the embeddings table back into m004's shape, with a row, and forget m005
        conn.executescript("""
            DROP TABLE embeddings;
            CREATE TABLE embeddings (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, ref TEXT NOT NULL,
                model_id TEXT NOT NULL, scope TEXT NOT NULL, start_ordinal INTEGER, end_ordinal INTEGER,
                text_hash TEXT NOT NULL, dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at INTEGER NOT NULL,
                UNIQUE (kind, ref, model_id));
            INSERT INTO embeddings VALUES (7, 'msgblock', '0', 'toy-model', '1', 0, 255, 'old', 2, x'0303', 5);
            DELETE FROM _sqlite_migrations WHERE name = 'm005_embeddings_per_scope';
            PRAGMA user_version = 4;
        """)
    finally:
        conn.close()
    conn = db.open_db()  # migrates to the current version
    try:
        assert db.user_version(conn) == db.SCHEMA_VERSION
        assert "m005_embeddings_per_scope" in migrations.status(conn).applied
        row = conn.execute("SELECT id, scope, ref, text_hash, vector FROM embeddings").fetchone()
        assert tuple(row[:4]) == (7, "1", "0", "old") and bytes(row[4]) == b"\x03\x03"
        _put(conn, "2", now=9)
        assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 2
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "embeddings_by_scope" in indexes
    finally:
        conn.close()
