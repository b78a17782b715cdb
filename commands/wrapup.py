"""`mc wrapup`: compact older raw history into compartments now, keeping the newest N messages raw."""

from __future__ import annotations

import typer

from commands import _output

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
    data = result.as_dict()
    failed = result.disposition in (engine.FAILED, engine.ALREADY_IN_PROGRESS)
    if as_json:
        _output.print_json("wrapup", data, [result.reason] if failed else None)
        if failed:
            raise typer.Exit(1)
        return
    if failed:
        raise CheckFailed(f"wrapup {result.disposition.replace('_', ' ')}: {result.reason}",
                          fix="`mc status` shows the historian's last failure")
    out = _output.console()
    if result.disposition == engine.NOTHING_TO_COMPACT:
        out.print(f"nothing to compact: {result.reason}", soft_wrap=True)
    else:
        via = ", ".join(result.providers)
        out.print(f"{result.reason} (via {via}, {result.rounds} round{'s' if result.rounds != 1 else ''})",
                  soft_wrap=True)


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
