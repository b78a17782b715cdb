"""`mc memory`: list, show, add, edit, archive, restore, merge, remove, export and import project memories."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from commands import _output
from magic_context.results import Result

memory_app = typer.Typer(no_args_is_help=True, help="Project memories: durable facts shown to the agent in m[0].")

PROJECT_HELP = "Project directory whose memories to use (default: the current directory)."
JSON_HELP = "Print a JSON envelope on stdout."


def _now() -> int:
    return int(time.time() * 1000)


def _project_id(project: Path | None) -> str:
    from magic_context import project as identity

    if project is not None and not project.is_dir():  # a typo would file memories under a project no one has
        from magic_context.errors import BadInput

        raise BadInput(f"--project {project}: no such directory", fix="give the project's directory")
    return identity.identity(project or Path.cwd())


def _writer(source: str) -> str:
    """`--source`: the historian writes through its publish, never through this command."""
    from magic_context.errors import BadInput
    from magic_context.memory import model

    if source not in (model.USER, model.AGENT, model.DREAMER):
        raise BadInput(f"--source: unknown writer {source!r}", fix="use user, agent or dreamer")
    return source


@contextmanager
def _db(*, reading: bool = False) -> Iterator[Any]:
    """The database; `reading`: a command that only reads, which must not create it (`db.open_for_reading`)."""
    from magic_context.store import db

    conn = db.open_for_reading() if reading else db.open_db()
    try:
        yield conn
    finally:
        conn.close()


def _say(result: Result) -> None:
    """Human output of a write: its message."""
    _output.console().print(result.data["message"], markup=False)


def _changed(verb: str, result: Result) -> None:
    row = result.data["memory"]
    _output.console().print(f"{verb} memory [ID: {row['id']}] in {row['category']}.", markup=False)


def _table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    out = _output.console()
    if not rows:
        out.print("No memories.")
        return
    table = Table("id", "category", "status", "seen", "content", box=None, header_style="bold")
    for row in rows:
        status = row["status"] + (" (expired)" if row.get("expired") else "") + \
            (f" → #{row['superseded_by']}" if row.get("superseded_by") else "")
        content = " ".join(row["content"].split())
        table.add_row(str(row["id"]), row["category"], status, str(row["seen_count"]),
                      content if len(content) <= 100 else content[:99] + "…")
    out.print(table)


@memory_app.command("list")
def list_(
    project: Path = typer.Option(None, "--project", help=PROJECT_HELP),
    status: list[str] = typer.Option(None, "--status", help="active, permanent, archived or all (repeatable; "
                                     "default: active and permanent)."),
    category: str = typer.Option(None, "--category", help="Only this category."),
    expired: bool = typer.Option(False, "--expired", help="Show only memories past their TTL."),
    limit: int = typer.Option(None, "--limit", min=1, help="At most N memories."),
    all_projects: bool = typer.Option(False, "--all-projects", help="Every project's memories (ids are global)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List the project's memories by id.

    \b
    Examples:
      mc memory list
      mc memory list --status all --json
    """
    from magic_context.memory import engine, model, reports

    statuses = None
    if status:
        statuses = list(model.STATUSES) if "all" in status else status
    now = _now()
    pid = None if all_projects else _project_id(project)
    with _db(reading=True) as conn:
        rows = engine.list_memories(conn, pid, statuses=statuses, category=category,
                                    expired=True if expired else (None if statuses else False), limit=limit,
                                    now_ms=now)
    _output.emit(reports.listed(pid, rows, now_ms=now), as_json=as_json, human=lambda r: _table(r.data["memories"]))


