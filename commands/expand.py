"""`mc expand`: read folded history back — a range of messages, one message whole, or a tag's message."""

from __future__ import annotations

import typer

from commands import _output
from magic_context.results import Result


def expand(
    session: str = typer.Option(..., "--session", help="The session to read."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    tag: int = typer.Option(None, "--tag", help="Show the message holding tag §N§ whole."),
    message: int = typer.Option(None, "--message", help="Show message N (its ordinal) whole, tool outputs included."),
    range_: str = typer.Option(None, "--range", help="Show messages A-B (ordinals, as mc search prints them)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Read folded history: a range within a 15 000-token budget, or one message in full.

    \b
    A cut range ends with the command that continues it.
    Examples:
      mc expand --session ses_abc123 --range 120-140
      mc expand --session ses_abc123 --message 131 --json
    """
    from magic_context.errors import BadInput
    from magic_context.store import db
    from magic_context.store.sessions import find_session
    from magic_context.tools import expand as engine

    chosen = [name for name, value in (("--tag", tag), ("--message", message), ("--range", range_))
              if value is not None]
    if len(chosen) != 1:
        raise BadInput("pass exactly one of --tag, --message or --range",
                       fix="e.g. mc expand --session ID --range 10-20")
    if (tag is not None and tag < 0) or (message is not None and message < 0):
        raise BadInput(f"{chosen[0]} must be a non-negative integer")
    span = engine.parse_range(range_) if range_ is not None else None
    from magic_context.search.scope import require_database

    require_database()
    conn = db.open_db()
    try:
        pk = find_session(conn, session, harness)
        if span is not None:
            result = engine.expand_range(conn, pk, span[0], span[1], cli=True, session_id=session, harness=harness)
        else:
            ordinal = engine.tag_ordinal(conn, pk, tag) if tag is not None else message
            result = engine.expand_message(conn, pk, ordinal)
    finally:
        conn.close()
    _output.emit(result.to_result(), as_json=as_json, human=_text)


def _text(result: Result) -> None:
    import sys

    sys.stdout.write(result.data["text"] + "\n")


def register(app: typer.Typer) -> None:
    app.command("expand")(expand)


__all__ = ["expand", "register"]
