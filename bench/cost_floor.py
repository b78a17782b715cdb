"""How low can a context manager go? A cost floor per recording, beside mc and the recording's native.

    nice -n 19 python bench/cost_floor.py                                   # the 12 goal rows, replays mc + native
    python bench/cost_floor.py --figures /tmp/run-cache.json                # mc + native from a bench/run.py --cache
    python bench/cost_floor.py --cases pi_large-session.jsonl@14400 --json

The floor is what an ideal context manager could not go below on a recording, priced with the replay's
own token counts (`replay.units.TokenCounter`, exact cl100k) and price table (`replay.cost.Pricing`):

* **fixed part** of each request: the system prompt that travels beside the messages, the leading system
  messages, and the messages up to and including the first user message (the task). Tool definitions
  are not part of any strategy's request in the replay (the recordings do not carry them), so the floor
  leaves them out too; every strategy would pay the same for them.
* `floor`: the fixed part plus only the newest turn's minimum: the newest message pair (the last
  assistant message and everything after it: its tool results or the observation) and, in an interactive
  session, the user's current request (the last user-typed message) when it comes before that pair.
  Everything older is free: no summary, no head, no historian call.
* `floor+tail`: the fixed part plus mc's own protected tail: the messages holding the newest
  `protected_tags` tags mc never drops (text blocks and tool arcs counted as the tagger counts them; 5 for
  autonomous harnesses, 20 otherwise: `scheduler.default_protected_tags`), widened so no tool arc is split,
  plus the user's current request when it is older.
* `floor-task`: the `floor` with the task free as well (only the system prompt and leading system messages
  stay): what a manager that truncates or folds the task statement, as mc does in small windows, could
  reach at most, at the cost of the instruction.

Both are priced with **perfect caching** (`perfect_bill`): on a warm pass (within the TTL of the previous
one, the ledger's rule) every unit the previous request also carried is read from the cache and only new
units are written, whatever their position, so the fixed part is written once per TTL and read
otherwise, and each new message is written once (Anthropic: at the write multiplier; a request under the
minimum cacheable length is uncached at 1×, a read under it is not a hit, as in `cost.Ledger`). No prefix
cache can do better, because an ideal manager that drops the oldest kept message still has the rest read.

A third figure bounds the cache goal with a real prefix cache (`prefix_floor`, priced by `cost.Ledger`):
a manager that serves the fixed part plus everything since its last cut, and cuts (a bust) only when the
next request would pass the window, keeping then only the `floor`'s or the `floor+tail`'s newest part.
Its bust count is the fewest a window forces; its re-sent read share is the best a manager keeping
that tail can reach.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from magic_context.records import record  # noqa: E402
from magic_context.replay import cost  # noqa: E402
from magic_context.replay.passes import Replayable, prepare  # noqa: E402
from magic_context.replay.units import TokenCounter, Unit  # noqa: E402
from magic_context.transform import scheduler  # noqa: E402
from magic_context.wire import model as m  # noqa: E402

SESSIONS = REPO.parent / "shared" / "data" / "sessions"
DJANGO = "mini-swe-agent_deepseek-chat_django__django-13964.traj.json"
SQLFLUFF = "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"
# The 12 long-session goal rows of bench/results.md (bench/run.py's CASES and SMALL_CASES, short ones left out).
GOAL_CASES = (
    (DJANGO, 22_000), (DJANGO, 13_200), (DJANGO, 6_600),
    (SQLFLUFF, 10_000), (SQLFLUFF, 6_000), (SQLFLUFF, 3_000),
    ("pi_before-compaction.jsonl", 120_000), ("pi_before-compaction.jsonl", 72_000),
    ("pi_before-compaction.jsonl", 36_000),
    ("pi_large-session.jsonl", 48_000), ("pi_large-session.jsonl", 29_000), ("pi_large-session.jsonl", 14_400),
)
KINDS = ("floor", "floor+tail", "floor-task")


# -- what each pass must carry ---------------------------------------------------------------------

def fixed_count(history: Sequence[m.Message]) -> int:
    """How many leading messages form the fixed part: leading system messages and the first user message."""
    for i, msg in enumerate(history):
        if msg.role == m.USER:
            return i + 1
        if msg.role != m.SYSTEM:
            return i
    return len(history)


def _user_typed(msg: m.Message) -> bool:
    return msg.role == m.USER and not msg.synthetic and any(
        b.kind == m.TEXT and b.text.strip() and not b.synthetic and not (b.meta or {}).get("command")
        for b in msg.blocks)


def pair_start(history: Sequence[m.Message], lo: int) -> int:
    """Index where the newest message pair starts: the last assistant message at or after `lo`, else `lo`."""
    for i in range(len(history) - 1, lo - 1, -1):
        if history[i].role == m.ASSISTANT:
            return i
    return lo


def _tags(msg: m.Message, seen_tools: set[str]) -> int:
    """Tags mc's tagger gives `msg`: one per non-empty text block, media block and tool arc (first result)."""
    if msg.role == m.SYSTEM or msg.synthetic or msg.compaction is not None:
        return 0
    count = 0
    for block in msg.blocks:
        if (block.kind == m.TEXT and block.text.strip()) or block.kind == m.MEDIA:
            count += 1
        elif block.kind == m.TOOL_RESULT and block.tool_id not in seen_tools:
            seen_tools.add(block.tool_id or "")
            count += 1
    return count


