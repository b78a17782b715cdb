"""What every fault test checks afterwards: the database is intact and no stored message was lost, and
what the exit-code contract promises (DESIGN §3.3) holds for one run of `mc transform`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIGURES_ENV = "MC_FAULT_FIGURES"  # a JSON file each fault test adds its figures to (the README's table)


def env(data_dir: Path, **extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out.pop("PYTEST_CURRENT_TEST", None)
    out["MAGIC_CONTEXT_STORAGE_DIR"] = str(data_dir)
    out.update(extra)
    return out


def start_transform(data_dir: Path, *args: str, **extra_env: str) -> subprocess.Popen:
    """The real CLI (`python -m magic_context transform`) in its own process group, stdin still open."""
    return subprocess.Popen([sys.executable, "-m", "magic_context", "transform", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(data_dir, **extra_env),
                            cwd=REPO, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """kill -9 the process and anything it started (a historian it detached runs in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def integrity(db_path: Path) -> None:
    """`PRAGMA integrity_check` and `foreign_key_check` pass, on a connection of our own."""
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def stored_messages(db_path: Path) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Per (harness, session id): the live raw messages as (ordinal, content hash), in order."""
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'raw_messages'").fetchone() is None:
            return {}  # killed before its first migration committed: nothing was stored yet
        rows = conn.execute(
            "SELECT s.harness, s.session_id, r.ordinal, r.content_hash FROM raw_messages r "
            "JOIN sessions s ON s.id = r.session_pk WHERE r.superseded_at IS NULL ORDER BY s.id, r.ordinal").fetchall()
    finally:
        conn.close()
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for harness, session, ordinal, digest in rows:
        out.setdefault((harness, session), []).append((ordinal, digest))
    return out


def nothing_lost(before: dict, after: dict) -> None:
    """Every message stored before is still stored, unchanged, and each session's ordinals have no gap."""
    for key, messages in after.items():
        assert [o for o, _ in messages] == list(range(len(messages))), f"{key}: ordinals with a gap"
    for key, messages in before.items():
        assert key in after, f"{key}: session lost"
        assert after[key][:len(messages)] == messages, f"{key}: a stored message was lost or changed"


def contract(code: int, stdout: bytes, stderr: str, data: bytes) -> str | None:
    """What is wrong with one `mc transform` outcome, or None. The exit-code contract of DESIGN §3.3:
    0 with one JSON document of the input's kind (a degraded pass warns), 2 with nothing on stdout and
    one error line, 4 only for a context emergency; never a crash (1), a traceback or a papered-over
    internal error."""
    if "Traceback" in stderr:
        return "traceback on stderr"
    if "internal error" in stderr:
        return "a crashed sub-step was papered over: " + stderr.strip()[:200]
    if code == 0:
        try:
            out = json.loads(stdout)
        except ValueError:
            return "exit 0 without a JSON document on stdout"
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if doc is not None and type(out) is not type(doc):
            return f"exit 0 with a {type(out).__name__} for a {type(doc).__name__} input"
        return None
    if code == 2:
        if stdout:
            return "exit 2 with output on stdout"
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("mc: error: "):
            return f"exit 2 without exactly one error line: {stderr[:200]!r}"
        return None
    if code == 4:
        lines = stderr.strip().splitlines()
        advised = len(lines) == 1 and lines[0].startswith("mc: error: context at ") and " — " in lines[0]
        return None if advised and not stdout else f"exit 4 without its one line of advice: {stderr!r}"
    return f"exit {code}: {stderr.strip()[:200]}"


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Merge one test's figures into the JSON file named by $MC_FAULT_FIGURES (nothing when unset)."""
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    path = Path(target)
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    current[name] = figures
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
