"""`mc reduce`: queue drops of tagged parts (ctx_reduce for shell-based integrations)."""

from __future__ import annotations

import time

import typer

from commands import _output


def reduce(
    drop: str = typer.Argument(..., help='Tag numbers to drop: "3-5,9".'),
    session: str = typer.Option(..., "--session", help="The session the tags belong to."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: str = typer.Option(None, "--project", help="Project directory (for its config)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Queue drops; they apply on the next pass that busts the prompt cache anyway.

    \b
    Example:
      mc reduce --session ses_abc123 "3-5,9"
    """
    from pathlib import Path

    from magic_context.config.hot import load_hot
    from magic_context.store import db
    from magic_context.store.sessions import find_session
    from magic_context.tools.reduce import queue_drops

    hot = load_hot(Path(project) if project else Path.cwd())
    conn = db.open_db()
    try:
        pk = find_session(conn, session, harness)
        with db.atomic(conn):
            result = queue_drops(conn, pk, drop, protected_tags=int(hot["protected_tags"]),
                                 now_ms=int(time.time() * 1000))
    finally:
        conn.close()
    _output.emit(result.to_result(), as_json=as_json, human=lambda r: _output.console().print(r.data["message"]))


def register(app: typer.Typer) -> None:
    app.command("reduce")(reduce)


__all__ = ["reduce", "register"]