def tail_start(history: Sequence[m.Message], lo: int, tags: int) -> int:
    """Index where the messages holding the newest `tags` tags start (at least `lo`), widened back to the
    call of every tool arc whose result lies in the tail."""
    seen: set[str] = set()
    counted = 0
    start = len(history)
    for i in range(len(history) - 1, lo - 1, -1):
        if counted >= tags:
            break
        counted += _tags(history[i], seen)
        start = i
    calls = {b.tool_id: i for i, msg in enumerate(history) for b in msg.blocks if b.kind == m.TOOL_CALL}
    widened = start
    for msg in history[start:]:
        for block in msg.blocks:
            if block.kind == m.TOOL_RESULT and block.tool_id in calls:
                widened = min(widened, calls[block.tool_id])
    return max(lo, widened)


def newest_start(history: Sequence[m.Message], kind: str, harness: str) -> int:
    """Where the newest part a pass must carry starts (`floor` or `floor+tail`), after the fixed part."""
    lo = fixed_count(history)
    if kind in {"floor", "floor-task"}:
        return pair_start(history, lo)
    if kind == "floor+tail":
        return tail_start(history, lo, scheduler.default_protected_tags(harness))
    raise ValueError(f"unknown floor kind {kind!r}")


def floor_request(history: Sequence[m.Message], kind: str, harness: str, counter: TokenCounter,
                  system: Sequence[Unit] = ()) -> list[Unit]:
    """The units one pass of the floor carries: system, the fixed part, the user's current request when it is
    older than the newest part, the newest part."""
    lo = fixed_count(history)
    start = newest_start(history, kind, harness)
    request = [*system, *(counter.message(msg) for msg in history[:_kept_fixed(history, kind)])]
    current = next((i for i in range(start - 1, lo - 1, -1) if _user_typed(history[i])), None)
    if current is not None:
        request.append(counter.message(history[current]))
    request += [counter.message(msg) for msg in history[start:]]
    return request


# -- pricing -----------------------------------------------------------------------------------------

@record
class Bill:
    """A stream of requests priced: tokens sent, read, written, uncached; cost; passes; mean request."""

    usd: float = 0.0
    tokens: int = 0
    read: int = 0
    write: int = 0
    uncached: int = 0
    passes: int = 0
    busts: int = 0
    resent: int = 0
    resent_read: int = 0
    new_written: int = 0  # writes of units the previous request did not carry (the rest re-write a cold pass)

    @property
    def mean_tokens(self) -> float:
        return self.tokens / self.passes if self.passes else 0.0

    @property
    def resent_read_share(self) -> float | None:
        return self.resent_read / self.resent if self.resent else None


