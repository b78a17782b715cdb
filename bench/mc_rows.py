"""Re-measure mc's rows of bench/results.md without replaying the baselines again.

    nice -n 10 python bench/mc_rows.py --cases pi_before-compaction.jsonl@120000,... --out /tmp/mc_rows.json

The baselines do not change when mc's engine does, and a full `bench/run.py` spends about half its time
replaying them; this replays mc alone (in-process, every default, `--no-user-config`) for each case and
prints, for each, the goal row, the mc row of the per-session table and the mc paragraph in
`bench/run.py`'s formats, against the native figures `bench/sweep.py` recorded for the same case
(`bench/sweep.json`, "baselines"). Results go to `--out` as JSON (a rerun resumes from it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import run as bench_run  # noqa: E402
from magic_context.replay import replay  # noqa: E402


def measure(case: str) -> dict[str, Any]:
    """mc's figures for `case` (FILE@WINDOW), in `bench/run.py`'s case format minus the other strategies."""
    name, window = case.rsplit("@", 1)
    result = replay(bench_run.SESSIONS / name, context_limit=int(window), strategies=["mc"], user_config=False)
    data = result.to_dict()
    mc = result.run("mc")
    assert mc is not None
    data["bench"] = {"mean_tokens": {"mc": statistics.fmean(mc.tokens) if mc.tokens else 0.0}}
    return data


def with_native(data: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
    """`data` with the recorded native strategy (`bench/sweep.py`'s condensed figures) added and mc's ratios
    to it filled in."""
    mc = next(s for s in data["strategies"] if s["name"] == "mc")
    usd = native["cost_usd"]
    mc["cost_vs_native"] = round(mc["cost_usd"] / usd, 4)
    billing = mc["historian_billing"]
    billing["cost_with_model_historian_vs_native"] = round(billing["cost_with_model_historian_usd"] / usd, 4)
    retention = {"mean": native["retention_mean"], "min": native["retention_min"],
                 **{kind: {"mean": share} for kind, share in native["retention_kinds"].items()}}
    profile = "native:pi" if "pi_" in Path(data["file"]).name else "native:codex"  # the cases' harnesses
    data["strategies"] = [mc, {**native, "name": "native", "retention": retention, "compaction": {"profile": profile}}]
    return data


def mc_table_row(data: dict[str, Any]) -> str:
    """The mc row of a per-session table, as `bench/run.py` writes it."""
    s = data["strategies"][0]
    kept = s["retention"]
    return (f"| mc | {s['peak_tokens']:,} ({s['peak_share']:.0%}) | {bench_run._mean_tokens(data, 'mc'):,.0f} | "
            f"{s['over_window']} | {s['cache_read_share']:.1%} | {s['resent_read_share']:.1%} | {s['busts']} | "
            f"{s['extra_calls']} | {bench_run._fmt_money(s['cost_usd'])} | {s['cost_vs_native']:.2f}× | "
            f"{kept['mean']:.0%} / {kept['min']:.0%} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", required=True, help="FILE@WINDOW,…")
    parser.add_argument("--baselines", type=Path, default=REPO / "bench" / "sweep.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    recorded = json.loads(args.baselines.read_text())
    done: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for case in args.cases.split(","):
        if case not in done:
            started = time.perf_counter()
            done[case] = measure(case)
            done[case]["replay_s"] = round(time.perf_counter() - started)
            args.out.write_text(json.dumps(done, indent=1), encoding="utf-8")
        data = with_native(done[case], recorded[case]["baselines"]["native"])
        name, window = case.rsplit("@", 1)
        key = bench_run._key(name, int(window))
        print(f"### {key} ({done[case]['replay_s']} s)")
        print(bench_run._goal_row(key, data))
        print(mc_table_row(data))
        print(bench_run._mc_lines(data)[0])
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
