"""The seeded fuzzer: mutated real requests through `mc transform`, asserting the exit-code contract.

    python -m pytest -m fault tests/fault/test_fuzz.py                      # 2 000 cases (CI)
    python -m pytest -m fault tests/fault/test_fuzz.py --fuzz-cases 10000   # or MC_FUZZ_CASES=10000

Cases run the transform entry point in process (the function the CLI's fast path calls) so thousands fit
in CI; most share one database (as every harness on a machine does), every tenth starts on a machine
with no data dir. Exit 2 must write nothing: no data dir on a fresh machine, no committed change
(`PRAGMA data_version`) in the shared database. A sample also runs through the real CLI process.
Seed: $MC_FUZZ_SEED (default 14).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from collections import Counter

import pytest

from .checks import contract, integrity, record_figures, stored_messages
from .fuzz import mutate, run_case, seeds

pytestmark = [pytest.mark.fault, pytest.mark.slow]

DEFAULT_CASES = 2000
CLI_SAMPLE = 40


def _cases(config: pytest.Config) -> int:
    flag = config.getoption("--fuzz-cases")
    return int(flag if flag is not None else os.environ.get("MC_FUZZ_CASES", DEFAULT_CASES))


def test_mutated_real_requests_keep_the_exit_code_contract(request, tmp_path, monkeypatch):
    cases = _cases(request.config)
    seed = int(os.environ.get("MC_FUZZ_SEED", "14"))
    rng = random.Random(seed)
    corpus = seeds()
    shared = tmp_path / "shared"
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "inline")
    codes: Counter = Counter()
    failures: list[str] = []
    watcher = None
    started = time.monotonic()
    for i in range(cases):
        data, what = mutate(rng, corpus)
        fresh = i % 10 == 0
        data_dir = tmp_path / f"fresh{i}" if fresh else shared
        version = None
        if not fresh and watcher is None and (shared / "context.db").exists():
            watcher = sqlite3.connect(shared / "context.db")
        if watcher is not None and not fresh:
            version = watcher.execute("PRAGMA data_version").fetchone()[0]
        code, stdout, stderr = run_case(data, data_dir)
        codes[code] += 1
        problem = contract(code, stdout, stderr, data)
        if problem is None and code == 2:
            if fresh and data_dir.exists():
                problem = f"exit 2 wrote {sorted(p.name for p in data_dir.rglob('*'))}"
            elif version is not None and watcher.execute("PRAGMA data_version").fetchone()[0] != version:
                problem = "exit 2 committed a change to the database"
        if problem is None and code == 0 and "mc: warning:" not in stderr:
            problem = _served_invalid(stdout)
        if problem:
            failures.append(f"case {i} ({what[:300]}): {problem}")
        if fresh:
            shutil.rmtree(data_dir, ignore_errors=True)
    if watcher is not None:
        watcher.close()
    integrity(shared / "context.db")
    sessions = stored_messages(shared / "context.db")
    record_figures("fuzz", {"cases": cases, "seed": seed, "exit_codes": {str(k): v for k, v in sorted(codes.items())},
                            "violations": len(failures), "sessions_stored": len(sessions),
                            "seconds": round(time.monotonic() - started, 1)})
    assert not failures, f"{len(failures)} of {cases} cases broke the contract:\n" + "\n".join(failures[:20])
    assert codes[0] > cases // 5 and codes[2] > cases // 5, codes  # both paths were really exercised


def _served_invalid(stdout: bytes) -> str | None:
    """What the provider would reject in a served request: its tool pairing (None when valid)."""
    from magic_context.errors import MCError
    from magic_context.transform import protocol
    from magic_context.wire import arcs

    try:
        inp = protocol.read_input(protocol.parse_document(stdout), {})
        problems = arcs.validate_pairing(protocol.CODECS[inp.harness].decode(inp.messages_json), inp.harness)
    except MCError as exc:
        return f"exit 0 with output mc itself cannot read: {exc.one_line()[:200]}"
    return f"exit 0 with invalid tool pairing: {problems[0]}" if problems else None


def test_a_sample_through_the_real_cli(tmp_path):
    from conftest import run_mc

    rng = random.Random(int(os.environ.get("MC_FUZZ_SEED", "14")) + 1)
    corpus = seeds()
    failures = []
    for i in range(CLI_SAMPLE):
        data, what = mutate(rng, corpus)
        data_dir = tmp_path / f"d{i}"
        proc = run_mc("transform", stdin=data, env={"MAGIC_CONTEXT_STORAGE_DIR": str(data_dir)}, cwd=tmp_path)
        problem = contract(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"), data)
        if problem is None and proc.returncode == 2 and data_dir.exists():
            problem = "exit 2 wrote to the data dir"
        if problem:
            failures.append(f"case {i} ({what[:200]}): {problem}")
    assert not failures, "\n".join(failures)
