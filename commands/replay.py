"""`mc replay`: replay a recorded session through mc and baselines; cost, cache, context and latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from commands import _config_notes, _output

FORMATS = ("auto", "pi", "claude-code", "opencode", "openai", "anthropic")
# `anthropic` names the message format of Claude Code transcripts, the recordings that carry it.
_FORMAT_ALIASES = {"anthropic": "claude-code"}
PRICINGS = ("anthropic-sonnet", "anthropic-opus", "openai")
DEFAULT_STRATEGIES = "mc,native,masking,clear-tool-uses,raw"


def replay(
    file: Path = typer.Argument(..., help="A recorded session: Pi JSONL, Claude Code JSONL, mini-swe-agent "
                                          "trajectory or OpenCode export."),
    format: str = typer.Option("auto", "--format", help=f"Recording format: {' | '.join(FORMATS)}."),
    context_limit: int = typer.Option(None, "--context-limit", min=1024,
                                      help="Window to replay against (default: the recorded model's window)."),
    ttl: str = typer.Option("5m", "--ttl", help="Prompt-cache TTL: 5m or 1h (Anthropic 1h writes cost 2x)."),
    pricing: str = typer.Option("anthropic-sonnet", "--pricing", help=f"Prices: {' | '.join(PRICINGS)}."),
    strategies: str = typer.Option(DEFAULT_STRATEGIES, "--strategies", help="Comma-separated strategies to run."),
    use_subprocess: bool = typer.Option(False, "--subprocess",
                                        help="Run `mc transform` as a process per pass (honest latency, slower)."),
    config: Path = typer.Option(None, "--config", help="Run mc with this config.toml instead of yours."),
    user_config: bool = typer.Option(True, "--user-config/--no-user-config",
                                     help="Run mc with your config.toml (default) or with every default."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
    plot: Path = typer.Option(None, "--plot", help="Write served tokens and cumulative cost per pass to a PNG "
                                                   "(needs the `plot` extra)."),
) -> None:
    """Replay a recorded session pass by pass through mc and through baselines.

    Each LLM call is served by mc (real engine, fresh database, your config.toml unless --config or
    --no-user-config), by the recording's harness's own compaction (native; native:claude-code,
    native:opencode, native:pi or native:codex name one), observation masking, Anthropic
    clear_tool_uses, and raw; the report compares context, cache, cost and anchor retention over
    every pass.

    \b
    Examples:
      mc replay session.jsonl --context-limit 60000
      mc replay trajectory.traj.json --pricing openai --json
      mc replay session.jsonl --context-limit 60000 --plot replay.png
      mc replay session.jsonl --context-limit 60000 --config candidate.toml
    """
    from magic_context.errors import BadInput
    from magic_context.replay import runner

    if format not in FORMATS:
        raise BadInput(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if pricing not in PRICINGS:
        raise BadInput(f"--pricing must be one of {', '.join(PRICINGS)}, got {pricing!r}")
    names = runner.parse_strategies(strategies)
    if plot is not None:
        from magic_context.replay import plot as plot_mod

        plot_mod.require()  # fail before minutes of work, not after
    if not file.is_file():
        raise BadInput(f"{file}: no such file", fix="give the path of a recorded session")

    with _progress() as progress:
        result = runner.replay(file, format=_FORMAT_ALIASES.get(format, format), context_limit=context_limit,
                               ttl=ttl, pricing=pricing, strategies=names, subprocess=use_subprocess,
                               progress=progress, config=config, user_config=user_config)
    if result.meta["config"]["source"] != "user":  # your config.toml played no part: its problems are not told
        _config_notes.unused()
    if context_limit is None:
        which = "the recorded model's window" if result.limit_source == "model" else "the default window"
        _output.note(f"no --context-limit: replayed against {which} ({result.context_limit:,} tokens); "
                     "pass a smaller window to see how each strategy copes with overflow")
    outcome = result.to_result()
    if plot is not None:
        from magic_context.replay import plot as plot_mod

        written = plot_mod.write(result, plot)
        _output.note(f"plot written to {written}")
    _output.emit(outcome, as_json=as_json, human=lambda r: _render(r.data))


class _progress:
    """A Rich progress bar on stderr (only on a terminal), one task per strategy; yields the callback."""

    def __enter__(self) -> Any:
        console = _output.err_console()
        self._bar = None
        self._tasks: dict[str, Any] = {}
        if not console.is_terminal:
            return lambda _name, _done, _total: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description:>16}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=console, transient=True)
        self._bar.__enter__()
        return self._update

    def _update(self, name: str, done: int, total: int) -> None:
        assert self._bar is not None
        task = self._tasks.get(name)
        if task is None:
            task = self._tasks[name] = self._bar.add_task(name, total=total)
        self._bar.update(task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _render(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = _output.console()
    window = data["context_limit"]
    out.print(f"[bold]{Path(data['file']).name}[/bold]  {data['format']} · {data['passes']} passes · "
              f"window {window:,} tokens ({data['context_limit_source']}) · {data['pricing']['label']} · "
              f"TTL {data['ttl_seconds'] // 60}m · mc {data['mode']}")
    source, problems = data["config"]["source"], len(data["config"]["warnings"])
    ignored = f"; {problems} setting{'s' if problems > 1 else ''} ignored, run with the default" if problems else ""
    out.print("mc config: " + ("every default (--no-user-config or no config.toml)" if source == "defaults"
                               else f"{data['config']['file']} ({'--config' if source == 'flag' else 'yours'}"
                                    f"{ignored})"), markup=False)
    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("strategy", "peak", "of window", "over", "cache read", "busts", "cost", "vs native"):
        table.add_column(column, justify="left" if column == "strategy" else "right", no_wrap=True)
    for s in data["strategies"]:
        over = str(s["over_window"]) if not s["over_window"] else f"[red]{s['over_window']}[/red]"
        ratio = "—" if s["cost_vs_native"] is None else f"{s['cost_vs_native']:.2f}×"
        table.add_row(s["name"], f"{s['peak_tokens']:,}", f"{s['peak_share']:.0%}", over,
                      f"{s['cache_read_share']:.1%}", str(s["busts"]), _money(s["cost_usd"]), ratio)
    out.print(table)
    kept = [f"{s['name']} {s['retention']['mean']:.0%} / {s['retention']['min']:.0%}" for s in data["strategies"]
            if s["retention"]["mean"] is not None]
    out.print("anchor retention over the passes (mean / min): " + (" · ".join(kept) if kept else "n/a (nothing "
                                                                                                "folded)"))
    for s in data["strategies"]:
        if s["name"].startswith("native") and "compaction" in s:
            c = s["compaction"]
            label = f"{s['name']} = {c['profile']}" if s["name"] != c["profile"] else s["name"]
            out.print(f"{label}: compacts at {c['trigger']:.1%}, keeps a {c['tail']:.1%} "
                      f"{'user-message ' if c['tail_users_only'] else ''}tail and a {c['summary_tokens']:,}-token "
                      f"summary ({'read from' if c['summary_cached'] else 'not from'} the cache; its text is "
                      f"extractive in the replay) — {c['source']}")
    mc = next((s for s in data["strategies"] if s["name"] == "mc"), None)
    if mc is not None:
        vs = "—" if mc["latency_vs_floor"] is None else f"{mc['latency_vs_floor']:.2f}× the JSON floor"
        kinds = " · ".join(f"{k} {n}" for k, n in mc["pass_kinds"].items())
        out.print(f"mc latency p50 {mc['latency_ms_p50']} ms, p95 {mc['latency_ms_p95']} ms ({vs}, {data['mode']})")
        out.print(f"mc passes: {kinds}")
        retention = mc["anchor_retention"]
        kinds = ", ".join(f"{k} {v['retained']}/{v['total']}" for k, v in mc["anchors"].items() if v["total"])
        out.print("mc anchor retention on the last pass "
                  + ("n/a (nothing folded)" if retention is None else f"{retention:.0%} ({kinds})"))
        billing = mc["historian_billing"]
        if billing["calls"]:
            vs = billing["cost_with_model_historian_vs_native"]
            out.print(f"mc historian: {billing['calls']} calls, {billing['input_tokens']:,} in / "
                      f"{billing['output_tokens']:,} out tokens, {_money(billing['usd'])} ({billing['note']}); "
                      f"at {data['pricing']['label']} prices it would cost {_money(billing['model_priced_usd'])}"
                      + ("" if vs is None else f": mc {vs:.2f}× native"), markup=False)
        if mc["emergencies"] or mc["degraded_passes"]:
            out.print(f"[yellow]{mc['emergencies']} context emergencies, "
                      f"{mc['degraded_passes']} degraded passes[/yellow]")


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)


__all__ = ["register", "replay"]
