"""`mc migrate`: bring the database to the current schema (idempotent)."""

from __future__ import annotations

from typing import Any

import typer

from commands import _output


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
    data: dict[str, Any] = {
        "database": str(paths.db_path()),
        "dry_run": dry_run,
        "applied": [] if dry_run else result.pending,
        "pending": result.pending if dry_run else [],
        "already_applied": result.applied,
        "schema_version": result.version_after,
        "target_version": db.SCHEMA_VERSION,
    }
    if as_json:
        _output.print_json("migrate", data)
        return
    out = _output.console()
    names = data["pending"] if dry_run else data["applied"]
    if not names:
        out.print(f"Database {data['database']} is up to date (schema version {data['schema_version']}).")
        return
    verb = "Would apply" if dry_run else "Applied"
    out.print(f"{verb} {len(names)} migration(s) to {data['database']}:")
    for name in names:
        out.print(f"  {name}")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)


__all__ = ["migrate", "register"]
