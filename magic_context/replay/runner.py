"""Replay a recorded session through mc and the baselines on the same passes; collect the figures.

`replay(path, ...)` loads the recording, rebuilds the uncompacted history (`passes.prepare`), then
serves every pass through each strategy in turn and prices the requests with one `cost.Ledger`
per strategy. It never prints: progress goes to the `progress(strategy, done, total)` callback.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from magic_context import paths
from magic_context.config.files import read_toml
from magic_context.errors import BadInput
from magic_context.records import Factory, record
from magic_context.replay import anchors as anchor_mod
from magic_context.replay import baselines, cost
from magic_context.replay.engine import McRunner
from magic_context.replay.passes import Replayable, prepare
from magic_context.replay.units import TokenCounter
from magic_context.results import Result
from magic_context.store.passes import HistorianActivity
from magic_context.transform import scheduler
from magic_context.wire.importers import load_session

STRATEGIES: Final = ("mc", *baselines.BASELINES)
Progress = Callable[[str, int, int], None]


@record
class StrategyRun:
    """One strategy's passes: per-pass served tokens and cumulative cost, plus its ledger."""

    name: str
    ledger: cost.Ledger
    tokens: list[int] = Factory(factory=list)
    charges: list[cost.Charge] = Factory(factory=list)
    cumulative_usd: list[float] = Factory(factory=list)
    over_window: int = 0
    compactions: int = 0
    edited_passes: int = 0
    latency_ms: list[float] = Factory(factory=list)
    floor_ms: list[float] = Factory(factory=list)
    pass_kinds: Counter[str] = Factory(factory=Counter)
    historian: Counter[str] = Factory(factory=Counter)
    emergencies: int = 0
    degraded: int = 0
    threshold_percent: float | None = None  # mc's execute threshold as its passes reported it
    historian_calls: list[dict[str, Any]] = Factory(factory=list)  # mc's historian requests, billed
    historian_usd: float = 0.0  # what they cost (0 for the extractive historian: it calls no model)
    historian_model_usd: float = 0.0  # what the same requests cost at the replayed model's price
    historian_prices: dict[str, dict[str, Any]] = Factory(factory=dict)  # model id → the table its calls cost
    anchors: anchor_mod.AnchorReport | None = None
    retention: anchor_mod.Retention = Factory(factory=anchor_mod.Retention)
    profile: baselines.NativeProfile | None = None  # the compaction a baseline ran with
    store: dict[str, Any] = Factory(factory=dict)

    def figures(self, window: int, native_usd: float | None) -> dict[str, Any]:
        led = self.ledger
        peak = max(self.tokens, default=0)
        out: dict[str, Any] = {
            "name": self.name, "passes": led.passes, "peak_tokens": peak,
            "peak_share": round(peak / window, 4) if window else None, "over_window": self.over_window,
            "cache_read_share": round(led.read_share, 4),
            "resent_read_share": None if led.resent_read_share is None else round(led.resent_read_share, 4),
            "busts": led.busts, "cold_passes": led.cold,
            "input_tokens": led.input_tokens, "cache_read_tokens": led.read_tokens,
            "cache_write_tokens": led.write_tokens, "uncached_tokens": led.uncached_tokens,
            "extra_calls": led.extra_calls, "extra_output_tokens": led.output_tokens,
            "cost_usd": round(led.usd, 6),
            "cost_vs_native": round(led.usd / native_usd, 4) if native_usd else None,
        }
        if self.profile is not None and self.name != "raw":
            out["compactions"] = self.compactions
            p = self.profile
            out["compaction"] = {"profile": p.name, "trigger": p.trigger, "tail": p.tail,
                                 "summary_tokens": p.summary_tokens, "summary_cached": p.summary_cached,
                                 "tail_users_only": p.users_only, "source": p.source,
                                 "unmeasured": list(p.unmeasured),
                                 "summary_text": "extractive (the replay calls no model; its size is the "
                                                 "profile's)"}
        out["retention"] = self.retention.summary()
        if self.name == "clear-tool-uses":
            out["edited_passes"] = self.edited_passes
        if self.name == "mc":
            p50, p95 = percentile(self.latency_ms, 50), percentile(self.latency_ms, 95)
            f50, f95 = percentile(self.floor_ms, 50), percentile(self.floor_ms, 95)
            report = self.anchors
            out.update({
                "latency_ms_p50": _r(p50), "latency_ms_p95": _r(p95), "floor_ms_p50": _r(f50), "floor_ms_p95": _r(f95),
                "latency_vs_floor": round(p50 / f50, 2) if p50 is not None and f50 else None,
                "anchor_retention": round(report.share, 4) if report and report.share is not None else None,
                "anchors": {k: {"total": t, "retained": r} for k, (t, r) in report.counts.items()} if report else {},
                "anchors_missing": list(report.missing) if report else [],
                "pass_kinds": dict(sorted(self.pass_kinds.items())),
                "historian": dict(sorted(self.historian.items())),
                "compartments": self.store.get("compartments"),
                "historian_failure": self.store.get("historian_failure"), "emergencies": self.emergencies,
                "degraded_passes": self.degraded, "threshold_percent": self.threshold_percent,
                "historian_billing": self._historian_billing(native_usd),
            })
        return out


    def _historian_billing(self, native_usd: float | None) -> dict[str, Any]:
        calls = self.historian_calls
        providers = sorted({c["provider"] for c in calls})
        model_total = self.ledger.usd - self.historian_usd + self.historian_model_usd
        priced = "; ".join(f"{m} at {p['label']}" + (" — assumed: the price table does not know this model, so "
                                                     "it costs the --pricing table's price" if p["assumed"] else "")
                           for m, p in sorted(self.historian_prices.items()))
        note = ("extractive historian: no model call, costs 0" if providers == ["extractive"] else
                "no historian run" if not calls else "model calls billed at the model's price "
                f"(input uncached, output at the output price): {priced}")
        return {
            "calls": len(calls), "providers": providers,
            "input_tokens": sum(c["input_tokens"] for c in calls),
            "output_tokens": sum(c["output_tokens"] for c in calls),
            "usd": round(self.historian_usd, 6),
            "prices": [{"model": m, **p} for m, p in sorted(self.historian_prices.items())],
            "note": note,
            "model_priced_usd": round(self.historian_model_usd, 6),
            "cost_with_model_historian_usd": round(model_total, 6),
            "cost_with_model_historian_vs_native": round(model_total / native_usd, 4) if native_usd else None,
        }


