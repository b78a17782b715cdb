"""Shared fixtures: every test runs with mc's data and config dirs in a temp dir."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO.parent / "shared" / "data" / "sessions"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-cases", type=int, default=None,
                     help="cases of the fault suite's fuzzer (default $MC_FUZZ_CASES or 2000; 10000 for the full run)")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"sqlite: {sqlite3.sqlite_version}", f"sessions: {SESSIONS}"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package once: subprocess tests then start from bytecode even with PYTHONDONTWRITEBYTECODE."""
    import compileall

    for package in ("magic_context", "commands", "wizard"):
        compileall.compile_dir(str(REPO / package), quiet=1)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Point MAGIC_CONTEXT_STORAGE_DIR / MAGIC_CONTEXT_CONFIG_DIR at a temp dir so no test touches real data."""
    data = tmp_path / "mc-data"
    config = tmp_path / "mc-config"
    monkeypatch.setenv("MAGIC_CONTEXT_STORAGE_DIR", str(data))
    monkeypatch.setenv("MAGIC_CONTEXT_CONFIG_DIR", str(config))
    monkeypatch.delenv("MAGIC_CONTEXT_DEBUG", raising=False)
    # Tests run the historian inside the pass (deterministic; no detached processes outliving a test).
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "inline")
    return {"data": data, "config": config}


@pytest.fixture
def conn(isolated_dirs: dict[str, Path]) -> Iterator[sqlite3.Connection]:
    """The migrated database of the isolated data dir, opened as the engine opens it (closed afterwards)."""
    from magic_context.store.db import open_db

    connection = open_db()
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def project_db(tmp_path: Path, conn: sqlite3.Connection) -> tuple[Path, str, sqlite3.Connection]:
    """A project directory, its identity and the migrated database: what a pass in that project writes to."""
    from magic_context import project

    proj = tmp_path / "proj"
    proj.mkdir()
    return proj, project.identity(proj), conn


@pytest.fixture
def server():
    """A loopback fake provider (tests/fake_llm_server.py): chat and embeddings in the providers' wire formats."""
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def sessions_dir() -> Path:
    if not SESSIONS.is_dir():
        pytest.fail(f"recorded sessions missing at {SESSIONS}")
    return SESSIONS


def run_mc(*args: str, stdin: bytes | str | None = None, env: dict[str, str] | None = None,
           cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """Run the real CLI in a subprocess (`python -m magic_context`), inheriting the isolated env."""
    full_env = dict(os.environ)
    full_env.pop("PYTEST_CURRENT_TEST", None)
    if env:
        full_env.update(env)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "magic_context", *args],
        input=data, capture_output=True, env=full_env, cwd=cwd or REPO, timeout=timeout, check=False,
    )


@pytest.fixture
def mc():
    return run_mc
