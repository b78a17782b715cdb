"""Which sessions and project a search covers: `--session`, `--project DIR`, or the current directory."""

from __future__ import annotations

import calendar
import os
import sqlite3
import time

from magic_context.errors import BadInput, NotFound
from magic_context.records import record


@record
class Scope:
    session_pks: list[int]
    project_id: str | None
    project_dir: str | None
    session_id: str | None = None


def resolve(conn: sqlite3.Connection, *, session: str | None, harness: str | None, project: str | None,
            cwd: str) -> Scope:
    """The search scope; NotFound for an unknown session, or a project with no session and no memory, note or commit."""
    from magic_context.tools.reduce import find_session

    if session and project:
        raise BadInput("--session and --project exclude each other", fix="pass one of them")
    if session:
        pk = find_session(conn, session, harness)
        from magic_context.store import search_index as idx

        return Scope([pk], idx.session_field(conn, pk, "project_id"), idx.session_field(conn, pk, "project_dir"),
                     idx.session_field(conn, pk, "session_id"))
    from magic_context import project as identity

    project_id = identity.identity(project or cwd)
    from magic_context.store.search_index import has_project_records, project_sessions

    rows = project_sessions(conn, project_id)
    if not rows and has_project_records(conn, project_id):  # memories/notes added before mc served it: project lanes
        return Scope([], project_id, os.path.abspath(project or cwd))
    if not rows:
        if project:
            raise NotFound(f"mc has no session for project {project}", fix="check the directory, or pass --session")
        raise NotFound(f"mc has no session for the current directory {cwd}",
                       fix="pass --session ID or --project DIR (`mc status --latest` shows a session id)")
    return Scope([int(r[0]) for r in rows], project_id, rows[0][1] or project, rows[0][2] if len(rows) == 1 else None)


def require_database() -> None:
    """NotFound when mc has no database yet: a read-only command must not create one just to say it found nothing
    (#12: bad input writes nothing)."""
    from magic_context import paths

    if not paths.db_path().exists():
        raise NotFound(f"mc has no sessions yet (no database at {paths.db_path()})",
                       fix="pipe a request through `mc transform` (or start your harness with mc set up) first")


def parse_date(value: str | None, *, end: bool = False) -> int | None:
    """`YYYY-MM-DD` (whole UTC day; `end` means up to its end) or `YYYY-MM-DDTHH:MM[:SS]` (UTC) as epoch ms."""
    if value is None:
        return None
    text = value.strip().rstrip("Z")
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"):
        try:
            parsed = time.strptime(text, fmt)
        except ValueError:
            continue
        ms = calendar.timegm(parsed) * 1000
        return ms + 86_400_000 if end and fmt == "%Y-%m-%d" else ms
    raise BadInput(f"date {value!r} is not YYYY-MM-DD", fix="e.g. --from 2026-11-01 --to 2026-11-30")


def date_window(date_from: str | None, date_to: str | None) -> tuple[int | None, int | None]:
    """(since, until) epoch ms for `--from`/`--to`; BadInput when the window is empty (`--from` after `--to`)."""
    since, until = parse_date(date_from), parse_date(date_to, end=True)
    if since is not None and until is not None and since >= until:
        raise BadInput(f"--from {date_from} is after --to {date_to}", fix="swap them, or widen the window")
    return since, until


__all__ = ["Scope", "date_window", "parse_date", "require_database", "resolve"]
