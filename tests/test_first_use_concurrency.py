"""Issue #14 item 5: first use under concurrency.

Processes starting together on a missing database serialize the migration (one `BEGIN IMMEDIATE`
migrator, the others wait and re-check `user_version`); a transform that cannot get the lock in time
serves its input unchanged with a warning and exits 0 — never exit 3 with "restore a backup".
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading

from conftest import REPO

from magic_context.store import db, migrations

PROCS = 8


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _request(i: int) -> bytes:
    return json.dumps({"session_id": f"race-{i}", "project_dir": "/tmp", "now": 1_764_000_000_000 + i,
                       "messages": [{"role": "user", "content": f"hello {i}"}]}).encode()


def _start_together(count: int, data_dir) -> list[tuple[int, bytes, bytes, bytes]]:
    env = _env()
    env["MAGIC_CONTEXT_STORAGE_DIR"] = str(data_dir)
    procs = [(subprocess.Popen([sys.executable, "-m", "magic_context", "transform"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO), _request(i))
             for i in range(count)]
    out = []
    for proc, payload in procs:  # each has started; writing stdin releases them at about the same time
        stdout, stderr = proc.communicate(payload, timeout=120)
        out.append((proc.returncode, payload, stdout, stderr))
    return out


def test_eight_processes_starting_on_a_missing_database_all_serve(tmp_path):
    for round_no in range(3):
        data = tmp_path / f"round{round_no}"
        results = _start_together(PROCS, data)
        for code, _payload, stdout, stderr in results:
            assert code == 0, stderr
            assert b"restore a backup" not in stderr and b"mc: error" not in stderr, stderr
            json.loads(stdout)
        conn = sqlite3.connect(data / "context.db")
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
            names = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")]
            assert sorted(names) == migrations.all_names()  # each applied exactly once
            served = sum(1 for _c, _p, _o, err in results if b"served the input unchanged" not in err)
            assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == served
        finally:
            conn.close()


def test_a_transform_that_cannot_get_the_migration_lock_serves_the_input_unchanged(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    holder = sqlite3.connect(data / "context.db", isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")  # another process migrating a fresh database, for longer than the busy timeout
    release = threading.Timer((db.BUSY_TIMEOUT_MS + 4000) / 1000, holder.execute, ("ROLLBACK",))
    release.start()
    try:
        code, payload, stdout, stderr = _start_together(1, data)[0]
    finally:
        release.cancel()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert code == 0, stderr
    assert stdout == payload
    text = stderr.decode()
    assert "mc: warning:" in text and "busy" in text and "served the input unchanged" in text, text
    assert "restore a backup" not in text


def test_a_second_migrator_finds_nothing_left_after_waiting(tmp_path):
    first = db.open_db()
    second = db.connect()
    try:
        again = migrations.apply(second)
        assert again.pending == [] and again.version_before == db.SCHEMA_VERSION
        count = second.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()[0]
        assert count == db.SCHEMA_VERSION
    finally:
        first.close()
        second.close()


def test_a_busy_lock_during_migration_is_transient_not_a_failed_migration(tmp_path):
    from magic_context.errors import StorageBusy

    path = tmp_path / "fresh.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")
    conn = db.connect(path, busy_timeout_ms=50)
    try:
        try:
            migrations.apply(conn)
        except StorageBusy as exc:
            assert "restore a backup" not in exc.one_line()
        else:
            raise AssertionError("the migration ran without the write lock")
        assert not conn.in_transaction
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        conn.close()
