"""Accuracy and speed of `tokens.estimate` against exact cl100k, per content kind.

    python bench/token_accuracy.py            # accuracy table, per-session table, speeds
    python bench/token_accuracy.py --load     # + exact-count load time, cold vs marshal cache (fresh processes)
    python bench/token_accuracy.py --fit      # refit the estimator's coefficients and print them

Kinds: `tool` (tool outputs of the recorded sessions in ../shared/data/sessions), `prose` (stdlib
docstrings), `code` (stdlib .py files), `json` (session records re-serialized three ways), and
`misc` (robustness probes: base64, hex dumps, UUIDs, hashes, CSV floats, logs, CJK, box rules,
emoji, tables, minified JS, URLs). Chunks are ~8 KB and at least 2 KB; tool outputs are taken
whole when they are at least 2 KB, and every tool output counts in its session's aggregate.
`tests/test_tokens.py` imports `build_corpus` from here, so the test and the table agree.
"""

from __future__ import annotations

import argparse
import ast
import base64
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
MIN_CHUNK = 2048
CHUNK = 8192
FIT_WEIGHTS = {"tool": 1.0, "prose": 1.0, "code": 1.0, "json": 1.0, "misc": 0.25}

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from magic_context import tokens  # noqa: E402


@dataclass
class Sample:
    kind: str  # tool | prose | code | json | misc
    group: str  # session file for tool outputs, probe name for misc, else the kind
    text: str
    exact: int = 0


def _chunks(pieces: list[str], size: int = CHUNK) -> list[str]:
    out: list[str] = []
    buf: list[str] = []
    n = 0
    for piece in pieces:
        buf.append(piece)
        n += len(piece)
        if n >= size:
            out.append("".join(buf))
            buf, n = [], 0
    if n >= MIN_CHUNK:
        out.append("".join(buf))
    return out


def tool_outputs(sessions: Path = SESSIONS) -> dict[str, list[str]]:
    """Every tool output of every recorded session, by session file name."""
    out: dict[str, list[str]] = {}
    for path in sorted(sessions.glob("pi_*.jsonl")):
        texts = []
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            message = entry.get("message") or {}
            if entry.get("type") == "message" and message.get("role") == "toolResult":
                texts.append("\n".join(b["text"] for b in message.get("content", []) if b.get("type") == "text"))
        out[path.name] = texts
    for path in sorted(sessions.glob("mini-swe-agent_*.traj.json")):
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
        out[path.name] = [m["content"] for m in messages if m.get("role") == "tool" and isinstance(m["content"], str)]
    for path in sorted(sessions.glob("claude-code/*.jsonl")):
        texts = []
        for line in path.read_text(encoding="utf-8").splitlines():
            message = json.loads(line).get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    value = block.get("content")
                    if isinstance(value, list):
                        value = "\n".join(p.get("text", "") for p in value if isinstance(p, dict))
                    if isinstance(value, str) and value:
                        texts.append(value)
        if texts:
            out[f"claude-code/{path.name}"] = texts
    return out


def _stdlib_sources() -> list[Path]:
    files = sorted(STDLIB.glob("*.py")) + sorted(STDLIB.glob("*/*.py"))
    return [f for f in files if "test" not in f.as_posix() and "site-packages" not in f.as_posix()]


def prose_samples() -> list[str]:
    docs = []
    for path in _stdlib_sources():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    docs.append(doc + "\n\n")
    return _chunks(docs)


