"""`mc setup --harness opencode|pi`: install (or `--uninstall`) mc's plugin into a harness; the wizard comes later."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from commands import _output
from magic_context.results import Result


def setup(
    harness: list[str] = typer.Option(None, "--harness", help="opencode | pi | claude-code | codex (repeat)."),
    project: Path = typer.Option(None, "--project", help="Install into this project (default: the current directory)."),
    global_: bool = typer.Option(False, "--global", help="Install into the harness's global config instead."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove mc; restore what the install changed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; write nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Never ask; take every default."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Wire mc into a harness: the OpenCode plugin, the Pi extension, or mc proxy for Claude Code / Codex.

    \b
    Idempotent (a second run changes nothing); backs a file up before changing it;
    --uninstall puts back what the install changed.
    \b
    Examples:
      mc setup --harness opencode              # this project
      mc setup --harness pi --global
      mc setup --harness opencode --uninstall
      mc setup --harness opencode --dry-run --json
      mc setup --harness claude-code           # .claude/settings.json → mc proxy
      mc setup --harness codex                 # ~/.codex/config.toml (always global)
    """
    from magic_context import integrations
    from magic_context.errors import BadInput

    if not harness:
        detected = integrations.on_path()
        found = f" (found on PATH: {', '.join(detected)})" if detected else ""
        raise BadInput(f"pass --harness {'|'.join(integrations.HARNESSES)}{found}",
                       fix="the interactive setup wizard is not built yet")
    scopes = [(name, integrations.scope_for(name, project=project, global_=global_)) for name in harness]
    if not (yes or dry_run or as_json) and sys.stdin.isatty():
        verb = "Remove mc from" if uninstall else "Install mc into"
        targets = ", ".join(f"{name} ({scope.describe()})" for name, scope in scopes)
        if not typer.confirm(f"{verb} {targets}?", default=True):
            raise typer.Abort()
    results = []
    for name, scope in scopes:
        module = integrations.get(name)
        action = module.uninstall if uninstall else module.install
        results.append(action(scope, dry_run=dry_run))
    from magic_context.integrations.base import report

    _output.emit(report(results), as_json=as_json, human=_render_all)


_VERBS = {"create": "created", "update": "updated", "delete": "deleted", "mkdir": "created dir", "rmdir": "removed dir"}


def _render_all(outcome: Result) -> None:
    for result in outcome.data["results"]:
        _render(result)


def _render(result: dict[str, Any]) -> None:
    out = _output.console()
    done = "removed from" if result["operation"] == "uninstall" else "installed into"
    head = "would change" if result["dry_run"] else done
    from magic_context.integrations.base import Scope

    where = Scope(result["scope"]["kind"], Path(result["scope"]["path"])).describe()
    out.print(f"[bold]{result['harness']}[/bold]: {head} {where}" if result["changed"]
              else f"[bold]{result['harness']}[/bold]:")
    for change in result["changes"]:
        verb = ("would be " if result["dry_run"] else "") + _VERBS.get(change["action"], change["action"])
        backup = f" (backup: {change['backup']})" if change.get("backup") else ""
        out.print(f"  {verb} {change['path']}" + (f" — {change['detail']}" if change.get("detail") else "") + backup,
                  markup=False, highlight=False, soft_wrap=True)
    for note in result["notes"]:
        out.print(f"  note: {note}", markup=False, soft_wrap=True)
    if result["changed"] and not result["dry_run"] and result["operation"] == "install":
        if result["harness"] in ("claude-code", "codex"):
            out.print("  the client now talks to mc proxy: keep it running (`mc proxy --daemon`); "
                      "check it with `mc doctor`", markup=False, soft_wrap=True)
        out.print("  check it: run the harness once, then `mc status --latest`", markup=False)


def register(app: typer.Typer) -> None:
    app.command("setup")(setup)


__all__ = ["register", "setup"]