@memory_app.command("show")
def show(
    memory_id: int = typer.Argument(..., metavar="ID", help="The memory id (#N in the agent's context)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show one memory with every field.

    \b
    Examples:
      mc memory show 12
      mc memory show 12 --json
    """
    from magic_context.memory import engine, reports

    with _db(reading=True) as conn:
        result = reports.shown(engine.get(conn, memory_id))
    _output.emit(result, as_json=as_json, human=_details)


def _details(result: Result) -> None:
    row = result.data["memory"]
    out = _output.console()
    out.print(f"[bold]#{row['id']}[/bold] {row['category']} ({row['status']}"
              + (", expired" if row["expired"] else "") + ")", markup=True)
    out.print(row["content"], markup=False)
    for key in ("project_id", "importance", "source_type", "source_session", "seen_count", "retrieval_count",
                "expires_at", "superseded_by", "merged_from", "metadata"):
        if row.get(key) not in (None, [], ""):
            out.print(f"  {key}: {row[key]}", markup=False)


@memory_app.command("add")
def add(
    content: str = typer.Argument(..., help="One standalone fact."),
    category: str = typer.Option(..., "--category", "-c",
                                 help="PROJECT_RULES, ARCHITECTURE, CONSTRAINTS, CONFIG_VALUES or NAMING."),
    importance: int = typer.Option(None, "--importance", help="1–100 (default 50): higher renders first."),
    permanent: bool = typer.Option(False, "--permanent", help="Render before every other memory, never expire."),
    source: str = typer.Option("user", "--source", help="Who writes it: user, agent or dreamer (integrations "
                               "calling this for an agent pass agent)."),
    project: Path = typer.Option(None, "--project", help=PROJECT_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Remember a fact for the project; an exact duplicate only bumps its seen count.

    \b
    Example:
      mc memory add "Never edit a landed migration" --category CONSTRAINTS
    """
    from magic_context.memory import engine, reports

    pid = _project_id(project)
    with _db() as conn:
        result = engine.add(conn, pid, content, category, source_type=_writer(source), importance=importance,
                            permanent=permanent)
    _output.emit(reports.added(result), as_json=as_json, human=lambda r: _output.console().print(r.data["message"]))


@memory_app.command("edit")
def edit(
    memory_id: int = typer.Argument(..., metavar="ID"),
    content: str = typer.Option(None, "--content", help="New text."),
    category: str = typer.Option(None, "--category", "-c", help="New category."),
    importance: int = typer.Option(None, "--importance", help="1–100."),
    permanent: bool = typer.Option(None, "--permanent/--no-permanent", help="Make it permanent, or active again."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Change a memory; the agent sees the new text as an update in m[1] until the next fold.

    \b
    Examples:
      mc memory edit 12 --content "Migrations are append-only"
      mc memory edit 12 --importance 90 --permanent
    """
    from magic_context.memory import engine, reports

    with _db() as conn:
        result = reports.edited(engine.edit(conn, memory_id, content=content, category=category,
                                            importance=importance, permanent=permanent))
    _output.emit(result, as_json=as_json, human=lambda r: _changed("Updated", r))


@memory_app.command("archive")
def archive(
    memory_ids: list[int] = typer.Argument(..., metavar="ID...", help="One or more memory ids."),
    reason: str = typer.Option(None, "--reason", help="Why (kept in the memory's metadata)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Hide memories from the agent (all or none); `mc memory restore` brings one back.

    \b
    Example:
      mc memory archive 12 14 --reason "no longer true"
    """
    from magic_context.memory import engine, reports

    with _db() as conn:
        result = reports.archived(engine.archive(conn, memory_ids, reason=reason), reason)
    _output.emit(result, as_json=as_json, human=_say)


@memory_app.command("restore")
def restore(
    memory_id: int = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Make an archived, superseded or expired memory active again (with no TTL).

    \b
    Example:
      mc memory restore 12
    """
    from magic_context.memory import engine, reports

    with _db() as conn:
        result = reports.restored(engine.restore(conn, memory_id))
    _output.emit(result, as_json=as_json, human=lambda r: _changed("Restored", r))


@memory_app.command("merge")
def merge(
    memory_ids: list[int] = typer.Argument(..., metavar="ID ID...", help="Two or more memories of one category."),
    content: str = typer.Option(None, "--content", help="The merged text (default: the first memory's)."),
    source: str = typer.Option("user", "--source", help="Who merges: user, agent or dreamer."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Fold duplicates into one canonical memory; the others are archived as superseded by it.

    \b
    Example:
      mc memory merge 12 14 --content "Never edit a landed migration"
    """
    from magic_context.memory import engine, reports

    with _db() as conn:
        result = engine.merge(conn, memory_ids, content=content, source_type=_writer(source))
    _output.emit(reports.merged(result), as_json=as_json, human=_say)


@memory_app.command("rm")
def remove(
    memory_ids: list[int] = typer.Argument(..., metavar="ID...", help="One or more memory ids."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete memories for good (all or none). Prefer `archive`, which can be undone.

    \b
    Example:
      mc memory rm 12 14
    """
    from magic_context.memory import engine, reports

    with _db() as conn:
        result = reports.removed(engine.remove(conn, memory_ids))
    _output.emit(result, as_json=as_json, human=_say)


@memory_app.command("export")
def export(
    output: Path = typer.Option(None, "--output", "-o", help="Write to FILE (default: stdout)."),
    project: Path = typer.Option(None, "--project", help=PROJECT_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write every memory of the project (all statuses) as JSON Lines, for backup or another machine.

    \b
    Examples:
      mc memory export -o memories.jsonl
      mc memory export --project ../other | mc memory import -
    """
    from magic_context.memory import reports, transfer

    pid = _project_id(project)
    with _db(reading=True) as conn:
        lines = list(transfer.export_lines(conn, pid))
    text = "".join(line + "\n" for line in lines)
    if output is not None:
        from magic_context import paths
        from magic_context.errors import BadInput

        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:  # a missing folder, no permission, a full disk: the user's path, named
            raise BadInput(f"cannot write {output}: {exc.strerror or exc}",
                           fix="check the folder exists and is writable") from None
        paths.secure_file(output)

    def human(result: Result) -> None:
        if output is not None:
            _output.note(f"exported {result.data['count']} memories to {output}")
        else:
            sys.stdout.write(text)

    _output.emit(reports.exported(pid, lines, str(output) if output is not None else None), as_json=as_json,
                 human=human)


@memory_app.command("import")
def import_(
    source: str = typer.Argument(..., metavar="FILE", help="JSON Lines from `mc memory export` ('-' for stdin)."),
    project: Path = typer.Option(None, "--project", help="Project to import into (default: the current directory)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and count; write nothing."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Import memories into the project; a bad line stops everything with its line number and field.

    \b
    Memories already present (same category and normalized text) are skipped,
    so importing a file twice changes nothing.
    \b
    Examples:
      mc memory import memories.jsonl --dry-run
      mc memory export --project ../other | mc memory import -
    """
    from magic_context.errors import BadInput
    from magic_context.memory import reports, transfer

    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read {source}: {exc.strerror or exc}", fix="check the path") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{source}: not UTF-8 text (byte {exc.start})", fix="pass a file from `mc memory export`") \
            from exc
    pid = _project_id(project)
    with _db() as conn:
        run = transfer.import_dry_run if dry_run else transfer.import_lines
        result = run(conn, pid, text.splitlines(), now_ms=_now())
    _output.emit(reports.imported(pid, result, dry_run=dry_run), as_json=as_json, human=_say)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")


__all__ = ["memory_app", "register"]
