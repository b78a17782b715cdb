"""Peak memory of `mc transform` (issue #14 item 10; DESIGN §9: a pass's peak ≤ 4 × payload + 50 MB).

    python bench/memory_bench.py            # both cases, first pass and next pass, with the JSON floor

Cases: one 50 MB message (a tool output, the newest message: target ≤ 250 MB) and a 20 000-message
session (target ≤ 100 MB). Each figure is the peak RSS (ru_maxrss) of one fresh `mc transform` process
on a fresh database (the first pass stores everything, and creates the schema) and then of the next pass
(one new message: what every later call costs), next to the floor: a Python process that parses and
re-serializes the same payload with the standard json module.

Two ways of running the historian: inline (`MAGIC_CONTEXT_HISTORIAN=inline`, as replays and tests run it:
its work lands in the transform process, the heavier figure) and detached, as a live harness runs it (the
pass starts `mc wrapup --background` and returns; that process's peak is read from /proc while it runs,
and the next measurement waits until it has finished).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.buffer.read()), ensure_ascii=False))"
TARGETS_MB = {"one 50 MB message": 250, "20 000-message session": 100}


def _big_message(extra: int = 0) -> bytes:
    line = "00000000 some log output line with a path /src/module_42.py and status OK\n"
    big = (line * (50 * 2**20 // len(line) + 1))[: 50 * 2**20]
    messages = [{"role": "user", "content": "Run the suite and tell me what fails."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_big", "name": "bash",
                                                   "input": {"command": "pytest -x -vv 2>&1"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_big", "content": big}]}]
    for i in range(extra):
        messages += [{"role": "assistant", "content": f"Reading the log, part {i}."},
                     {"role": "user", "content": "go on"}]
    return json.dumps({"harness": "anthropic", "session_id": "mem-big", "project_dir": "/tmp/mem-bench",
                       "now": 1_764_000_000_000, "messages": messages}).encode()


def _long_session(extra: int = 0) -> bytes:
    messages = []
    for i in range(10_000 + extra):
        messages += [{"role": "user", "content": f"step {i}: please run the test for module {i % 300}"},
                     {"role": "assistant", "content": f"Ran tests/test_{i % 300}.py: {i % 7} failures, fixed."}]
    return json.dumps({"harness": "anthropic", "session_id": "mem-long", "project_dir": "/tmp/mem-bench",
                       "now": 1_764_000_000_000, "messages": messages}).encode()


def peak_mb(argv: list[str], payload: bytes, env: dict[str, str]) -> float:
    """Peak RSS of the child process, in MB (run through a wrapper so each figure is one process's own)."""
    wrapper = ("import resource,subprocess,sys; p=subprocess.run(sys.argv[1:], stdin=sys.stdin, "
               "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); sys.stderr.buffer.write(p.stderr[-300:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", wrapper, *argv], input=payload, capture_output=True, env=env,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[-1]} failed ({proc.returncode}): {proc.stderr.decode()[-300:]}")
    return int(proc.stdout.strip()) / 1024  # ru_maxrss is in KiB on Linux


def _historian_pid(db: Path) -> int | None:
    """The pid holding a historian lease (`<token> pid=<pid> host=<host>`), or None when none is held."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        row = conn.execute("SELECT holder FROM leases WHERE name LIKE 'historian:%'").fetchone()
    finally:
        conn.close()
    pid = next((part[4:] for part in (row[0].split() if row else []) if part.startswith("pid=")), "")
    return int(pid) if pid.isdigit() else None


def detached_historian_mb(db: Path) -> float | None:
    """Wait for the detached historian the last pass started; its peak RSS (VmHWM, polled) or None if none ran."""
    peak, deadline = None, time.monotonic() + 600
    while time.monotonic() < deadline and (pid := _historian_pid(db)) is not None:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break  # gone without releasing its lease (mc takes such a lease over at once)
        if "VmHWM:" not in status:
            break  # a zombie: it has exited
        peak = max(peak or 0, int(status.split("VmHWM:")[1].split()[0]) / 1024)
        time.sleep(0.005)
    return peak


def main() -> None:
    mc = [sys.executable, "-m", "magic_context", "transform"]
    rows = []
    for name, make in (("one 50 MB message", _big_message), ("20 000-message session", _long_session)):
        first, later = make(), make(1)
        figures: dict[str, float | None] = {}
        for mode in ("inline", "detached"):
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(os.environ, MAGIC_CONTEXT_STORAGE_DIR=str(Path(tmp) / "data"),
                           MAGIC_CONTEXT_CONFIG_DIR=str(Path(tmp) / "config"))
                env.pop("MAGIC_CONTEXT_HISTORIAN", None)
                if mode == "inline":
                    env["MAGIC_CONTEXT_HISTORIAN"] = "inline"
                    figures["floor"] = peak_mb([sys.executable, "-c", FLOOR], first, env)
                db = Path(tmp) / "data" / "context.db"
                figures[f"{mode} first"] = peak_mb(mc, first, env)
                historian = detached_historian_mb(db)
                figures[f"{mode} next"] = peak_mb(mc, later, env)
                historian = max(historian or 0, detached_historian_mb(db) or 0) or None
                if mode == "detached":
                    figures["historian"] = historian
        rows.append((name, len(first) / 2**20, figures, TARGETS_MB[name]))
    print("| case | payload MB | JSON floor MB | mc first pass MB | mc next pass MB | detached: first / next pass MB "
          "| detached historian MB | target MB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, size, f, target in rows:
        historian = f"{f['historian']:.0f}" if f["historian"] else "did not run"
        print(f"| {name} | {size:.1f} | {f['floor']:.0f} | {f['inline first']:.0f} | {f['inline next']:.0f} "
              f"| {f['detached first']:.0f} / {f['detached next']:.0f} | {historian} | ≤ {target} |")
    print(f"\n(python {sys.version.split()[0]}, {os.cpu_count()} CPUs; peak RSS = ru_maxrss of each process; "
          "'mc first/next pass' run the historian inline, in the pass)")


if __name__ == "__main__":
    main()
