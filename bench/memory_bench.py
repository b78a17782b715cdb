"""Peak memory of `mc transform` (issue #14 item 10; DESIGN §9: a pass's peak ≤ 4 × payload + 50 MB).

    python bench/memory_bench.py            # both cases, first pass and next pass, with the JSON floor

Cases: one 50 MB message (a tool output, the newest message: target ≤ 250 MB) and a 20 000-message
session (target ≤ 100 MB). Each figure is the peak RSS (ru_maxrss) of one fresh `mc transform` process
on a fresh database (the first pass stores everything) and then of the next pass (one new message: what
every later call costs), next to the floor: a Python process that parses and re-serializes the same
payload with the standard json module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


def main() -> None:
    mc = [sys.executable, "-m", "magic_context", "transform"]
    rows = []
    for name, make in (("one 50 MB message", _big_message), ("20 000-message session", _long_session)):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, MAGIC_CONTEXT_STORAGE_DIR=str(Path(tmp) / "data"),
                       MAGIC_CONTEXT_CONFIG_DIR=str(Path(tmp) / "config"), MAGIC_CONTEXT_HISTORIAN="inline")
            first, later = make(), make(1)
            floor = peak_mb([sys.executable, "-c", FLOOR], first, env)
            first_mb = peak_mb(mc, first, env)
            later_mb = peak_mb(mc, later, env)
            rows.append((name, len(first) / 2**20, floor, first_mb, later_mb, TARGETS_MB[name]))
    print("| case | payload MB | JSON floor MB | mc first pass MB | mc next pass MB | target MB |")
    print("|---|---|---|---|---|---|")
    for name, size, floor, first_mb, later_mb, target in rows:
        print(f"| {name} | {size:.1f} | {floor:.0f} | {first_mb:.0f} | {later_mb:.0f} | ≤ {target} |")
    print(f"\n(python {sys.version.split()[0]}, {os.cpu_count()} CPUs; peak RSS = ru_maxrss of each process)")


if __name__ == "__main__":
    main()