def perfect_bill(requests: Sequence[tuple[Sequence[Unit], int | None]], price: cost.Pricing, ttl_ms: int) -> Bill:
    """Price `requests` ((units, sent at ms) in order) with perfect caching (see the module doc): on a warm
    pass the units the previous request carried are read, the rest written; `cost.Ledger`'s prices,
    warm rule, minimum cacheable length and hit step."""
    bill = Bill()
    write_mult = price.write_multiplier(ttl_ms)
    prev: set[str] | None = None
    prev_at: int | None = None
    for units, at_ms in requests:
        tokens = sum(u[1] for u in units)
        warm = prev is not None and (at_ms is None or prev_at is None or at_ms - prev_at <= ttl_ms)
        resent = sum(u[1] for u in units if u[0] in prev) if warm and prev is not None else 0
        read, write, uncached = price.split(tokens, resent)
        bill.usd += price.input_per_mtok * (uncached + write_mult * write + price.read_multiplier * read) / 1e6
        bill.tokens += tokens
        bill.read += read
        bill.write += write
        bill.uncached += uncached
        bill.passes += 1
        bill.new_written += min(write, sum(u[1] for u in units if prev is None or u[0] not in prev))
        if warm:
            bill.resent += resent
            bill.resent_read += read
        prev = {u[0] for u in units}
        if at_ms is not None:
            prev_at = at_ms
    return bill


def floor_requests(rep: Replayable, kind: str, counter: TokenCounter) -> list[tuple[list[Unit], int | None]]:
    """Every pass of the `kind` floor of a prepared recording: (units, sent at ms)."""
    system = counter.system([rep.system]) if rep.system else []
    return [(floor_request(rep.canon[:spec.end], kind, rep.harness, counter, system), spec.at_ms)
            for spec in rep.passes]


def floor_bill(rep: Replayable, kind: str, counter: TokenCounter, price: cost.Pricing, ttl_ms: int) -> Bill:
    """The `kind` floor of a prepared recording, priced with perfect caching."""
    return perfect_bill(floor_requests(rep, kind, counter), price, ttl_ms)


def _kept_fixed(history: Sequence[m.Message], kind: str) -> int:
    """How many leading messages a floor of `kind` serves: the fixed part, or with the task free only the
    leading system messages."""
    lo = fixed_count(history)
    return lo if kind != "floor-task" else next((i for i, msg in enumerate(history) if msg.role != m.SYSTEM), lo)


def _cut_request(history: Sequence[m.Message], lo: int, cut: int, current: int | None, *,
                 counter: TokenCounter, system: Sequence[Unit]) -> list[Unit]:
    """System, the leading `history[:lo]`, the kept user request `current` (if any), `history[cut:]`."""
    kept = [counter.message(history[current])] if current is not None else []
    return [*system, *(counter.message(msg) for msg in history[:lo]), *kept,
            *(counter.message(msg) for msg in history[cut:])]


def prefix_floor(rep: Replayable, kind: str, counter: TokenCounter, price: cost.Pricing, ttl_ms: int, *,
                 window: int) -> Bill:
    """A prefix-cached manager that cuts only when a request would pass `window`, then keeps the `kind`
    floor's newest part (see the module doc), priced by `cost.Ledger`: the fewest busts a window forces."""
    system = counter.system([rep.system]) if rep.system else []
    ledger = cost.Ledger(price, ttl_ms)
    cut = 0  # history[cut:] is served after the fixed part
    current: int | None = None  # the user request kept in front of the cut, when it is older
    for spec in rep.passes:
        history = rep.canon[:spec.end]
        lo, kept = fixed_count(history), _kept_fixed(history, kind)
        cut = max(cut, lo)
        units = _cut_request(history, kept, cut, current, counter=counter, system=system)
        if sum(u[1] for u in units) > window:
            cut = max(cut, newest_start(history, kind, rep.harness))
            current = next((i for i in range(cut - 1, lo - 1, -1) if _user_typed(history[i])), None)
            units = _cut_request(history, kept, cut, current, counter=counter, system=system)
        ledger.add(units, spec.at_ms)
    return Bill(ledger.usd, ledger.input_tokens, ledger.read_tokens, ledger.write_tokens, ledger.uncached_tokens,
                ledger.passes, ledger.busts, ledger.resent_tokens, ledger.resent_read)


