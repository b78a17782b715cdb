"""kill -9 at random points of a pass: the database stays intact, nothing stored is lost, and the next
pass serves normally and stores what the killed one did not. Seeded (MC_FUZZ_SEED); bounded for CI
(MC_FAULT_KILLS, default 12 kills)."""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from .checks import contract, integrity, kill_group, nothing_lost, record_figures, start_transform, stored_messages

pytestmark = [pytest.mark.fault, pytest.mark.slow]

KILLS = int(os.environ.get("MC_FAULT_KILLS", "12"))
NOW = 1_764_000_000_000


def _conversation(turns: int) -> bytes:
    messages: list = [{"role": "user", "content": "Port every module to the new API and keep the tests green."}]
    for t in range(turns):
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"Reading module {t}."},
                                              {"type": "tool_use", "id": f"toolu_{t}", "name": "read",
                                               "input": {"path": f"src/module_{t}.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}",
                                          "content": f"def f{t}(x):\n    return x + {t}\n" * 60}]},
        ]
    return json.dumps({"harness": "anthropic", "session_id": "killed", "project_dir": "/tmp/fault-project",
                       "now": NOW + turns * 1000, "model": {"provider": "anthropic", "id": "claude-sonnet-4-5",
                                                            "context_limit": 200_000},
                       "messages": messages}).encode()


def test_kill_9_during_passes(tmp_path):
    rng = random.Random(int(os.environ.get("MC_FUZZ_SEED", "14")))
    data_dir = tmp_path / "data"
    db = data_dir / "context.db"
    turns, killed_mid_pass = 40, 0
    for _ in range(KILLS):
        before = stored_messages(db) if db.exists() else {}
        turns += rng.randint(5, 40)
        proc = start_transform(data_dir)
        proc.stdin.write(_conversation(turns))
        proc.stdin.close()
        time.sleep(rng.uniform(0.05, 0.8))
        killed_mid_pass += proc.poll() is None
        kill_group(proc)
        if db.exists():
            integrity(db)
            nothing_lost(before, stored_messages(db))
    before = stored_messages(db) if db.exists() else {}
    data = _conversation(turns)
    proc = start_transform(data_dir, "--report")
    out, err = proc.communicate(data, timeout=120)
    assert proc.returncode == 0 and contract(0, out, err.decode(), data) is None, err
    integrity(db)
    after = stored_messages(db)
    nothing_lost(before, after)
    assert len(after[("anthropic", "killed")]) == 1 + 2 * turns  # the next pass stored everything
    assert killed_mid_pass >= KILLS // 3, f"only {killed_mid_pass} kills landed during a pass"
    record_figures("kill -9 during a pass", {"kills": KILLS, "mid_pass": killed_mid_pass, "lost_messages": 0})
