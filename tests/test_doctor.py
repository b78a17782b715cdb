"""Every doctor check: passing on a healthy install, failing (or warning) once, and --fix repairing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from magic_context import paths
from magic_context.doctor.checks import default_checks
from magic_context.doctor.registry import DoctorContext, Status, run_checks
from magic_context.store import db


def run(ctx: DoctorContext | None = None, **kw) -> dict[str, tuple[Status, str]]:
    outcomes = run_checks(default_checks(), ctx or DoctorContext(), **kw)
    return {o.check.name: (o.result.status, o.result.detail) for o in outcomes}


@pytest.fixture
def healthy() -> None:
    paths.ensure_private_dir(paths.config_dir())
    paths.ensure_private_dir(paths.log_dir())
    db.open_db().close()


def test_all_ok_on_healthy_install(healthy) -> None:
    results = run()
    assert {name: status for name, (status, _) in results.items()} == {name: Status.OK for name in results}


def test_fix_creates_everything_from_nothing() -> None:
    assert not paths.data_dir().exists()
    before = run()
    assert before["database"][0] is Status.WARN
    after = run(fix=True)
    assert all(status is Status.OK for status, _ in after.values()), after
    assert paths.db_path().exists()


def test_fix_without_confirmation_changes_nothing() -> None:
    run(fix=True, confirm=lambda check: False)
    assert not paths.db_path().exists()


def test_python_too_old_fails(healthy) -> None:
    status, detail = run(DoctorContext(python_version=(3, 9)))["python"]
    assert status is Status.FAIL and "3.9" in detail


def test_data_dir_not_a_directory_fails(isolated_dirs) -> None:
    isolated_dirs["data"].parent.mkdir(parents=True, exist_ok=True)
    isolated_dirs["data"].write_text("oops")
    results = run()
    assert results["data_dir"][0] is Status.FAIL
    assert results["database"][0] in (Status.WARN, Status.FAIL)


def test_config_dir_not_a_directory_fails(isolated_dirs, healthy) -> None:
    import shutil

    shutil.rmtree(isolated_dirs["config"])
    isolated_dirs["config"].write_text("oops")
    assert run()["config_dir"][0] is Status.FAIL


def test_config_problems_are_listed(healthy, tmp_path: Path) -> None:
    paths.user_config_path().write_text("protected_tags = 0\n[memory]\nnope = 1\n")
    outcomes = run_checks(default_checks(), DoctorContext())
    config = next(o for o in outcomes if o.check.name == "config")
    assert config.result.status is Status.WARN
    assert any("protected_tags" in item for item in config.result.items)
    assert any("memory.nope" in item for item in config.result.items)


def test_database_that_cannot_open_fails(healthy) -> None:
    paths.db_path().unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(paths.db_path()) + suffix).unlink(missing_ok=True)
    paths.db_path().write_bytes(b"this is not a sqlite database at all" * 200)
    results = run()
    assert results["database"][0] is Status.FAIL
    assert results["schema"][0] is Status.FAIL


def test_schema_outdated_warns_and_fix_migrates(healthy) -> None:
    conn = sqlite3.connect(paths.db_path())
    conn.execute("PRAGMA user_version=0")
    conn.close()
    assert run()["schema"][0] is Status.WARN
    assert run(fix=True)["schema"][0] is Status.OK


def test_schema_too_new_fails(healthy) -> None:
    conn = sqlite3.connect(paths.db_path())
    conn.execute("PRAGMA user_version=99")
    conn.close()
    status, detail = run()["schema"]
    assert status is Status.FAIL and "99" in detail


def test_integrity_problem_fails(healthy) -> None:
    conn = sqlite3.connect(paths.db_path())
    conn.execute("CREATE TABLE t (a TEXT)")
    conn.execute("CREATE INDEX t_a ON t (a)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"v{i}",) for i in range(200)])
    conn.commit()
    table_root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name='t'").fetchone()[0]
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET rootpage=? WHERE name='t_a'", (table_root,))
    conn.commit()
    conn.close()
    assert run()["integrity"][0] is Status.FAIL


def test_wal_off_warns_and_fix_restores(healthy) -> None:
    conn = sqlite3.connect(paths.db_path())
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    assert run()["wal"][0] is Status.WARN
    assert run(fix=True)["wal"][0] is Status.OK


def test_tokenizer_failure_fails(healthy, monkeypatch: pytest.MonkeyPatch) -> None:
    from magic_context import tokens

    def broken(text: str) -> int:
        raise FileNotFoundError("cl100k_base.tiktoken missing")

    monkeypatch.setattr(tokens, "count_exact", broken)
    status, detail = run()["tokenizer"]
    assert status is Status.FAIL and "missing" in detail


def test_log_dir_not_writable_fails(healthy) -> None:
    import shutil

    shutil.rmtree(paths.log_dir())
    paths.log_dir().write_text("not a dir")
    assert run()["logs"][0] is Status.FAIL
