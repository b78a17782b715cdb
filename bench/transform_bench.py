"""Time `mc transform` against the JSON floor on real sessions (DESIGN §9).

The floor is a Python process that parses and re-serializes the same payload with the standard json
module. For each session: the defer pass (the same request served again: state warm, nothing new),
and the execute pass (three new messages on a pass that busts: the cache TTL expired). Each figure is
the median of N fresh processes; the database is restored before every execute run.

    python bench/transform_bench.py [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
CASES = [("pi_large-session.jsonl", "pi", 60_000), ("pi_before-compaction.jsonl", "pi", 120_000),
         ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", "openai", 40_000)]
FLOOR = "import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.buffer.read()), ensure_ascii=False))"


def timed(argv: list[str], payload: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=payload, capture_output=True, env=env, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()[-400:]}")
    return elapsed


def envelope(messages: list, harness: str, limit: int, now: int) -> bytes:
    return orjson.dumps({"messages": messages, "harness": harness, "session_id": "bench", "project_dir": str(REPO),
                         "model": {"provider": "bench", "id": "bench", "context_limit": limit}, "now": now})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for package in ("magic_context", "commands"):
        compileall.compile_dir(str(REPO / package), quiet=1)
    from session_replay import render_calls

    # What the `mc` console script runs (no runpy, unlike `python -m`).
    mc = [sys.executable, "-c", "import sys; from commands.main import main; sys.exit(main())", "transform"]
    rows = []
    for name, shape, limit in CASES:
        calls = [native for native, _ in render_calls(SESSIONS / name, shape)]
        last = calls[-1]
        base = calls[-4] if len(calls) > 4 else calls[0]
        work = Path(tempfile.mkdtemp(prefix="mc-bench-"))
        env = {**os.environ, "MAGIC_CONTEXT_STORAGE_DIR": str(work / "data"),
               "MAGIC_CONTEXT_CONFIG_DIR": str(work / "config"), "PYTHONDONTWRITEBYTECODE": "1"}
        now = 1_800_000_000_000
        # Warm the session state with every earlier request, as a live harness would have.
        for native in [*calls[::max(1, len(calls) // 40)], base]:
            timed(mc, envelope(native, shape, limit, now), env)
        snapshot = work / "snapshot"
        shutil.copytree(work / "data", snapshot)
        payload = envelope(last, shape, limit, now)
        floor = [timed([sys.executable, "-c", FLOOR], payload, env) for _ in range(args.runs)]
        timed(mc, payload, env)  # the first time this request is seen
        defer = [timed(mc, payload, env) for _ in range(args.runs)]
        execute = []
        busting = envelope(last, shape, limit, now + 3_600_000)
        for _ in range(args.runs):
            shutil.rmtree(work / "data")
            shutil.copytree(snapshot, work / "data")
            execute.append(timed(mc, busting, env))
        f, d, e = statistics.median(floor), statistics.median(defer), statistics.median(execute)
        rows.append((name, len(last), len(payload) / 1e6, f, d, e))
        shutil.rmtree(work, ignore_errors=True)
    print("| session | messages | payload MB | floor ms | defer ms (× floor) | execute ms (× floor) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, count, size, f, d, e in rows:
        print(f"| {name} | {count} | {size:.2f} | {f:.1f} | {d:.1f} ({d / f:.2f}×) | {e:.1f} ({e / f:.2f}×) |")


if __name__ == "__main__":
    main()
