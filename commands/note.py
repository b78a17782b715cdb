"""`mc note`: add, list and dismiss session and project notes (ctx_note for shell-based integrations)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from commands import _output
from magic_context.results import Result

note_app = typer.Typer(no_args_is_help=True, help="Notes: things to come back to, for a session or a project.")

JSON_HELP = "Print a JSON envelope on stdout."


def _scope(conn: Any, session: str | None, harness: str | None, project: Path | None) -> tuple[int | None, str]:
    """(session pk or None, project identity): a session's own project unless --project says otherwise."""
    from magic_context import project as identity
    from magic_context.store import sessions

    if project is not None and not project.is_dir():  # a typo would file the note under a project no one has
        from magic_context.errors import BadInput

        raise BadInput(f"--project {project}: no such directory", fix="give the project's directory")
    if session:
        pk = sessions.find_session(conn, session, harness)
        filed = (sessions.session_info(conn, pk) or {}).get("project_id")
        if project is None and filed:
            return pk, filed
        return pk, identity.identity(project or Path.cwd())
    return None, identity.identity(project or Path.cwd())


def _line(note: dict[str, Any]) -> str:
    from magic_context.memory.notes import ACTIVE, PENDING

    status = "" if note["status"] in (ACTIVE, PENDING) and not note["surface_condition"] else f" ({note['status']})"
    line = f"- #{note['id']}{status} [{note['type']}]: {note['content']}"
    if note["surface_condition"]:
        line += (f"\n  Condition met: {note['ready_reason']}" if note["status"] == "ready" and note["ready_reason"]
                 else f"\n  Condition: {note['surface_condition']}")
    return line


@note_app.command("add")
def add(
    content: str = typer.Argument(..., help="What to come back to."),
    session: str = typer.Option(None, "--session", help="Attach to this session (default: a project note)."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Project directory (default: the session's, else the "
                                 "current directory)."),
    project_note: bool = typer.Option(False, "--project-note", help="With --session: a note for every session "
                                      "of the project, written by this one."),
    condition: str = typer.Option(None, "--condition", help="Surface it only when this becomes true (the dreamer "
                                  "checks; the note stays pending until then)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Save a note; the agent is told how many notes wait, never their text, until it reads them.

    \b
    Examples:
      mc note add --session ses_abc123 "rerun the flaky proxy test before release"
      mc note add "drop the shim" --condition "when httpx 1.0 is released"
    """
    from magic_context.memory import notes, reports
    from magic_context.store import db

    conn = db.open_db()
    try:
        pk, pid = _scope(conn, session, harness, project)
        scope = notes.SESSION if pk is not None and not project_note else notes.PROJECT
        note = notes.add(conn, content, project_id=pid, session_pk=pk, scope=scope, surface_condition=condition)
    finally:
        conn.close()
    dreamer_enabled = True
    if note["surface_condition"]:  # only a condition needs the dreamer (and the config read)
        from magic_context.config.load import load_config

        dreamer_enabled = load_config(project).config.dreamer.enabled
    _output.emit(reports.note_added(note, dreamer_enabled=dreamer_enabled), as_json=as_json, human=_added)


def _added(result: Result) -> None:
    _output.console().print(result.data["message"], markup=False)
    for text in result.data["warnings"]:
        _output.warn(text)


@note_app.command("list")
def list_(
    session: str = typer.Option(None, "--session", help="This session's notes and its project's notes."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Project directory (default: the current directory)."),
    status: list[str] = typer.Option(None, "--status", help="active, pending, ready, dismissed or all "
                                     "(repeatable; default: all but dismissed)."),
    limit: int = typer.Option(None, "--limit", min=1, help="At most N notes (newest first)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List notes, newest first.

    \b
    Examples:
      mc note list --session ses_abc123
      mc note list --project . --json
    """
    from magic_context.memory import notes, reports
    from magic_context.store import db

    statuses: list[str] | None = None if not status else list(notes.STATUSES) if "all" in status else status
    conn = db.open_for_reading()
    try:
        pk, pid = _scope(conn, session, harness, project)
        rows = notes.list_notes(conn, session_pk=pk, project_id=pid, statuses=statuses, limit=limit)
    finally:
        conn.close()
    _output.emit(reports.notes_listed(pid, rows), as_json=as_json, human=_listing)


def _listing(result: Result) -> None:
    out = _output.console()
    if not result.data["notes"]:
        out.print("No notes.")
    for row in result.data["notes"]:
        out.print(_line(row), markup=False)


@note_app.command("dismiss")
def dismiss(
    note_id: int = typer.Argument(..., metavar="ID"),
    session: str = typer.Option(None, "--session", help="A note this session sees: its own or its project's."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Project directory (default: the session's, else the "
                                 "current directory)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Dismiss a note that is done or stale: one that `mc note list` with the same flags shows.

    \b
    Examples:
      mc note dismiss 3
      mc note dismiss 7 --session ses_abc123
    """
    from magic_context.memory import notes, reports
    from magic_context.store import db

    conn = db.open_db()
    try:
        pk, pid = _scope(conn, session, harness, project)
        result = reports.note_dismissed(notes.dismiss(conn, note_id, session_pk=pk, project_id=pid))
    finally:
        conn.close()
    _output.emit(result, as_json=as_json, human=lambda r: _output.console().print(r.data["message"], markup=False))


def register(app: typer.Typer) -> None:
    app.add_typer(note_app, name="note")


__all__ = ["note_app", "register"]
