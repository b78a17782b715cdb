"""`mc wrapup`: compact older raw history into compartments now, keeping the newest N messages raw."""

from __future__ import annotations

import typer

from commands import _output
from magic_context.results import Result

PROVIDERS = ("extractive", "anthropic", "openai", "command")


def wrapup(
    session: str = typer.Option(..., "--session", help="The session to compact."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    keep: int = typer.Option(20, "--keep", min=0, help="Newest messages to keep raw (tool arcs stay intact)."),
    provider: str = typer.Option(None, "--provider",
                                 help="Historian provider for this run: extractive, anthropic, openai or command."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
    background: bool = typer.Option(False, "--background", hidden=True,
                                    help="Run as the transform's detached historian (silent, one run)."),
) -> None:
    """Compact older raw history now, in token-capped chunks.

    \b
    "nothing to compact" is a normal outcome (exit 0).
    Examples:
      mc wrapup --session ses_abc123
      mc wrapup --session ses_abc123 --keep 40 --provider openai --json
    """
    from magic_context.errors import BadInput, CheckFailed
    from magic_context.history import wrapup as engine

    if provider is not None and provider not in PROVIDERS:
        raise BadInput(f"unknown provider {provider!r}", fix=f"use one of {', '.join(PROVIDERS)}")
    if background:
        engine.run_background(session, harness)
        return
    from magic_context.store import db
    from magic_context.store.sessions import find_session

    conn = db.open_db()
    try:
        pk = find_session(conn, session, harness)
        if as_json:
            result = engine.wrapup(conn, pk, keep=keep, provider=provider)
        else:
            result = _with_progress(conn, pk, keep, provider, engine)
    finally:
        conn.close()
    outcome = result.to_result()
    if outcome.failed and not as_json:
        raise CheckFailed(f"wrapup {result.disposition.replace('_', ' ')}: {result.reason}",
                          fix=outcome.problems[0].fix)
    _output.emit(outcome, as_json=as_json, human=_render)
    if outcome.failed:
        raise typer.Exit(1)


def _render(outcome: Result) -> None:
    data = outcome.data
    out = _output.console()
    if data["disposition"] == "nothing_to_compact":
        out.print(f"nothing to compact: {data['reason']}", soft_wrap=True)
    else:
        via = ", ".join(data["providers"])
        rounds = data["rounds"]
        out.print(f"{data['reason']} (via {via}, {rounds} round{'s' if rounds != 1 else ''})", soft_wrap=True)


def _with_progress(conn, pk: int, keep: int, provider: str | None, engine):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("compacting"), BarColumn(), MofNCompleteColumn(), TextColumn("messages"),
                  console=_output.err_console(), transient=True) as bar:
        task = bar.add_task("wrapup", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return engine.wrapup(conn, pk, keep=keep, provider=provider, progress=advance)


def register(app: typer.Typer) -> None:
    app.command("wrapup")(wrapup)


__all__ = ["register", "wrapup"]
