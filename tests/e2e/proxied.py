"""Helpers of the end-to-end tests of the base-URL clients (Claude Code, Codex): the real `mc proxy` running
in the client's environment, and the checks that the client's key never reached mc's storage."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Proxy:
    proc: subprocess.Popen[bytes]
    started: dict[str, Any]
    stderr: bytes = b""  # what the proxy wrote to stderr, once it stopped

    @property
    def url(self) -> str:
        return str(self.started["address"])


@contextmanager
def mc_proxy(env: dict[str, str], *args: str, cwd: Path | None = None) -> Iterator[Proxy]:
    """The real `mc proxy --port 0 ARGS` with the test's mc dirs; yields once it printed its start-up line."""
    proc = subprocess.Popen([sys.executable, "-m", "magic_context", "proxy", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    proxy = None
    try:
        line = proc.stdout.readline() if proc.stdout else b""
        if not line:
            raise RuntimeError(f"mc proxy did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
        proxy = Proxy(proc, json.loads(line))
        yield proxy
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proxy is not None and proc.stderr:
            proxy.stderr = proc.stderr.read()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


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


__all__ = ["Proxy", "assert_key_never_stored", "files_holding", "mc_proxy", "session_rows"]
