"""Per-harness installers (one module per harness) and the plugin files they install, as package data.

Plugin harnesses (OpenCode, Pi) get mc's plugin; base-URL clients (Claude Code, Codex) get their base
URL pointed at `mc proxy` (`proxied`). Each harness module offers the same engine functions — `detect()`,
`install(scope, dry_run=)`, `uninstall(scope, dry_run=)`, `verify(scope)` — returning the structured
results of `base`; `mc setup`, `mc doctor` and the wizard call them through this registry.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from magic_context.errors import BadInput
from magic_context.integrations.base import Scope, ScopeKind

HARNESSES = ("opencode", "pi", "claude-code", "codex")


def get(name: str) -> ModuleType:
    """The installer module of harness `name`; BadInput listing the known ones otherwise."""
    if name not in HARNESSES:
        raise BadInput(f"unknown harness {name!r}", fix=f"use one of: {', '.join(HARNESSES)}")
    return importlib.import_module(f"magic_context.integrations.{name.replace('-', '_')}")


def scope_for(harness: str, *, project: Path | None = None, global_: bool = False) -> Scope:
    """The install scope: the harness's global config, or a project directory (default: the current one)."""
    if global_ and project is not None:
        raise BadInput("--project and --global exclude each other", fix="pass one of them")
    module = get(harness)
    if getattr(module, "GLOBAL_ONLY", False):
        if project is not None:
            raise BadInput(f"{harness} has no project install (it reads its user config only)",
                           fix="drop --project (the install is global)")
        global_ = True
    if global_:
        return Scope(ScopeKind.GLOBAL, module.global_dir())
    root = (project or Path.cwd()).expanduser().resolve()
    if not root.is_dir():
        raise BadInput(f"--project {root} is not a directory", fix="pass an existing project directory")
    return Scope(ScopeKind.PROJECT, root)


def installed_scopes(project: Path | None = None) -> list[tuple[str, Scope]]:
    """(harness, scope) for every integration installed in `project` (default cwd) or globally."""
    from magic_context.integrations import base

    return [(name, scope) for name in HARNESSES
            for scope in base.installed_in(get(name).install_dir, get(name).global_dir(), project)]


def on_path() -> list[str]:
    """The harnesses whose binary is on PATH."""
    import shutil

    return [name for name in HARNESSES if shutil.which(get(name).BINARY)]


__all__ = ["HARNESSES", "get", "installed_scopes", "on_path", "scope_for"]