@record
class ReplayResult:
    """Everything `mc replay` reports; `to_dict()` is the `--json` data."""

    path: Path
    format: str
    harness: str
    context_limit: int
    limit_source: str
    ttl_ms: int
    pricing: cost.Pricing
    subprocess: bool
    runs: list[StrategyRun]
    meta: dict[str, Any]

    def run(self, name: str) -> StrategyRun | None:
        return next((r for r in self.runs if r.name == name), None)

    def native(self) -> StrategyRun | None:
        """The native baseline costs are compared with: `native`, else the first `native:X` run."""
        return self.run("native") or next((r for r in self.runs if r.name.startswith("native:")), None)

    def to_result(self) -> Result:
        """`mc replay`'s result: `to_dict()` as data."""
        return Result("replay", self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        native = self.native()
        native_usd = native.ledger.usd if native else None
        p = self.pricing
        return {
            "file": str(self.path), "format": self.format, "harness": self.harness,
            "context_limit": self.context_limit, "context_limit_source": self.limit_source,
            "ttl_seconds": self.ttl_ms // 1000, "mode": "subprocess" if self.subprocess else "in-process",
            "pricing": {"name": p.name, "label": p.label, "input_per_mtok": p.input_per_mtok,
                        "output_per_mtok": p.output_per_mtok, "read_multiplier": p.read_multiplier,
                        "write_multiplier": p.write_multiplier(self.ttl_ms), "min_cacheable": p.min_cacheable},
            **self.meta,
            "strategies": [r.figures(self.context_limit, native_usd) for r in self.runs],
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def parse_strategies(text: str | Sequence[str]) -> list[str]:
    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or not names:
        raise BadInput(f"unknown strategies: {', '.join(unknown) or '(none given)'}",
                       fix=f"choose from {','.join(STRATEGIES)}")
    return list(dict.fromkeys(names))


def default_limit(rep: Replayable) -> tuple[int, str]:
    """The recorded model's window (built-in table), else the engine's default."""
    model = next((p.model for p in reversed(rep.passes) if p.model), None)
    known = scheduler.builtin_limit(model)
    return (known, "model") if known else (scheduler.DEFAULT_LIMIT, "default")


def resolve_config(config: str | Path | None, user_config: bool) -> tuple[Path | None, str]:
    """The config file mc runs with in the replay and where it came from ("flag", "user" or "defaults").

    `config` (`--config FILE`) must exist and parse; otherwise the user's `config.toml` when
    `user_config` and it exists; otherwise none (every default)."""
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise BadInput(f"--config {path}: no such file", fix="give the path of a config.toml")
        data, problems = read_toml(path)
        if problems:
            raise BadInput(f"--config {problems[0]}", fix="fix the file, or replay with --no-user-config")
        from magic_context.config.load import validate_tier

        # a key mc would ignore (misspelt, misplaced, out of range) would replay the defaults under the file's name
        _clean, invalid = validate_tier(data, str(path))
        if invalid:
            first = invalid[0]
            raise BadInput(f"--config {first.file}: {first.key}: {first.reason.split(';')[0]}",
                           fix="fix the key; mc would ignore it and replay the default")
        return path, "flag"
    if user_config:
        user = paths.user_config_path()
        if user.is_file():
            return user, "user"
    return None, "defaults"


def _user_config_problems(file: Path | None) -> list[str]:
    """What mc ignores in the user's config.toml (each key then runs its default), as the CLI tells them.

    Loaded here, under the file's own name, because the replay runs mc on a temporary copy of it (whose loads
    record nothing, `McRunner`). `--config FILE` needs no such check: `resolve_config` refuses any ignored key."""
    from magic_context.config.load import load_config

    return [str(w) for w in load_config(user_file=file).warnings]


def replay(path: str | Path, *, format: str = "auto", context_limit: int | None = None, ttl: str = "5m",
           pricing: str = "anthropic-sonnet", strategies: Sequence[str] = STRATEGIES, subprocess: bool = False,
           progress: Progress | None = None, counter: TokenCounter | None = None, config: str | Path | None = None,
           user_config: bool = True) -> ReplayResult:
    """Replay the session at `path` through `strategies` (see the module doc). mc runs with `config` when
    given, else with the user's config unless `user_config` is False (see `resolve_config`)."""
    names = parse_strategies(strategies)
    config_file, config_source = resolve_config(config, user_config)
    config_problems = _user_config_problems(config_file) if config_source == "user" else []
    price = cost.pricing(pricing)
    ttl_ms = cost.parse_ttl(ttl)
    if context_limit is not None and context_limit < scheduler.MIN_PLAUSIBLE_LIMIT:
        raise BadInput(f"--context-limit {context_limit} is implausibly small",
                       fix=f"give at least {scheduler.MIN_PLAUSIBLE_LIMIT} tokens")
    session = load_session(path, format)
    rep = prepare(session)
    if not rep.passes:
        raise BadInput(f"{path}: no LLM call to replay (none recorded, or only the harness's own compaction)")
    window, source = (context_limit, "flag") if context_limit else default_limit(rep)
    counter = counter or TokenCounter()
    report = progress or (lambda _name, _done, _total: None)
    runs = []
    common: dict[str, Any] = {"counter": counter, "price": price, "ttl_ms": ttl_ms, "window": window,
                              "progress": report}
    for name in names:
        if name == "mc":
            runs.append(_run_mc(rep, use_subprocess=subprocess, config_file=config_file, **common))
        else:
            runs.append(_run_baseline(name, rep, **common))
    meta = {"passes": len(rep.passes), **rep.meta,
            "config": {"source": config_source, "file": str(config_file) if config_file else None,
                       "warnings": config_problems}}
    return ReplayResult(Path(path), session.format, rep.harness, window, source, ttl_ms, price, subprocess, runs, meta)


def _record(run: StrategyRun, charge: cost.Charge, window: int) -> None:
    tokens = charge.tokens
    run.charges.append(charge)
    run.tokens.append(tokens)
    run.over_window += tokens > window
    run.cumulative_usd.append(run.ledger.usd)


def _run_baseline(name: str, rep: Replayable, *, counter: TokenCounter, price: cost.Pricing, ttl_ms: int,
                  window: int, progress: Progress) -> StrategyRun:
    system = counter.system([rep.system]) if rep.system else []
    strategy = baselines.Baseline(name, counter, window, system, harness=rep.harness)
    run = StrategyRun(name, cost.Ledger(price, ttl_ms), profile=strategy.profile)
    total = len(rep.passes)
    for done, spec in enumerate(rep.passes, start=1):
        served = strategy.serve(rep.canon[:spec.end])
        for call in served.extra:
            run.ledger.add(call.units, spec.at_ms, output_tokens=call.output_tokens, extra=True, cached=call.cached)
        charge = run.ledger.add(served.units, spec.at_ms)
        seen, texts = strategy.view(rep.canon[:spec.end])
        run.retention.measure(rep.canon[:spec.end], seen, [rep.system, *texts] if rep.system else texts)
        run.compactions += served.compacted
        run.edited_passes += served.edited
        _record(run, charge, window)
        progress(name, done, total)
    return run


def _run_mc(rep: Replayable, *, counter: TokenCounter, price: cost.Pricing, ttl_ms: int, window: int,
            use_subprocess: bool, progress: Progress, config_file: Path | None = None) -> StrategyRun:
    run = StrategyRun("mc", cost.Ledger(price, ttl_ms))
    total = len(rep.passes)
    last = None
    last_run: Any = None
    with McRunner(harness=rep.harness, window=window, system=rep.system, subprocess=use_subprocess,
                  config_file=config_file) as runner:
        for done, spec in enumerate(rep.passes, start=1):
            payload = runner.payload(rep.native[:spec.end], spec.at_ms, spec.model)
            served = runner.serve(payload)
            units = [*counter.system(served.system), *(counter.message(msg, memo=False) for msg in served.messages)]
            _record(run, run.ledger.add(units, spec.at_ms), window)
            run.retention.measure(rep.canon[:spec.end], served.messages, served.system)
            run.latency_ms.append(served.ms)
            run.floor_ms.append(served.floor_ms)
            run.pass_kinds[str(served.report.get("pass", "?"))] += 1
            run.threshold_percent = served.report.get("threshold_percent", run.threshold_percent)
            if served.report.get("historian") == HistorianActivity.FIRED:
                last_run = _bill_historian(run, runner.historian_state(), last_run, spec.at_ms, price)
            run.historian[str(served.report.get("historian", "?"))] += 1
            run.emergencies += served.emergency
            run.degraded += bool(served.report.get("lkg")) or served.report.get("reason") == "input served unchanged"
            last = (spec, served)
            progress("mc", done, total)
        run.store = runner.store_facts()
    if last is not None:
        spec, served = last
        run.anchors = anchor_mod.retention(rep.canon[:spec.end], served.messages, served.system)
    return run


def _bill_historian(run: StrategyRun, state: dict[str, Any] | None, seen: Any, at_ms: int | None,
                    price: cost.Pricing) -> Any:
    """Bill the historian run `state` records (once: `seen` is the last run billed). Model calls cost the
    model's price, uncached — a model the price table does not know costs `price` (the `--pricing` table),
    marked "assumed" in `historian_prices`; the extractive historian costs 0. Every call is also priced as if the
    replayed model (`price`) had made it: the "model-priced historian" figure (the extractive answer is in the
    lean format a model is asked for — titles, p2, p3 — since code writes p1 and p4 for both, `history.tiers`)."""
    if not state or state.get("last_run_at") == seen:
        return seen
    for call in state.get("last_calls") or []:
        tokens_in, tokens_out = int(call.get("input_tokens") or 0), int(call.get("output_tokens") or 0)
        run.historian_calls.append({**call, "at_ms": at_ms})
        run.historian_model_usd += (price.input_per_mtok * tokens_in + price.output_per_mtok * tokens_out) / 1e6
        if call.get("provider") != "extractive":
            known = cost.known_pricing(call.get("model"))
            table = known or price  # a model the table does not know (an Ollama id…) is priced at --pricing
            run.historian_prices.setdefault(str(call.get("model")), {
                "pricing": table.name, "label": table.label, "assumed": known is None})
            charge = run.ledger.bill(tokens_in, tokens_out, table)
            run.historian_usd += charge.usd
    return state.get("last_run_at")


__all__ = ["STRATEGIES", "ReplayResult", "StrategyRun", "default_limit", "parse_strategies", "percentile", "replay",
           "resolve_config"]