# -- where mc's cost goes ----------------------------------------------------------------------------

HEAD_MARK = "<session-history"
TAG_PREFIX = re.compile(r"^§\d+§ ")


def _is_head(msg: m.Message) -> bool:
    return any(b.kind == m.TEXT and b.text.lstrip().startswith(HEAD_MARK) for b in msg.blocks)


def _text(msg: m.Message) -> str:
    """A message's text blocks without mc's tag prefixes."""
    return "\n".join(TAG_PREFIX.sub("", b.text) for b in msg.blocks if b.kind == m.TEXT)


def mc_detail(rep: Replayable, window: int, counter: TokenCounter, price: cost.Pricing, ttl_ms: int) -> dict[str, Any]:
    """Replay mc (every default, in-process) and split what it serves and writes: mean tokens per pass of
    its system prompt (its own instructions included), the task kept verbatim, its head (`<session-history>`
    messages) and the other kept messages; cache writes of new units (not in the previous request), and
    re-writes (units sent before, written again after a bust or a cold pass)."""
    from magic_context.replay.engine import McRunner

    lo = fixed_count(rep.canon)
    task = _text(rep.canon[lo - 1]) if lo and rep.canon[lo - 1].role == m.USER else None
    ledger = cost.Ledger(price, ttl_ms)
    sums = {"system": 0, "task": 0, "head": 0, "kept": 0}
    new_written = 0
    prev: set[str] = set()
    with McRunner(harness=rep.harness, window=window, system=rep.system) as runner:
        for spec in rep.passes:
            served = runner.serve(runner.payload(rep.native[:spec.end], spec.at_ms, spec.model))
            system = counter.system(served.system)
            units = [*system, *(counter.message(msg, memo=False) for msg in served.messages)]
            sums["system"] += sum(u[1] for u in system)
            for msg, unit in zip(served.messages, units[len(system):], strict=True):
                part = "system" if msg.role == m.SYSTEM else "head" if _is_head(msg) else (
                    "task" if msg.role == m.USER and task and _text(msg) == task else "kept")
                sums[part] += unit[1]
            charge = ledger.add(units, spec.at_ms)
            if charge.write:
                new_written += min(charge.write, sum(u[1] for u in units if u[0] not in prev))
            prev = {u[0] for u in units}
    passes = ledger.passes or 1
    return {"usd": ledger.usd, "busts": ledger.busts, "cold": ledger.cold, "read": ledger.read_tokens,
            "write": ledger.write_tokens, "new_written": new_written, "rewritten": ledger.write_tokens - new_written,
            "resent_read_share": ledger.resent_read_share,
            "mean": {k: v / passes for k, v in sums.items()}}


# -- the bench ----------------------------------------------------------------------------------------

def _label(name: str, window: int) -> str:
    short = {DJANGO: "django-13964", SQLFLUFF: "sqlfluff-1763", "pi_large-session.jsonl": "pi large-session",
             "pi_before-compaction.jsonl": "pi before-compaction"}.get(name, Path(name).stem)
    return f"{short} @ {window:,}"


def _strategy_figures(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["strategies"] if s["name"] == name)


