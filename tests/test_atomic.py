"""`store.db.atomic`: the one transaction helper — commit, rollback, savepoints when nested, dry runs,
a failed COMMIT, and the masked-error bug (a `ROLLBACK TO` after SQLite already rolled back)."""

from __future__ import annotations

import sqlite3

import pytest
from historian_helpers import NOW, PiBuilder, compartments, store_pi

from magic_context.errors import StorageBusy, StorageUnavailable
from magic_context.history import runner
from magic_context.store import db


@pytest.fixture
def conn(tmp_path):
    connection = db.connect(tmp_path / "atomic.db")
    connection.execute("CREATE TABLE t (x INTEGER)")
    yield connection
    connection.close()


def rows(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")]


def test_commits_on_success_and_rolls_back_on_error(conn) -> None:
    with db.atomic(conn) as same:
        assert same is conn and conn.in_transaction
        conn.execute("INSERT INTO t VALUES (1)")
    assert not conn.in_transaction and rows(conn) == [1]
    with pytest.raises(ValueError, match="nope"), db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise ValueError("nope")
    assert not conn.in_transaction and rows(conn) == [1]


def test_nested_is_a_savepoint_inside_the_callers_transaction(conn) -> None:
    with db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(KeyError), db.atomic(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise KeyError("inner")
        assert conn.in_transaction and rows(conn) == [1]  # only the inner work went
        with db.atomic(conn):
            conn.execute("INSERT INTO t VALUES (3)")
        assert conn.in_transaction  # released, not committed: the outer still owns the transaction
    assert rows(conn) == [1, 3]


def test_commit_false_rolls_back_at_the_end(conn) -> None:
    with db.atomic(conn, commit=False):
        conn.execute("INSERT INTO t VALUES (1)")
        assert rows(conn) == [1]
    assert not conn.in_transaction and rows(conn) == []
    with db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        with db.atomic(conn, commit=False):
            conn.execute("INSERT INTO t VALUES (3)")
    assert rows(conn) == [2]


def test_immediate_takes_the_write_lock_and_deferred_does_not(tmp_path) -> None:
    path = tmp_path / "lock.db"
    a, b = db.connect(path, busy_timeout_ms=0), db.connect(path, busy_timeout_ms=0)
    try:
        a.execute("CREATE TABLE t (x INTEGER)")
        with db.atomic(a):
            with pytest.raises(sqlite3.OperationalError) as info, db.atomic(b):
                pass
            assert isinstance(db.classify(info.value), StorageBusy)
            assert not b.in_transaction
            with db.atomic(b, immediate=False):  # a deferred reader starts fine
                assert b.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    finally:
        a.close()
        b.close()


def test_a_failed_commit_is_rolled_back_and_raised(conn) -> None:
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE child (p INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"), db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("INSERT INTO child VALUES (42)")  # checked only at COMMIT
    assert not conn.in_transaction  # SQLite leaves it open after a failed COMMIT: atomic rolled it back
    assert rows(conn) == []


def test_error_after_sqlite_rolled_back_is_not_masked(conn) -> None:
    conn.execute("CREATE TRIGGER boom BEFORE INSERT ON t WHEN new.x = 2 BEGIN SELECT RAISE(ROLLBACK, 'boom'); END")
    for outer in (False, True):
        with pytest.raises(sqlite3.IntegrityError, match="boom") as info:
            if outer:
                conn.execute("BEGIN IMMEDIATE")
            with db.atomic(conn):
                conn.execute("INSERT INTO t VALUES (1)")
                with db.atomic(conn):
                    conn.execute("INSERT INTO t VALUES (2)")
        assert "savepoint" not in str(info.value)
        assert not conn.in_transaction and rows(conn) == []


def test_historian_publish_inside_a_pass_reports_the_real_cause() -> None:
    """The masked-error bug: an inline publish (a savepoint in the pass's transaction) hit by a rollback.

    SQLite rolls the whole transaction back on `RAISE(ROLLBACK)` (as on disk-full or an I/O error); the
    old `publish.transaction` then ran `ROLLBACK TO`, which raised "no such savepoint", and `classify()`
    reported that instead of the cause.
    """
    conn = db.open_db()
    try:
        b = PiBuilder()
        for i in range(10):
            b.turn(f"please update module {i} to the new api", f"src/m{i}.py", padding=2_000)
        pk = store_pi(conn, b.messages)
        conn.execute("CREATE TEMP TRIGGER full BEFORE INSERT ON compartments "
                     "BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END")
        conn.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageUnavailable) as info:
            runner.run_once(conn, pk, keep=4, now_ms=NOW)
        message = info.value.one_line()
        assert "database or disk is full" in message and "savepoint" not in message
        assert (info.value.fix or "").startswith("free disk space")  # EFBIG adds "or lift the file-size limit"
        assert not conn.in_transaction and compartments(conn, pk) == []
    finally:
        conn.close()
