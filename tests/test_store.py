"""Migrations on a blank database, idempotence, the schema fence, permissions, the pytest guard."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from magic_context import paths
from magic_context.errors import ExitCode, SchemaTooNew, UnsafeLocation
from magic_context.store import db, migrations


def test_user_version_equals_number_of_migrations() -> None:
    assert db.SCHEMA_VERSION == len(migrations.all_names())
    assert all(name[:1] == "m" and name[1:4].isdigit() and name[4] == "_" for name in migrations.all_names())
    assert migrations.all_names() == sorted(migrations.all_names())


def test_blank_database_is_migrated_on_open() -> None:
    conn = db.open_db()
    try:
        assert db.user_version(conn) == db.SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for expected in ("sessions", "session_state", "tags", "pending_ops", "raw_messages", "compartments",
                         "memories", "memories_fts", "notes", "pass_reports", "source_contents"):
            assert expected in tables
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    finally:
        conn.close()


def test_files_and_dirs_are_private() -> None:
    db.open_db().close()
    assert stat.S_IMODE(os.stat(paths.db_path()).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(paths.data_dir()).st_mode) == 0o700


def test_migrations_are_idempotent() -> None:
    conn = db.open_db()
    try:
        again = migrations.apply(conn)
        assert again.pending == []
        assert db.user_version(conn) == db.SCHEMA_VERSION
        assert len(migrations.status(conn).applied) == db.SCHEMA_VERSION
    finally:
        conn.close()


def test_memories_fts_follows_inserts() -> None:
    conn = db.open_db()
    try:
        conn.execute(
            "INSERT INTO memories (project_id, category, content, normalized_hash, created_at, updated_at) "
            "VALUES ('git:x', 'CONSTRAINTS', 'never edit landed migrations', 'h1', 0, 0)"
        )
        hits = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'migration'").fetchall()
        assert len(hits) == 1  # porter stemming: migration ~ migrations
    finally:
        conn.close()


def test_newer_database_is_refused() -> None:
    conn = db.open_db()
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(SchemaTooNew) as info:
        db.open_db()
    assert info.value.exit_code == ExitCode.STORAGE_UNAVAILABLE
    assert str(db.SCHEMA_VERSION + 5) in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_refuses_real_location_under_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGIC_CONTEXT_STORAGE_DIR")
    with pytest.raises(UnsafeLocation):
        db.connect()


def test_busy_is_classified_as_transient() -> None:
    err = db.classify(sqlite3.OperationalError("database is locked"))
    assert type(err).__name__ == "StorageBusy"
    assert err.exit_code == ExitCode.STORAGE_UNAVAILABLE


def test_pristine_sources_are_stored_compressed_and_read_back_whole() -> None:
    """A tag's pristine text is stored zlib-compressed (a 50 MB tool output must not cost SQLite a 50 MB
    record and as many dirty pages, issue #14 item 10); `source` reads it, and rows written as text before."""
    from magic_context.store import sessions, tags

    conn = db.open_db()
    try:
        pk = sessions.ensure_session(conn, "pi", "sources", project_id="dir:x", project_dir="/x", now_ms=1)
        big = "".join(f"line {i}: ok — é 漢字\n" for i in range(200_000))  # > 1 slice, multi-byte text
        odd = "lone \ud800 surrogate"  # the stdlib JSON fallback can hand such text to the pass
        tags.save_sources(conn, pk, [(1, big), (2, ""), (3, odd)])
        conn.execute("INSERT INTO source_contents (session_pk, tag_number, content) VALUES (?, 4, 'old text row')",
                     (pk,))
        stored = conn.execute("SELECT typeof(content), length(content) FROM source_contents WHERE tag_number = 1"
                              ).fetchone()
        assert stored[0] == "blob" and stored[1] < len(big.encode()) // 10
        assert tags.source(conn, pk, 1) == big
        assert tags.source(conn, pk, 2) == ""
        assert tags.source(conn, pk, 3) == odd
        assert tags.source(conn, pk, 4) == "old text row"
        assert tags.source(conn, pk, 5) is None
        tags.save_sources(conn, pk, [(1, "another text")])  # stored once: the first text stays
        assert tags.source(conn, pk, 1) == big
    finally:
        conn.close()
