"""`mc doctor`: run the health checks, optionally repair, exit 1 on any failure."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from commands import _config_notes, _output


def doctor(
    fix: bool = typer.Option(False, "--fix", help="Repair what can be repaired (create dirs, migrate), then re-check."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --fix: apply every fix without asking."),
    project: Path = typer.Option(None, "--project", help="Project directory whose config to check (default: cwd)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Check mc's health: Python, directories, config, database, schema, WAL, tokenizer, logs, installed plugins.

    \b
    Examples:
      mc doctor
      mc doctor --fix --yes
      mc doctor --json
    """
    from magic_context import paths
    from magic_context.doctor.checks import default_checks, integration_checks
    from magic_context.doctor.registry import DoctorContext, report, run_checks
    from magic_context.errors import ExitCode, SchemaTooNew
    from magic_context.store import db as store_db

    def confirm(check) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            _output.warn(f"skipping fix '{check.fix_summary}' (no terminal to ask; pass --yes)")
            return False
        return typer.confirm(f"Fix: {check.fix_summary}?", default=True)

    ctx = DoctorContext(project_dir=project or Path.cwd())
    checks = default_checks() + integration_checks(ctx.project_dir)
    outcomes = run_checks(checks, ctx, fix=fix, confirm=confirm)
    _config_notes.silence()  # the config check lists every config problem: no second copy on stderr
    from magic_context.config.secrets import redacted

    result = report(outcomes, paths.all_paths())
    _output.emit(result, as_json=as_json, human=lambda r: _render(outcomes, r.data["summary"]),
                 redact=lambda value: redacted(value, ctx.project_dir))  # also registers the keys for _render
    version = ctx.notes.get("schema_version")
    if isinstance(version, int) and version > store_db.SCHEMA_VERSION:
        raise SchemaTooNew(
            f"database {paths.db_path()} has schema version {version} but this mc knows only {store_db.SCHEMA_VERSION}",
            fix="upgrade mc (pip install -U magic-context)",
        )
    if result.failed:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _render(outcomes, counts) -> None:
    from rich.table import Table

    from magic_context.doctor.registry import Status
    from magic_context.log import redact

    style = {Status.OK: "[green]ok[/green]", Status.WARN: "[yellow]warn[/yellow]", Status.FAIL: "[red]fail[/red]"}
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for outcome in outcomes:
        detail = outcome.result.detail
        if outcome.fixed:
            detail += f" (fixed: {outcome.fixed})"
        table.add_row(outcome.check.name, style[outcome.result.status], redact(detail))
        for item in outcome.result.items:
            table.add_row("", "", f"  • {redact(str(item))}")
    out = _output.console()
    out.print(table)
    out.print(f"Summary: ok {counts['ok']} / warn {counts['warn']} / fail {counts['fail']}")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


__all__ = ["doctor", "register"]
