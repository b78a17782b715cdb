"""Helpers of the end-to-end tests of the base-URL clients (Claude Code, Codex): the real `mc proxy` running
in the client's environment, and the checks that the client's key never reached mc's storage."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from proxy_helpers import ProxyProcess, proxy_process


def mc_proxy(env: dict[str, str], *args: str, cwd: Path | None = None) -> AbstractContextManager[ProxyProcess]:
    """The real `mc proxy --port 0 ARGS` with the test's mc dirs (proxy_helpers.proxy_process in `env`)."""
    return proxy_process(*args, env=env, cwd=cwd)


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under `root` (mc's data dir: the database, its WAL, the logs) whose bytes contain `secret`."""
    needle = secret.encode()
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path))
    return found


def assert_key_never_stored(data_dir: Path, secret: str) -> None:
    assert data_dir.is_dir() and any(data_dir.rglob("*.db")), f"no mc database under {data_dir}"
    assert files_holding(data_dir, secret) == []


def session_rows(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(harness, session id, project dir) of every session mc stored."""
    import sqlite3

    data = Path(env["MAGIC_CONTEXT_STORAGE_DIR"])
    paths = sorted(data.rglob("*.db"))
    assert paths, f"no database under {data}"
    conn = sqlite3.connect(paths[0])
    try:
        return [tuple(row) for row in conn.execute("SELECT harness, session_id, project_dir FROM sessions")]
    finally:
        conn.close()


__all__ = ["assert_key_never_stored", "files_holding", "mc_proxy", "session_rows"]
