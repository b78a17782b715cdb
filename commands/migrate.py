"""`mc migrate`: bring the database to the current schema (idempotent)."""

from __future__ import annotations

import typer

from commands import _output
from magic_context.results import Result


def migrate(
    dry_run: bool = typer.Option(False, "--dry-run", help="List pending migrations without applying them."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Apply pending schema migrations to context.db and list what was applied.

    \b
    Examples:
      mc migrate
      mc migrate --dry-run --json
    """
    from magic_context import paths
    from magic_context.store import db, migrations

    if dry_run and not paths.db_path().exists():
        result = migrations.MigrationStatus([], migrations.all_names(), 0, 0)
    else:
        conn = db.connect()
        try:
            db.check_fence(conn)
            result = migrations.status(conn) if dry_run else migrations.apply(conn)
        finally:
            conn.close()
    _output.emit(result.to_result(str(paths.db_path()), dry_run=dry_run), as_json=as_json, human=_render)


def _render(result: Result) -> None:
    data = result.data
    out = _output.console()
    names = data["pending"] if data["dry_run"] else data["applied"]
    if not names:
        out.print(f"Database {data['database']} is up to date (schema version {data['schema_version']}).")
        return
    verb = "Would apply" if data["dry_run"] else "Applied"
    out.print(f"{verb} {len(names)} migration(s) to {data['database']}:")
    for name in names:
        out.print(f"  {name}")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)


__all__ = ["migrate", "register"]
