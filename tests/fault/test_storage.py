"""Storage faults: a read-only database and a full disk (a size-limited file: RLIMIT_FSIZE on the mc
process). The pass either serves (exit 0, with a warning) or fails closed and loud (exit 3, one line
with a fix, never "restore a backup"); afterwards the database is intact, nothing stored is lost, and
once the fault is gone the next pass stores everything."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from .checks import REPO, contract, env, integrity, nothing_lost, record_figures, stored_messages

pytestmark = pytest.mark.fault


def _output(t: int) -> str:
    """~4 KB that zlib cannot shrink much (mc stores raw messages and tag sources compressed): the writes of
    a pass must outgrow the disk-full cap whatever the compression."""
    return f"output {t} " + "".join(hashlib.sha256(f"{t}:{i}".encode()).hexdigest() for i in range(60))


def _conversation(turns: int) -> bytes:
    messages: list = [{"role": "user", "content": "start"}]
    for t in range(turns):
        messages += [{"role": "assistant", "content": f"step {t}"}, {"role": "user", "content": _output(t)}]
    return json.dumps({"harness": "anthropic", "session_id": "storage", "project_dir": "/tmp/fault-project",
                       "now": 1_764_000_000_000 + turns, "messages": messages}).encode()


def _transform(data_dir, data: bytes, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magic_context", "transform"], input=data, capture_output=True,
                          env=env(data_dir), cwd=REPO, timeout=120, check=False, preexec_fn=preexec)


def _check_outcome(proc: subprocess.CompletedProcess, data: bytes) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 3), err
    if proc.returncode == 3:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mc: error: "), err
        assert "restore a backup" not in err and "—" in lines[0], err  # a fix follows the dash
    else:
        assert contract(0, proc.stdout, err, data) is None
        assert "mc: warning:" in err, "a degraded pass must say so"
    return err.strip()


def _after_fault(data_dir, before, turns: int) -> None:
    db = data_dir / "context.db"
    integrity(db)
    nothing_lost(before, stored_messages(db))
    proc = _transform(data_dir, _conversation(turns))
    assert proc.returncode == 0, proc.stderr
    after = stored_messages(db)
    nothing_lost(before, after)
    assert len(after[("anthropic", "storage")]) == 1 + 2 * turns


def _set_immutable(paths: list, on: bool) -> bool:
    flag = "+i" if on else "-i"
    return all(subprocess.run(["chattr", flag, str(p)], capture_output=True, check=False).returncode == 0
               for p in paths)


def test_read_only_database(tmp_path):
    data_dir = tmp_path / "data"
    assert _transform(data_dir, _conversation(2)).returncode == 0
    db = data_dir / "context.db"
    files = [p for p in data_dir.iterdir() if p.name.startswith("context.db")]
    before = stored_messages(db)
    if os.geteuid() == 0:  # root writes through file modes: make the files immutable instead
        if not shutil.which("chattr") or not _set_immutable(files, True):
            pytest.skip("running as root without chattr +i (CAP_LINUX_IMMUTABLE): cannot make the database read-only")
        undo = lambda: _set_immutable(files, False)  # noqa: E731
    else:
        for p in [*files, data_dir]:
            p.chmod(0o500 if p.is_dir() else 0o400)
        undo = lambda: [p.chmod(0o700 if p.is_dir() else 0o600) for p in [*files, data_dir]]  # noqa: E731
    try:
        data = _conversation(6)
        outcome = _check_outcome(_transform(data_dir, data), data)
    finally:
        undo()
    _after_fault(data_dir, before, 6)
    record_figures("read-only database", {"outcome": outcome[:120], "lost_messages": 0})


def test_disk_full(tmp_path):
    data_dir = tmp_path / "data"
    assert _transform(data_dir, _conversation(2)).returncode == 0
    db = data_dir / "context.db"
    before = stored_messages(db)
    # A fixed cap, not the database's size plus a margin: the schema's size (each migration adds tables)
    # must not decide whether the WAL has room for the pass. 64 KiB holds neither conversation's writes.
    limit = 64 * 1024

    def size_limited() -> None:  # writes past `limit` bytes fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    outcomes = []
    for turns in (20, 80):
        data = _conversation(turns)
        outcomes.append(_check_outcome(_transform(data_dir, data, size_limited), data))
        integrity(db)
        nothing_lost(before, stored_messages(db))
    _after_fault(data_dir, before, 80)
    record_figures("disk full", {"outcomes": [o[:120] for o in outcomes], "lost_messages": 0})