def code_samples(limit: int = 300) -> list[str]:
    out = []
    for path in _stdlib_sources():
        try:
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        except UnicodeDecodeError:
            continue
        out.extend(_chunks(lines))
    step = max(1, len(out) // limit)
    return out[::step][:limit]


def json_samples(sessions: Path = SESSIONS, limit: int = 300) -> list[str]:
    records = []
    for path in sorted(sessions.glob("pi_*.jsonl")):
        records.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    for path in sorted(sessions.glob("mini-swe-agent_*.traj.json")):
        records.extend(json.loads(path.read_text(encoding="utf-8"))["messages"])
    styles = [{}, {"indent": 2}, {"separators": (",", ":"), "ensure_ascii": False}]
    out = []
    for i, style in enumerate(styles):
        out.extend(_chunks([json.dumps(r, **style) + "\n" for r in records[i::3]]))
    step = max(1, len(out) // limit)
    return out[::step][:limit]


def misc_samples() -> list[tuple[str, str]]:
    rnd = random.Random(7)
    out = []
    for _ in range(2):
        blob = rnd.randbytes(6000)
        b64 = base64.b64encode(blob).decode()
        out.append(("base64", "\n".join(b64[j:j + 76] for j in range(0, len(b64), 76))))
        out.append(("hexdump", "\n".join(f"{o:08x}  " + " ".join(f"{x:02x}" for x in blob[o:o + 16])
                                          for o in range(0, 2048, 16))))
        out.append(("uuids", "\n".join(str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(120))))
        out.append(("sha", "\n".join(f"{rnd.getrandbits(160):040x}  file_{j}.py" for j in range(80))))
        out.append(("floats_csv", "\n".join(",".join(f"{rnd.uniform(-1e3, 1e3):.6f}" for _ in range(8))
                                            for _ in range(60))))
        out.append(("logs", "\n".join(
            f"2025-11-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00."
            f"{rnd.randint(0, 999):03d}Z INFO [worker-{rnd.randint(1, 9)}] id={rnd.getrandbits(48):x}"
            f" status={rnd.choice([200, 404, 500])}"
            f" latency_ms={rnd.randint(1, 5000)}" for _ in range(50))))
    for path in sorted(glob.glob(str(STDLIB / "test" / "cjkencodings" / "*-utf8.txt"))):
        text = Path(path).read_text(encoding="utf-8")
        if len(text.encode()) >= 1000:
            out.append(("cjk", text))
    prose = (STDLIB / "argparse.py").read_text(encoding="utf-8")[:6000]
    out.append(("rules", "\n".join("=" * 79 if i % 3 == 0 else "-" * 60 if i % 3 == 1 else prose[i * 50:i * 50 + 70]
                                   for i in range(80))))
    out.append(("emoji", "".join(rnd.choice(["✅ done ", "🚀 ship it ", "⚠️ warning: ", "→ ", "• item ", "❌ failed ",
                                             "└── ", "├── src/", "│   "]) + f"{rnd.randint(0, 99)}\n"
                                 for _ in range(200))))
    out.append(("spaces", "\n".join(" " * rnd.randint(0, 40) + f"x = {rnd.randint(0, 9)}" for _ in range(200))))
    out.append(("table", "\n".join("| " + " | ".join(rnd.choice(["foo", "bar", "qux", "123", "4.5", "None"]).ljust(10)
                                                     for _ in range(6)) + " |" for _ in range(60))))
    out.append(("minjs", ";".join(f"var {chr(97 + rnd.randint(0, 25))}{rnd.randint(0, 99)}=function(e,t){{return "
                                  f"e[{rnd.randint(0, 9)}]+t.{rnd.choice(['length', 'push', 'map'])}}}"
                                  for _ in range(60))))
    out.append(("urls", "\n".join(f"https://example.com/{rnd.choice(['docs', 'api', 'blob/main'])}"
                                  f"/{rnd.getrandbits(32):x}/"
                                  f"{rnd.choice(['index.html', 'README.md', f'v1/users?id={rnd.randint(1, 10**6)}'])}"
                                  for _ in range(80))))
    return out


def build_corpus(sessions: Path = SESSIONS, *, exact: bool = True) -> list[Sample]:
    """All samples (tool outputs of every size, for the per-session aggregates), with exact counts."""
    samples = [Sample("tool", name, text) for name, texts in tool_outputs(sessions).items() for text in texts]
    samples += [Sample("prose", "prose", t) for t in prose_samples()]
    samples += [Sample("code", "code", t) for t in code_samples()]
    samples += [Sample("json", "json", t) for t in json_samples(sessions)]
    samples += [Sample("misc", name, t) for name, t in misc_samples()]
    if exact:
        enc = tokens.encoding()
        for s in samples:
            s.exact = len(enc.encode_ordinary(s.text))
    return samples


def is_chunk(s: Sample) -> bool:
    """Samples judged one by one: everything but tool outputs under 2 KB."""
    return len(s.text.encode("utf-8", "surrogatepass")) >= MIN_CHUNK or s.kind != "tool"


def errors(samples: list[Sample]) -> dict[str, list[float]]:
    by: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        if is_chunk(s) and s.exact:
            by[s.kind].append(tokens.estimate(s.text) / s.exact - 1)
    return by


def session_errors(samples: list[Sample]) -> dict[str, float]:
    est: dict[str, int] = defaultdict(int)
    exact: dict[str, int] = defaultdict(int)
    for s in samples:
        if s.kind == "tool":
            est[s.group] += tokens.estimate(s.text)
            exact[s.group] += s.exact
    return {g: est[g] / exact[g] - 1 for g in est if exact[g]}


def _speed(texts: list[str], fn) -> float:
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for t in texts:
            fn(t)
        best = min(best, time.perf_counter() - t0)
    return size / best / 1e6


def report(samples: list[Sample]) -> None:
    by_kind = errors(samples)
    enc = tokens.encoding()
    print(f"{'kind':6} {'n':>4} {'agg err':>8} {'mean':>7} {'mean|e|':>8} {'p95|e|':>7} {'min':>7} {'max':>7}"
          f" {'>10%':>5} {'est MB/s':>9} {'exact MB/s':>10}")
    for kind in ("tool", "prose", "code", "json", "misc"):
        errs = sorted(by_kind.get(kind, []))
        if not errs:
            continue
        chosen = [s for s in samples if s.kind == kind and is_chunk(s)]
        agg = sum(tokens.estimate(s.text) for s in chosen) / sum(s.exact for s in chosen) - 1
        absolute = sorted(abs(e) for e in errs)
        texts = [s.text for s in chosen]
        print(f"{kind:6} {len(errs):4d} {agg:+8.1%} {statistics.fmean(errs):+7.1%} {statistics.fmean(absolute):8.1%}"
              f" {absolute[int(0.95 * (len(absolute) - 1))]:7.1%} {errs[0]:+7.1%} {errs[-1]:+7.1%}"
              f" {sum(a > 0.10 for a in absolute):5d} {_speed(texts, tokens.estimate):9.1f}"
              f" {_speed(texts, enc.encode_ordinary):10.1f}")
    print("\nper session, all tool outputs aggregated:")
    for group, err in sorted(session_errors(samples).items()):
        n = sum(1 for s in samples if s.group == group)
        print(f"  {group:70s} n={n:4d} {err:+6.1%}")
    print("\nmisc probes (aggregated):")
    for name in sorted({s.group for s in samples if s.kind == "misc"}):
        chosen = [s for s in samples if s.group == name]
        err = sum(tokens.estimate(s.text) for s in chosen) / sum(s.exact for s in chosen) - 1
        print(f"  {name:12s} {err:+6.1%}")
    tool_texts = [s.text for s in samples if s.kind == "tool"]
    joined = "".join(tool_texts)
    print(f"\nestimate speed: all tool outputs one by one ({len(tool_texts)} texts) "
          f"{_speed(tool_texts, tokens.estimate):.0f} MB/s; joined into one text "
          f"{_speed([joined], tokens.estimate):.0f} MB/s; "
          f"bytes/4 {_speed([joined], lambda t: len(t.encode()) // 4):.0f} MB/s")
    short = ["Run the tests again please."] * 20000
    t0 = time.perf_counter()
    for t in short:
        tokens.estimate(t)
    print(f"per-call overhead on a short text: {(time.perf_counter() - t0) / len(short) * 1e6:.2f} µs")


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(a)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[p] = m[p], m[i]
        for r in range(n):
            if r != i and m[r][i]:
                f = m[r][i] / m[i][i]
                for c in range(i, n + 1):
                    m[r][c] -= f * m[i][c]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(samples: list[Sample]) -> list[float]:
    """Least squares on relative error, each kind weighted by FIT_WEIGHTS, non-ASCII cost held fixed."""
    chosen = [s for s in samples if is_chunk(s) and s.exact]
    per_kind = defaultdict(int)
    for s in chosen:
        per_kind[s.kind] += 1
    n = len(tokens.FEATURES)
    a = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for s in chosen:
        raw = s.text.encode("utf-8", "surrogatepass")
        w = FIT_WEIGHTS[s.kind] / per_kind[s.kind]
        x = [v / s.exact for v in tokens.features(raw)]
        target = 1 - tokens.NON_ASCII_COST * (len(raw) - len(s.text)) / s.exact
        for p in range(n):
            b[p] += w * x[p] * target
            for q in range(n):
                a[p][q] += w * x[p] * x[q]
    for p in range(n):
        a[p][p] *= 1 + 1e-7
    return _solve(a, b)


def load_times(runs: int = 5) -> None:
    """Exact-count first-call time in fresh processes: without and with the marshal cache."""
    code = ("import time; t=time.perf_counter(); from magic_context import tokens; tokens.count_exact('warm up');"
            " print((time.perf_counter()-t)*1000)")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, MAGIC_CONTEXT_STORAGE_DIR=tmp, PYTHONPATH=str(REPO))
        cold, warm = [], []
        for _ in range(runs):
            for f in Path(tmp).glob("cache/*"):
                f.unlink()
            cold.append(float(subprocess.check_output([sys.executable, "-c", code], env=env, text=True)))
            warm.append(float(subprocess.check_output([sys.executable, "-c", code], env=env, text=True)))
    print(f"\nexact counter, first call in a fresh process (import tiktoken + ranks + Encoding), n={runs}:")
    print(f"  no cache (parse bundled file, verify sha256, write cache): median {statistics.median(cold):.0f} ms")
    print(f"  marshal cache:                                             median {statistics.median(warm):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="refit and print coefficients")
    parser.add_argument("--load", action="store_true", help="measure exact-count load time in fresh processes")
    args = parser.parse_args()
    samples = build_corpus()
    if args.fit:
        coeffs = fit(samples)
        print("_COEFFS: Final = (")
        for i in range(0, len(coeffs), 6):
            print("    " + " ".join(f"{c:.4f}," for c in coeffs[i:i + 6]))
        print(")")
        return
    report(samples)
    if args.load:
        load_times()


if __name__ == "__main__":
    main()