def measure(name: str, window: int, figures: dict[str, Any] | None, *, detail: bool = False) -> dict[str, Any]:
    """Floors for one case, beside mc's and native's figures (`figures`: a bench/run.py cached case; else
    replayed here, mc with every default); with `detail`, mc replayed again for `mc_detail`."""
    from magic_context.replay import replay
    from magic_context.wire.importers import load_session

    counter = TokenCounter()
    price = cost.pricing("anthropic-sonnet")
    ttl_ms = cost.FIVE_MINUTES_MS
    if figures is None:
        figures = replay(SESSIONS / name, context_limit=window, strategies=["mc", "native"], counter=counter,
                         user_config=False).to_dict()
        figures["source"] = "replayed by bench/cost_floor.py"
    rep = prepare(load_session(SESSIONS / name, "auto"))
    history = rep.canon
    fixed = sum(u[1] for u in counter.system([rep.system])) if rep.system else 0
    fixed += sum(counter.message(msg)[1] for msg in history[:fixed_count(history)])
    out: dict[str, Any] = {"case": f"{name}@{window}", "label": _label(name, window), "window": window,
                           "harness": rep.harness, "passes": len(rep.passes), "fixed_tokens": fixed,
                           "protected_tags": scheduler.default_protected_tags(rep.harness),
                           "figures_source": figures.get("source", "bench/run.py cache")}
    for side in ("mc", "native"):
        s = _strategy_figures(figures, side)
        out[side] = {k: s[k] for k in ("cost_usd", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                                        "uncached_tokens", "extra_output_tokens", "busts", "resent_read_share",
                                        "passes")}
        out[side]["mean_tokens"] = s["input_tokens"] / s["passes"] if side == "mc" else None
        if side == "mc":
            out[side]["historian_model_usd"] = s["historian_billing"]["model_priced_usd"]
    for kind in KINDS:
        requests = floor_requests(rep, kind, counter)
        sizes = [sum(u[1] for u in units) for units, _ in requests]
        bill = perfect_bill(requests, price, ttl_ms)
        prefix = prefix_floor(rep, kind, counter, price, ttl_ms, window=window)
        out[kind] = {"usd": bill.usd, "mean_tokens": bill.mean_tokens, "read": bill.read, "write": bill.write,
                     "uncached": bill.uncached, "new_written": bill.new_written, "peak_tokens": max(sizes, default=0),
                     "over_window": sum(size > window for size in sizes),
                     "prefix": {"usd": prefix.usd, "busts": prefix.busts,
                                "resent_read_share": prefix.resent_read_share}}
    if detail:
        out["mc_detail"] = mc_detail(rep, window, counter, price, ttl_ms)
    return out


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| session @ window | fixed part (of window) | floor / native | floor+tail / native "
             "| floor, task free / native | mc / native "
             "| mc / floor | mc / floor+tail | passes over window (floor / +tail) "
             "| fewest busts (floor / +tail / task free) "
             "| best re-sent read (floor / +tail) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        native, mc = r["native"]["cost_usd"], r["mc"]["cost_usd"]
        f, t, free = r["floor"], r["floor+tail"], r.get("floor-task")
        flag = " ❌" if f["usd"] / native > 0.6 else ""
        lines.append(
            f"| {r['label']} | {r['fixed_tokens']:,} ({r['fixed_tokens'] / r['window']:.0%}) | "
            f"{f['usd'] / native:.2f}×{flag} | {t['usd'] / native:.2f}× | "
            f"{'—' if free is None else format(free['usd'] / native, '.2f') + '×'} | {mc / native:.2f}× | "
            f"{mc / f['usd']:.2f}× | {mc / t['usd']:.2f}× | {f['over_window']} / {t['over_window']} of {r['passes']} | "
            f"{f['prefix']['busts']} / {t['prefix']['busts']} / {free['prefix']['busts'] if free else '—'} | "
            f"{_share(f['prefix']['resent_read_share'])} / {_share(t['prefix']['resent_read_share'])} |")
    return lines


def breakdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """mc's bill beside the floor+tail's, in $ of cache reads, writes and uncached input."""
    p = cost.pricing("anthropic-sonnet")
    lines = ["| session @ window | mean request: mc / floor / floor+tail | mc reads − floor+tail's | "
             "mc writes − floor+tail's | mc busts | model historian (if priced) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        mc, t = r["mc"], r["floor+tail"]
        native = r["native"]["cost_usd"]
        d_read = (mc["cache_read_tokens"] - t["read"]) * p.input_per_mtok * p.read_multiplier / 1e6
        d_write = (mc["cache_write_tokens"] - t["write"]) * p.input_per_mtok * p.write_multiplier_5m / 1e6
        lines.append(
            f"| {r['label']} | {mc['mean_tokens']:,.0f} / {r['floor']['mean_tokens']:,.0f} / {t['mean_tokens']:,.0f} | "
            f"{d_read / native:+.2f}× native | {d_write / native:+.2f}× native | {mc['busts']} | "
            f"+{mc['historian_model_usd'] / native:.2f}× native |")
    return lines


def detail_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """mc replayed on this tree (`mc_detail`) against the floor+tail: where the difference goes."""
    p = cost.pricing("anthropic-sonnet")
    write_usd = p.input_per_mtok * p.write_multiplier_5m / 1e6
    lines = ["| session @ window | mc / native (this tree) | mc mean request: system / task / head / other kept "
             "| floor+tail mean request | mc reads − floor+tail's | mc new-unit writes − floor+tail's "
             "| mc re-writes (busts, cold passes) − floor+tail's | busts: mc / fewest (+tail) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        d = r.get("mc_detail")
        if not d:
            continue
        native, t = r["native"]["cost_usd"], r["floor+tail"]
        mean = d["mean"]
        d_read = (d["read"] - t["read"]) * p.input_per_mtok * p.read_multiplier / 1e6
        d_new = (d["new_written"] - t["new_written"]) * write_usd
        d_re = (d["rewritten"] - (t["write"] - t["new_written"])) * write_usd
        lines.append(
            f"| {r['label']} | {d['usd'] / native:.2f}× | {mean['system']:,.0f} / {mean['task']:,.0f} / "
            f"{mean['head']:,.0f} / {mean['kept']:,.0f} | {t['mean_tokens']:,.0f} | {d_read / native:+.2f}× | "
            f"{d_new / native:+.2f}× | {d_re / native:+.2f}× | "
            f"{d['busts']} / {t['prefix']['busts']} |")
    return lines


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="FILE@WINDOW,… (default: the 12 goal rows of bench/results.md)")
    parser.add_argument("--figures", type=Path,
                        help="a bench/run.py --cache JSON to take mc's and native's figures from (else replayed)")
    parser.add_argument("--out", type=Path, help="keep each finished case here as JSON; a rerun resumes from it")
    parser.add_argument("--detail", action="store_true",
                        help="also replay mc on this tree and split its request and writes (mc_detail)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of the tables")
    args = parser.parse_args(argv)
    cases = ([(c.rsplit("@", 1)[0], int(c.rsplit("@", 1)[1])) for c in args.cases.split(",")] if args.cases
             else list(GOAL_CASES))
    cached = json.loads(args.figures.read_text()) if args.figures else {}
    done: dict[str, Any] = json.loads(args.out.read_text()) if args.out and args.out.is_file() else {}
    rows = []
    for name, window in cases:
        key = f"{name}@{window}"
        if key not in done or (args.detail and "mc_detail" not in done[key]):
            started = time.perf_counter()
            print(f"{_label(name, window)} …", file=sys.stderr, flush=True)
            done[key] = measure(name, window, cached.get(_label(name, window)), detail=args.detail)
            done[key]["seconds"] = round(time.perf_counter() - started)
            if args.out:
                args.out.write_text(json.dumps(done, indent=1), encoding="utf-8")
        rows.append(done[key])
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("\n".join(table(rows)))
    print()
    print("\n".join(breakdown(rows)))
    if args.detail:
        print()
        print("\n".join(detail_table(rows)))
    print(f"\nmedian case time {statistics.median(r['seconds'] for r in rows)} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
