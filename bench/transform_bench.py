"""Time `mc transform` against the JSON floor on real sessions (DESIGN §9).

The floor is a Python process that parses and re-serializes the same payload with the standard json
module. Besides the real sessions as their harness served them, the DESIGN §9 reference workload
("700 messages / 2 MB"): every message of pi_before-compaction as one uncompacted Pi context (988
messages, 2.1 MB), i.e. the same session had mc managed it instead of the harness compacting.

For each session the state is warmed with earlier requests up to the next-to-last one (historian
inline, as if it had kept up, as it does live); then the last request, which adds the newest turn's
messages, is timed twice over: as a defer pass (within the cache TTL, below the threshold) and as an
execute pass (the cache TTL expired, so the pass busts). Each figure is the median of N fresh
processes; the database is restored from the snapshot before every run. The timed runs use the real
background historian, and the benchmark waits for a launched historian to finish before the next run
so it never competes for the CPU (its launch is inside the timed run). The pass kind is checked.

    python bench/transform_bench.py [--runs 15] [--config FILE]

`--config FILE` installs FILE as the user's `config.toml` for every pass (warm-up and timed), so the
cost a config file adds to a pass (parsing it: `tomllib` is imported only when one exists) is measured
too; by default there is none, as on a fresh install.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import sqlite3
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
REFERENCE = "pi_before-compaction.jsonl (uncompacted)"
CASES = [(REFERENCE, "pi", 200_000), ("pi_large-session.jsonl", "pi", 60_000),
         ("pi_before-compaction.jsonl", "pi", 120_000),
         ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", "openai", 40_000)]
FLOOR = "import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.buffer.read()), ensure_ascii=False))"


def timed(argv: list[str], payload: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=payload, capture_output=True, env=env, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()[-400:]}")
    return elapsed


def uncompacted_calls(path: Path) -> list[list]:
    """The request before each assistant turn of a Pi session, ignoring its compaction entries."""
    messages = []
    for line in path.read_bytes().splitlines():
        entry = orjson.loads(line) if line.strip() else {}
        if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
            message = dict(entry["message"])
            message.pop("usage", None)  # no provider usage: the scheduler estimates, as for a new harness
            messages.append(message)
    ends = [i for i, msg in enumerate(messages) if msg.get("role") == "assistant" and i > 0]
    return [messages[:end] for end in ends]


def restore(work: Path, snapshot: Path) -> None:
    shutil.rmtree(work / "data")
    shutil.copytree(snapshot, work / "data")


def pass_kind(mc: list[str], payload: bytes, env: dict[str, str]) -> str:
    """The pass kind `mc transform --report` says it served (the last stderr line is the report)."""
    proc = subprocess.run([*mc, "--report"], input=payload, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"mc transform failed: {proc.stderr.decode()[-400:]}")
    return str(orjson.loads(proc.stderr.strip().splitlines()[-1])["pass"])


def wait_for_historian(data: Path, timeout_s: float = 120.0) -> None:
    """Block while a background historian holds its lease (it deletes the lease when it finishes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        db = data / "context.db"
        conn = sqlite3.connect(db, timeout=30) if db.exists() else None
        try:
            busy = conn is not None and conn.execute(
                "SELECT count(*) FROM leases WHERE name LIKE 'historian:%'").fetchone()[0]
        finally:
            if conn is not None:
                conn.close()
        if not busy:
            return
        time.sleep(0.05)
    raise SystemExit("the background historian did not finish within the timeout")


def envelope(messages: list, harness: str, limit: int, now: int) -> bytes:
    return orjson.dumps({"messages": messages, "harness": harness, "session_id": "bench", "project_dir": str(REPO),
                         "model": {"provider": "bench", "id": "bench", "context_limit": limit}, "now": now})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--config", type=Path, help="a config.toml to install as the user's for every pass")
    args = parser.parse_args()
    if args.config is not None and not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    for package in ("magic_context", "commands"):
        compileall.compile_dir(str(REPO / package), quiet=1)
    from session_replay import render_calls

    # What the `mc` console script runs (no runpy, unlike `python -m`).
    mc = [sys.executable, "-c", "import sys; from commands.main import main; sys.exit(main())", "transform"]
    rows = []
    for name, shape, limit in CASES:
        if name == REFERENCE:
            calls = uncompacted_calls(SESSIONS / name.split(" ")[0])
        else:
            calls = [native for native, _ in render_calls(SESSIONS / name, shape)]
        last, base = calls[-1], calls[-2]
        work = Path(tempfile.mkdtemp(prefix="mc-bench-"))
        env = {**os.environ, "MAGIC_CONTEXT_STORAGE_DIR": str(work / "data"),
               "MAGIC_CONTEXT_CONFIG_DIR": str(work / "config"), "PYTHONDONTWRITEBYTECODE": "1"}
        if args.config is not None:
            (work / "config").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(args.config, work / "config" / "config.toml")
        warm = {**env, "MAGIC_CONTEXT_HISTORIAN": "inline"}
        now = 1_800_000_000_000
        # Warm the session state with earlier requests, as a live harness would have.
        for native in [*calls[:-2:max(1, len(calls) // 40)], base]:
            timed(mc, envelope(native, shape, limit, now), warm)
        snapshot = work / "snapshot"
        shutil.copytree(work / "data", snapshot)
        payload = envelope(last, shape, limit, now + 1_000)
        busting = envelope(last, shape, limit, now + 3_600_000)
        kinds = {}
        for label, body in (("defer", payload), ("execute", busting)):
            restore(work, snapshot)
            kinds[label] = pass_kind(mc, body, env)
            wait_for_historian(work / "data")
        floor, defer, execute = [], [], []
        for _ in range(args.runs):
            floor.append(timed([sys.executable, "-c", FLOOR], payload, env))
            restore(work, snapshot)
            defer.append(timed(mc, payload, env))
            wait_for_historian(work / "data")
            restore(work, snapshot)
            execute.append(timed(mc, busting, env))
            wait_for_historian(work / "data")
        f, d, e = statistics.median(floor), statistics.median(defer), statistics.median(execute)
        rows.append((name, len(last), len(last) - len(base), len(payload) / 1e6, f, d, e, kinds))
        shutil.rmtree(work, ignore_errors=True)
    if args.config is not None:
        print(f"With {args.config} as the user's config.toml.\n")
    print("| session | messages (new) | payload MB | floor ms | defer ms (× floor) | execute ms (× floor) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, count, new, size, f, d, e, kinds in rows:
        print(f"| {name} | {count} (+{new}) | {size:.2f} | {f:.1f} | {d:.1f} ({d / f:.2f}×) | "
              f"{e:.1f} ({e / f:.2f}×) |")
        if kinds != {"defer": "defer", "execute": kinds["execute"]} or kinds["execute"] == "defer":
            print(f"  (pass kinds were {kinds}: not the defer/execute pair this benchmark means to time)")


if __name__ == "__main__":
    main()
