"""Time what `mc proxy` adds per request (DESIGN §9), against the same fake upstream called directly.

The conversation: the DESIGN §9 reference session (every message of pi_before-compaction) followed by
pi_large-session, rendered as one Anthropic `messages` array (2.3 MB in all). For each body size
(~100 KB, ~1 MB, ~2 MB) a session is warmed up to that point the way a live client would have
driven it (about 40 earlier requests, historian inline, 200 000-token window: history is folded as
it would be); then the timed requests walk forward one turn at a time, each adding the next turn
(`stream: true`), as a live session does:
* defer: within the cache TTL (5 min);
* execute: then the cache TTL is set to 1 ms (user config), so every pass busts and re-renders the head.
The timed passes run the real background historian; the benchmark waits for it between requests
(untimed) so it never competes for the CPU. Pass kinds are read back and reported.

Per request: the body straight to the fake upstream (total time, time to the first byte), then
through the real `mc proxy` process; "added" is the paired difference. The floor is an in-process
`json.loads` + `json.dumps` of the same body (stdlib, as DESIGN §9's floor; orjson shown too),
measured in the same run. The fake upstream reads the body without parsing it and answers a fixed
short Anthropic SSE stream at once, without usage (so its own cost does not depend on the body, and
the scheduler runs on mc's estimates, as in `transform_bench.py`).

    python bench/proxy_bench.py [--runs 20]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
TARGETS = [("100 KB", 100_000), ("1 MB", 1_000_000), ("2 MB", 2_000_000)]
SYSTEM = "You are a coding agent working in the user's repository. Use the tools to read and edit files."
LIMIT = "200000"
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "bench-key-000000", "x-mc-context-limit": LIMIT}
WARM_PASSES = 40


class _Upstream(BaseHTTPRequestHandler):
    """Reads the request body and answers a fixed SSE stream, one chunk per event, without pauses
    (TCP_NODELAY: each write goes out at once)."""

    protocol_version = "HTTP/1.1"
    events = tuple(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in (
        ("message_start", {"type": "message_start", "message": {"id": "msg_bench", "type": "message",
                                                                "role": "assistant", "content": [],
                                                                "usage": {"input_tokens": 0, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        *[("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": f"word{i} "}}) for i in range(20)],
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 20}}),
        ("message_stop", {"type": "message_stop"})))

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in self.events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def conversation() -> list[dict]:
    """The reference session, then pi_large-session, as one Anthropic `messages` array."""
    from session_replay import convert
    from transform_bench import uncompacted_calls

    out: list[dict] = []
    for name in ("pi_before-compaction.jsonl", "pi_large-session.jsonl"):
        out += convert([*uncompacted_calls(SESSIONS / name)[-1]], "pi", "anthropic")
    return out


def body(messages: list[dict]) -> bytes:
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8192, "system": SYSTEM, "messages": messages,
                         "stream": True})


def turn_cuts(messages: list[dict]) -> tuple[list[int], list[int]]:
    """Where the client sends a request (before each assistant message) and the body size there."""
    cuts, sizes, total = [], [], 0
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and i > 1:
            cuts.append(i)
            sizes.append(total)
        total += len(orjson.dumps(message)) + 1
    return cuts, sizes


def timed_stream(client: httpx.Client, url: str, payload: bytes, headers: dict[str, str]) -> tuple[float, float]:
    """(ms to the first body byte, ms to the end) of one streamed request."""
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, content=payload, headers=headers) as resp:
        if resp.status_code != 200:
            raise SystemExit(f"{url} answered {resp.status_code}: {resp.read()[:300]!r}")
        for _chunk in resp.iter_raw():
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    return ((first or end) - started) * 1000, (end - started) * 1000


def floor_ms(payload: bytes, runs: int = 15) -> tuple[float, float]:
    """In-process parse + serialize of the body: (stdlib json, orjson), medians in ms."""
    std, fast = [], []
    for _ in range(runs):
        started = time.perf_counter()
        json.dumps(json.loads(payload), ensure_ascii=False).encode()
        std.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        orjson.dumps(orjson.loads(payload))
        fast.append((time.perf_counter() - started) * 1000)
    return statistics.median(std), statistics.median(fast)


def last_pass(db: Path, session: str) -> str:
    conn = sqlite3.connect(db, timeout=30)
    try:
        row = conn.execute("SELECT r.pass_kind FROM pass_reports r JOIN sessions s ON s.id = r.session_pk "
                           "WHERE s.session_id = ? ORDER BY r.id DESC LIMIT 1", (session,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else "?"


def warm(session: str, messages: list[dict], cuts: list[int], upto: int) -> None:
    """Serve earlier requests of the session in process (historian inline), as a live client would have."""
    from magic_context.transform import hook

    os.environ["MAGIC_CONTEXT_HISTORIAN"] = "inline"
    options = {"--harness": "anthropic", "--session": session, "--project": str(REPO), "--context-limit": LIMIT}
    step = max(1, upto // WARM_PASSES)
    for k in [*range(0, upto - 1, step), upto - 1]:
        hook.serve_pass(body(messages[:cuts[k]]), options)
    del os.environ["MAGIC_CONTEXT_HISTORIAN"]


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def main() -> None:
    from transform_bench import wait_for_historian

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    for package in ("magic_context", "commands"):
        compileall.compile_dir(str(REPO / package), quiet=1)
    messages = conversation()
    cuts, sizes = turn_cuts(messages)
    work = Path(tempfile.mkdtemp(prefix="mc-proxy-bench-"))
    config = work / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    os.environ.update(MAGIC_CONTEXT_STORAGE_DIR=str(work / "data"), MAGIC_CONTEXT_CONFIG_DIR=str(config.parent))
    env = {k: v for k, v in os.environ.items() if k != "MAGIC_CONTEXT_HISTORIAN"}
    db = work / "data" / "context.db"
    load_before = os.getloadavg()
    rows = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    upstream_url = f"http://127.0.0.1:{upstream.server_address[1]}"
    with httpx.Client(timeout=300) as client:
        proxy = subprocess.Popen([sys.executable, "-m", "magic_context", "proxy", "--port", "0",
                                  "--upstream-anthropic", upstream_url], stdout=subprocess.PIPE, env=env, cwd=REPO)
        try:
            address = json.loads(proxy.stdout.readline())["address"] if proxy.stdout else ""
            for label, target in TARGETS:
                walk = 2 * (args.runs + 2)
                start = min(range(1, len(cuts) - walk), key=lambda k: abs(sizes[k] - target))
                session = f"bench-{label}"
                warm(session, messages, cuts, start)
                for phase, (kind, ttl) in enumerate((("defer", "5m"), ("execute", "1ms"))):
                    config.write_text(f'cache_ttl = "{ttl}"\n')
                    added, first_d, first_p, tail_d, tail_p, kinds, bodies, floors = [], [], [], [], [], [], [], []
                    for run in range(args.runs + 2):  # the first two requests of a phase are not counted
                        payload = body(messages[:cuts[start + phase * (args.runs + 2) + run]])
                        headers = {**HEADERS, "x-claude-code-session-id": session}
                        direct = timed_stream(client, upstream_url + "/v1/messages", payload, HEADERS)
                        proxied = timed_stream(client, address + "/v1/messages", payload, headers)
                        pass_kind = last_pass(db, session)
                        wait_for_historian(db.parent)
                        if run < 2 or (pass_kind == "defer") != (kind == "defer"):
                            continue
                        kinds.append(pass_kind)
                        bodies.append(len(payload))
                        floors.append(floor_ms(payload))
                        added.append(proxied[1] - direct[1])
                        first_d.append(direct[0])
                        first_p.append(proxied[0])
                        tail_d.append(direct[1] - direct[0])
                        tail_p.append(proxied[1] - proxied[0])
                    if not added:
                        raise SystemExit(f"{label}: no {kind} pass among the timed requests")
                    rows.append((label, min(bodies), max(bodies), statistics.median(f[0] for f in floors),
                                 statistics.median(f[1] for f in floors), kind, len(added), args.runs,
                                 sorted(set(kinds)), statistics.median(added), p95(added),
                                 statistics.median(first_d), statistics.median(first_p), statistics.median(tail_d),
                                 statistics.median(tail_p)))
        finally:
            proxy.terminate()
            proxy.wait(30)
            upstream.shutdown()
    load_after = os.getloadavg()
    print(f"load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    print("| body | floor: json (orjson) | pass (runs) | added p50 | added p95 | p50 ÷ json floor "
          "| first byte: direct → proxy | after the first byte: direct / proxy |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for (label, low, high, std_floor, fast_floor, kind, n, runs, kinds, a50, a95, fd, fp, td, tp) in rows:
        shown = f"{kind} ({n}/{runs})" + ("" if kinds == [kind] else f" [{', '.join(kinds)}]")
        print(f"| {label}: {low / 1e6:.2f}–{high / 1e6:.2f} MB | {std_floor:.1f} ms ({fast_floor:.1f} ms) | {shown} "
              f"| {a50:.1f} ms | {a95:.1f} ms | {a50 / std_floor:.2f}× | {fd:.1f} → {fp:.1f} ms "
              f"| {td:.1f} / {tp:.1f} ms |")


if __name__ == "__main__":
    main()
