"""Load: 8 `mc transform` processes at once, several passes each, on one session and on 8 sessions, and
8 processes starting together on a missing database. Every pass exits 0 with a JSON document; the
database passes integrity_check and no stored message is lost.

Bounded for CI (MC_FAULT_PASSES, default 4 passes per process); the issue's figure is 50.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from .checks import REPO, contract, env, integrity, nothing_lost, record_figures, stored_messages

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PROCS = 8
PASSES = int(os.environ.get("MC_FAULT_PASSES", "4"))
NOW = 1_764_000_000_000


def _conversation(worker: int, turns: int, session: str) -> bytes:
    messages: list = [{"role": "user", "content": f"worker {worker}: fix the failing test in module {worker}"}]
    for t in range(turns):
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"Looking at step {t}."},
                                              {"type": "tool_use", "id": f"toolu_{worker}_{t}", "name": "bash",
                                               "input": {"command": f"pytest tests/test_{worker}.py -k case{t}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{worker}_{t}",
                                          "content": f"case{t}: ok\n" * 40}]},
        ]
    return json.dumps({"harness": "anthropic", "session_id": session, "project_dir": "/tmp/fault-project",
                       "now": NOW + 60_000 * turns, "model": {"provider": "anthropic", "id": "claude-sonnet-4-5",
                                                             "context_limit": 200_000},
                       "messages": messages}).encode()


def _run_workers(data_dir, session_of) -> tuple[list[str], int]:
    failures: list[str] = []
    count = [0]
    lock = threading.Lock()

    def worker(w: int) -> None:
        for p in range(PASSES):
            data = _conversation(w, p + 1, session_of(w))
            proc = subprocess.run([sys.executable, "-m", "magic_context", "transform"], input=data,
                                  capture_output=True, env=env(data_dir), cwd=REPO, timeout=120, check=False)
            problem = contract(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"), data)
            if problem is None and proc.returncode != 0:
                problem = f"exit {proc.returncode}"
            with lock:
                count[0] += 1
                if problem:
                    failures.append(f"worker {w} pass {p}: {problem}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(PROCS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures, count[0]


@pytest.mark.parametrize("layout", ["one session", "eight sessions"])
def test_eight_processes_many_passes(layout, tmp_path):
    data_dir = tmp_path / "data"
    session_of = (lambda w: "shared-session") if layout == "one session" else (lambda w: f"session-{w}")
    started = time.monotonic()
    failures, passes = _run_workers(data_dir, session_of)
    assert not failures, "\n".join(failures)
    db = data_dir / "context.db"
    integrity(db)
    stored = stored_messages(db)
    nothing_lost({}, stored)
    if layout == "eight sessions":
        for w in range(PROCS):
            assert len(stored[("anthropic", f"session-{w}")]) == 1 + 2 * PASSES  # every message of every pass
    seconds = round(time.monotonic() - started, 1)
    record_figures(f"concurrency {layout}", {"processes": PROCS, "passes_each": PASSES, "passes": passes,
                                              "failures": len(failures), "seconds": seconds})


def test_fresh_database_start_race(tmp_path):
    rounds, failures = 3, []
    for r in range(rounds):
        data_dir = tmp_path / f"race{r}"
        procs = [subprocess.Popen([sys.executable, "-m", "magic_context", "transform"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(data_dir), cwd=REPO)
                 for _ in range(PROCS)]
        for w, proc in enumerate(procs):
            data = _conversation(w, 1, f"race-{w}")
            out, err = proc.communicate(data, timeout=120)
            problem = contract(proc.returncode, out, err.decode("utf-8", "replace"), data)
            if problem or proc.returncode != 0:
                failures.append(f"round {r} process {w}: {problem or proc.returncode}")
        integrity(data_dir / "context.db")
    assert not failures, "\n".join(failures)
    record_figures("fresh-database race", {"rounds": rounds, "processes": PROCS, "failures": len(failures)})
