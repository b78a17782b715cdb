"""`mc search`: find what a session folded away — messages, compartments, memories, git commits, notes."""

from __future__ import annotations

from pathlib import Path

import typer

from commands import _config_notes, _output
from magic_context.results import Result


def search(
    query: str = typer.Argument(..., help="Words, a path, an error, a commit hash, or memory ids like '#12 #15'."),
    session: str = typer.Option(None, "--session", help="Search this session (default: the current project's)."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Search every session of this project directory."),
    source: list[str] = typer.Option(None, "--source",
                                     help="memory, message (compartment summaries included), git_commit or note "
                                          "(repeat or comma-separate)."),
    limit: int = typer.Option(10, "--limit", help="Most results to return (1-50)."),
    date_from: str = typer.Option(None, "--from", help="Only results at or after this date (YYYY-MM-DD, UTC)."),
    date_to: str = typer.Option(None, "--to", help="Only results up to this date, inclusive (YYYY-MM-DD, UTC)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope with structured results on stdout."),
) -> None:
    """Search folded history, memories, git commits and notes (the agent's ctx_search).

    \b
    Message hits come only from history already folded into compartments (the live tail is in context).
    Message and compartment hits carry a range for `mc expand --range`.
    Examples:
      mc search "ImportError: cannot import name"
      mc search "why did we switch the parser" --session ses_abc123 --limit 5
      mc search src/app.py --source message --json
    """
    import os
    import time

    from magic_context.config.load import load_config
    from magic_context.search import engine, scope
    from magic_context.search import format as fmt
    from magic_context.store import db

    engine.validate_query(query)
    sources = engine.parse_sources(source or None)
    if not 1 <= limit <= engine.MAX_LIMIT:
        from magic_context.errors import BadInput

        raise BadInput(f"--limit {limit} is out of range", fix=f"use 1 to {engine.MAX_LIMIT}")
    since, until = scope.date_window(date_from, date_to)
    scope.require_database()
    conn = db.open_db()
    try:
        where = scope.resolve(conn, session=session, harness=harness, project=str(project) if project else None,
                              cwd=os.getcwd())
        config = load_config(Path(where.project_dir) if where.project_dir else None).config
        now = int(time.time() * 1000)
        result = engine.search(conn, query, session_pks=where.session_pks, project_id=where.project_id,
                               sources=sources if source else None,  # None: every lane, no "lane is off" warning
                               limit=limit, since_ms=since, until_ms=until, config=config,
                               now_ms=now, project_dir=where.project_dir,
                               # what one session's head shows is in that agent's context; a project-wide search
                               # is a person's, who sees no head: every memory may come back
                               hide_visible=session is not None)
        from magic_context.store.search_index import session_ids as lookup_ids

        session_ids = lookup_ids(conn, where.session_pks)
    finally:
        conn.close()
    for warning in result.warnings:  # on stderr in both modes; --json also carries them in `data`
        _output.warn(warning)
    result.warnings.extend(_config_notes.as_text())  # told on stderr by the boundary; the document carries them too

    def human(_: Result) -> None:  # the agent's result text, byte for byte
        import sys

        sys.stdout.write(fmt.render(result, now, where.session_pks[0] if len(where.session_pks) == 1 else None)
                         + "\n")

    _output.emit(fmt.report(result, where, session_ids), as_json=as_json, human=human)


def register(app: typer.Typer) -> None:
    app.command("search")(search)


__all__ = ["register", "search"]
