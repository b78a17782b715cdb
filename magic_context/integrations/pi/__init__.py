"""Pi: the extension (`context` event → `mc transform`) and its installer.

Pi loads every extension directory with an `index.js` under `.pi/extensions/` (project) or
`$PI_CODING_AGENT_DIR/extensions/` (global, default `~/.pi/agent/extensions/`), with no build step and no
settings entry, so the install is one directory, `magic-context/` (`index.js`, `bridge.js`, `mc.json`),
and the uninstall removes it (and any directory the install had to create).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from magic_context.integrations import base
from magic_context.integrations.base import Detection, Scope, SetupResult, Verification

NAME = "pi"
BINARY = "pi"
TESTED_VERSIONS = ("0.73.1",)
AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"


def global_dir() -> Path:
    """Pi's agent directory (`$PI_CODING_AGENT_DIR`, default `~/.pi/agent`)."""
    override = os.environ.get(AGENT_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else Path.home() / ".pi" / "agent"


def install_dir(scope: Scope) -> Path:
    root = scope.root / ".pi" if scope.kind == "project" else scope.root
    return root / "extensions" / base.INSTALL_DIR


def detect(project: Path | None = None) -> Detection:
    return base.detect(NAME, BINARY, TESTED_VERSIONS, install_dir=install_dir, global_root=global_dir(),
                       project=project)


def install(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    notes = base.version_warnings("Pi", shutil.which(BINARY), TESTED_VERSIONS)
    return base.install_extension(NAME, scope, install_dir(scope), dry_run=dry_run,
                                  notes=[n for n in notes if "not on PATH" not in n])


def uninstall(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    return base.uninstall_extension(NAME, scope, install_dir(scope), dry_run=dry_run)


def verify(scope: Scope) -> Verification:
    problems, warnings = base.verify_extension(NAME, install_dir(scope))
    warnings += base.version_warnings("Pi", shutil.which(BINARY), TESTED_VERSIONS)
    return base.verification(NAME, scope, problems, warnings)


__all__ = ["NAME", "TESTED_VERSIONS", "detect", "global_dir", "install", "install_dir", "uninstall", "verify"]
