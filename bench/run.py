"""The replay benchmark: every recorded session through mc and the baselines, at fixed windows.

    python bench/run.py                 # writes bench/results.md (~1-2 minutes on 2 cores)
    python bench/run.py --no-latency    # skip the subprocess latency run
    python bench/run.py --out FILE.md

Each session is replayed in-process (the `mc replay` engine, same code) with Claude Sonnet prices
and a 5-minute TTL; the mc/native and mc/masking cost ratios are also given under Opus and OpenAI
prices; and one session is replayed with `mc transform` as a process per pass to measure latency
against the JSON floor honestly (the in-process floor has no interpreter start-up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from magic_context.replay import ReplayResult, replay  # noqa: E402

# (file under SESSIONS, window): windows smaller than the sessions, so every strategy must manage.
CASES = (
    ("pi_large-session.jsonl", 60_000),
    ("pi_before-compaction.jsonl", 120_000),
    ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", 40_000),
    ("mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json", 30_000),
    ("claude-code/bookminder-subagent-a12564cd.jsonl", 20_000),
)
LATENCY_CASE = CASES[2]
LABELS = {
    "pi_large-session.jsonl": "pi large-session",
    "pi_before-compaction.jsonl": "pi before-compaction",
    "mini-swe-agent_deepseek-chat_django__django-13964.traj.json": "django-13964",
    "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json": "sqlfluff-1763",
    "claude-code/bookminder-subagent-a12564cd.jsonl": "bookminder subagent",
}


def _label(name: str) -> str:
    return LABELS.get(name, Path(name).stem)
PRICINGS = ("anthropic-sonnet", "anthropic-opus", "openai")
GOALS = {"cost_vs_native": 0.6, "cost_vs_masking": 0.5, "cache_read_share": 0.95, "latency_vs_floor": 1.5}


def _fmt_money(v: float) -> str:
    return f"${v:,.2f}" if v >= 1 else f"${v:.4f}"


def _mean_tokens(result: ReplayResult, name: str) -> float:
    run = result.run(name)
    return statistics.fmean(run.tokens) if run and run.tokens else 0.0


def _table(result: ReplayResult, data: dict[str, Any]) -> list[str]:
    lines = ["| strategy | peak tokens (of window) | mean served | over window | cache-read share | busts "
             "| extra calls | cost | vs native |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in data["strategies"]:
        ratio = "—" if s["cost_vs_native"] is None else f"{s['cost_vs_native']:.2f}×"
        lines.append(f"| {s['name']} | {s['peak_tokens']:,} ({s['peak_share']:.0%}) | "
                     f"{_mean_tokens(result, s['name']):,.0f} | {s['over_window']} | {s['cache_read_share']:.1%} | "
                     f"{s['busts']} | {s['extra_calls']} | {_fmt_money(s['cost_usd'])} | {ratio} |")
    return lines


def _by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in data["strategies"]}


def _mc_lines(data: dict[str, Any]) -> list[str]:
    mc = _by_name(data)["mc"]
    kinds = ", ".join(f"{k} {n}" for k, n in mc["pass_kinds"].items())
    anchors = ", ".join(f"{k} {v['retained']}/{v['total']}" for k, v in mc["anchors"].items() if v["total"])
    retention = "n/a (nothing folded)" if mc["anchor_retention"] is None else f"{mc['anchor_retention']:.0%}"
    return [f"mc passes: {kinds}. In-process latency p50 {mc['latency_ms_p50']} ms / p95 {mc['latency_ms_p95']} ms "
            f"(JSON floor in-process p50 {mc['floor_ms_p50']} ms). Anchor retention {retention}"
            + (f" ({anchors})." if anchors else ".")]


def _goal_row(name: str, data: dict[str, Any]) -> str:
    s = _by_name(data)
    mc, native, masking = s["mc"], s["native"], s["masking"]
    vs_mask = mc["cost_usd"] / masking["cost_usd"] if masking["cost_usd"] else None

    def mark(ok: bool) -> str:
        return "✅" if ok else "❌"

    return (f"| {_label(name)} | {mc['cost_vs_native']:.2f}× {mark(mc['cost_vs_native'] <= GOALS['cost_vs_native'])} | "
            f"{vs_mask:.2f}× {mark(vs_mask is not None and vs_mask <= GOALS['cost_vs_masking'])} | "
            f"{mc['cache_read_share']:.1%} {mark(mc['cache_read_share'] >= GOALS['cache_read_share'])} | "
            f"{mc['over_window']} {mark(mc['over_window'] == 0)} | "
            f"{native['cost_vs_native']:.2f}× |")


def _bust_levels(result: ReplayResult, name: str) -> list[float]:
    """Served tokens (share of the window) on the passes that broke the warm prefix."""
    run = result.run(name)
    if run is None:
        return []
    return [c.tokens / result.context_limit for c in run.charges if c.bust]


def _span(values: list[float], fmt: str = "{:.0%}") -> str:
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def _import_ms() -> float | None:
    """Wall time to import the transform pipeline in a fresh interpreter (what every pass pays)."""
    code = ("import time;t=time.perf_counter();import magic_context.transform.pipeline;"
            "print((time.perf_counter()-t)*1000)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True,
                                     text=True).stdout) for _ in range(5)]
    except (subprocess.CalledProcessError, ValueError, OSError):
        return None
    return statistics.median(runs)


def _reading(results: list[tuple[str, ReplayResult, dict[str, Any]]], latency: dict[str, Any] | None) -> list[str]:
    """Where mc falls short, computed from the figures (the prose names the mechanism)."""
    out = []
    mcs = [(n, r, _by_name(d)["mc"], _by_name(d)["native"]) for n, r, d in results]
    short = [(n, r, mc, nat) for n, r, mc, nat in mcs if mc["cost_vs_native"] > GOALS["cost_vs_native"]]
    if short:
        read_shares = []
        for _, r, _, _ in short:
            led, p = r.run("mc").ledger, r.pricing
            read_shares.append(led.read_tokens * p.input_per_mtok * p.read_multiplier / 1e6 / led.usd)
        pairs = "; ".join(f"{_label(n)} {_mean_tokens(r, 'mc') / _mean_tokens(r, 'native'):.2f} → "
                          f"{mc['cost_vs_native']:.2f}×" for n, r, mc, _ in short)
        mc_levels = [x for _, r, _, _ in short for x in _bust_levels(r, "mc")]
        nat_levels = [x for _, r, _, _ in short for x in _bust_levels(r, "native")]
        bust_ratio = [mc["busts"] / nat["busts"] for _, _, mc, nat in short if nat["busts"]]
        out.append(
            f"* **Cost above 0.6× native on {len(short)} of {len(mcs)} sessions** "
            f"({_span([mc['cost_vs_native'] for _, _, mc, _ in short], '{:.2f}×')}). With the cache warm, "
            f"{_span(read_shares)} of mc's bill is cache *reads* (0.1×, but on every pass), so the cost ratio "
            f"tracks the ratio of mean served context (mc/native mean served → cost: {pairs}). After a bust mc "
            f"serves {_span(mc_levels)} of the window (it busts at its 65% execute threshold); native grows to "
            f"85% and falls to {_span(nat_levels)} (a 2 000-token summary plus a 20% tail). mc busts "
            f"{_span(bust_ratio, '{:.1f}×')} as often as native; its busts rewrite less (the m[0] prefix survives "
            "them) and native also pays for its summary calls. To reach 0.6× mc must serve a smaller mean context: "
            "reclaim deeper when it busts, folding spent raw history into compartments rather than keeping it raw "
            "until it is dropped.")
    low = [(n, mc) for n, _, mc, _ in mcs if mc["anchor_retention"] is not None and mc["anchor_retention"] < 0.9]
    if low:
        notes = []
        for n, mc in low:
            fired = mc["historian"].get("fired", 0) + mc["historian"].get("running", 0)
            kinds = ", ".join(f"{k} {v['retained']}/{v['total']}" for k, v in mc["anchors"].items() if v["total"])
            note = f"{_label(n)} {mc['anchor_retention']:.0%} ({kinds}): historian fired on {fired} passes, " \
                   f"{mc['compartments'] or 0} compartments"
            if mc.get("historian_failure"):
                note += f", last failure “{mc['historian_failure'][:110]}”"
            notes.append(note)
        out.append(
            "* **Anchor retention under 90%** (" + "; ".join(notes) + "). What mc drops leaves the request unless "
            "a compartment in the head names it: where the historian wrote no compartments, dropped paths and "
            "commits are simply gone; where it did, the compartments as rendered at the head (older ones at terser "
            "tiers) name only part of the files, commits and requests that were folded.")
    goal = GOALS["cache_read_share"]
    low_cache = [(n, mc["cache_read_share"]) for n, _, mc, _ in mcs if mc["cache_read_share"] < goal]
    if low_cache:
        out.append(
            "* **Cache-read share under 95%** on "
            + ", ".join(f"{_label(n)} ({v:.1%})" for n, v in low_cache)
            + ": in a short session, or one that grows fast relative to the window, writing the new messages "
            "and rewriting after each execute pass are a large part of the input. Masking and clear-tool-uses "
            "bust on almost every pass (each new tool result pushes an older one behind a placeholder), which "
            "is why they cost more than native despite smaller requests.")
    if latency is not None and latency["latency_vs_floor"] > GOALS["latency_vs_floor"]:
        imports = _import_ms()
        cause = (f"importing the transform pipeline alone takes ~{imports:.0f} ms in a fresh interpreter, paid on "
                 "every call" if imports is not None else "most of the gap is interpreter start-up and imports")
        out.append(
            f"* **Latency: {latency['latency_vs_floor']}× the floor, not ≤ 1.5×.** As a process per pass mc's p50 "
            f"is {latency['latency_ms_p50']} ms against {latency['floor_ms_p50']} ms for parsing and re-serializing "
            f"the same payload with json; {cause}, while the pass itself runs in "
            f"{_span([_by_name(d)['mc']['latency_ms_p50'] for _, _, d in results], '{:.0f}')} ms in-process (p50).")
    return out or ["* mc meets every goal on these sessions."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results.md")
    parser.add_argument("--sessions", type=Path, default=SESSIONS)
    parser.add_argument("--no-latency", action="store_true", help="skip the subprocess latency replay")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mc-bench-") as tmp:  # tiktoken's rank cache, never the user's dir
        os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(Path(tmp) / "data"))
        os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(Path(tmp) / "config"))
        results = []
        ratio_rows = []
        for name, window in CASES:
            path = args.sessions / name
            print(f"replaying {name} at {window:,} tokens …", file=sys.stderr, flush=True)
            result = replay(path, context_limit=window)
            data = result.to_dict()
            results.append((name, result, data))
            row = [_label(name)]
            for pricing in PRICINGS:
                d = data if pricing == "anthropic-sonnet" else replay(
                    path, context_limit=window, pricing=pricing, strategies=["mc", "native", "masking"]).to_dict()
                s = _by_name(d)
                row.append(f"{s['mc']['cost_usd'] / s['native']['cost_usd']:.2f}× / "
                           f"{s['mc']['cost_usd'] / s['masking']['cost_usd']:.2f}×")
            ratio_rows.append(row)
        latency = None
        if not args.no_latency:
            name, window = LATENCY_CASE
            print(f"latency: {name} with mc transform as a process per pass …", file=sys.stderr, flush=True)
            lat = replay(args.sessions / name, context_limit=window, strategies=["mc"], subprocess=True).to_dict()
            latency = lat["strategies"][0]
    elapsed = time.perf_counter() - started

    lines = ["# Replay benchmark", "",
             "Generated by `python bench/run.py` (the `mc replay` engine, mc in-process, historian inline when "
             f"available). {len(CASES)} recorded sessions from `../shared/data/sessions`, each at a fixed window "
             "smaller than the session; Claude Sonnet 4.5 prices ($3/Mtok input, cache write 1.25×, read 0.1×), "
             f"5-minute TTL. Wall time {elapsed:.0f} s.", "",
             "Cost counts prompt tokens (cache writes, reads, uncached input) plus each strategy's own extra "
             "calls (native's summary calls: their input and 2 000 output tokens); the recorded responses are the "
             "same for every strategy and are left out. Token counts are exact cl100k per message.", ""]
    lines += ["## Goals (sessions larger than the window)", "",
              "| session | mc vs native (≤ 0.6×) | mc vs masking (≤ 0.5×) | mc cache-read share (≥ 95%) "
              "| mc passes over window (0) | native |", "|---|---:|---:|---:|---:|---:|"]
    lines += [_goal_row(name, data) for name, _, data in results]
    if latency is not None:
        ok = "✅" if latency["latency_vs_floor"] <= GOALS["latency_vs_floor"] else "❌"
        lines += ["", f"Transform latency (`mc transform` as a process per pass, {LATENCY_CASE[0]}, "
                      f"{latency['passes']} passes): p50 {latency['latency_ms_p50']} ms, "
                      f"p95 {latency['latency_ms_p95']} ms; JSON floor p50 {latency['floor_ms_p50']} ms "
                      f"→ {latency['latency_vs_floor']}× (goal ≤ 1.5×) {ok}"]
    lines += ["", "## Per session", ""]
    for name, result, data in results:
        lines += [f"### {name} — window {data['context_limit']:,}, {data['passes']} passes, "
                  f"{data['messages']} messages", ""]
        lines += _table(result, data)
        lines += ["", *_mc_lines(data), ""]
    lines += ["## mc cost vs native / vs masking under each pricing", "",
              "| session | " + " | ".join(PRICINGS) + " |", "|---|" + "---:|" * len(PRICINGS)]
    lines += ["| " + " | ".join(row) + " |" for row in ratio_rows]
    lines += ["", "## Where mc falls short, and why", "", *_reading(results, latency), "",
              "Reproduce: `python bench/run.py` (or one session: "
              "`mc replay ../shared/data/sessions/pi_large-session.jsonl --context-limit 60000`).", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out} in {elapsed:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
