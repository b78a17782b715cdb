"""Config problems on stderr, once per invocation: the warning half of the CLI's one boundary.

The loaders fall back to the default for a bad value, an unknown key or a project key the trust
boundary strips, and record a `ConfigWarning`. Whichever engine part loaded the config, the boundary
(`commands.main.run_app`) collects those records for the whole invocation and prints each problem once
(`mc: warning: FILE: KEY: PROBLEM`); a command that never read the whole config gets one check of the
files that exist, so `mc memory list` tells about a mistyped key as well as `mc search` does. `mc doctor`
shows them in its own report and silences the boundary; `mc replay` run without the user's config
(`--no-user-config`, `--config FILE`) tells none of that file's problems (`unused`); `mc transform` never
gets here (its pass report carries them, see the README).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from magic_context.config import files

_SKIP = frozenset({"doctor", "transform"})  # doctor reports them itself; transform's Typer command is only --help
_NO_RUN = frozenset({"--help", "-h", "--version"})


_shown: set[tuple[str, str]] = set()  # (file, key) told in this invocation
_unused: list[bool] = [False]  # this invocation ran without the config files (`check_unloaded` checks nothing)


def begin() -> None:
    """Start collecting for one invocation."""
    _shown.clear()
    _unused[0] = False
    files.collect()


def end() -> None:
    files.collect(on=False)


def pending() -> list[files.ConfigWarning]:
    """Problems met so far and not yet shown."""
    met, _full_loads = files.collected()
    return [w for w in met if (w.file, w.key) not in _shown]


def silence() -> None:
    """Mark everything met so far as shown (a command that reports the problems in its own output)."""
    _shown.update((w.file, w.key) for w in pending())


def unused() -> None:
    """The command ran without the config files (`mc replay --no-user-config` / `--config FILE`): their problems
    are not its problems, so nothing met so far is told and `check_unloaded` checks nothing."""
    silence()
    _unused[0] = True


def flush() -> None:
    """Print each problem met and not yet shown on stderr, one line each."""
    for warning in pending():
        _shown.add((warning.file, warning.key))
        try:
            sys.stderr.write(f"mc: warning: {warning}\n")
        except (OSError, ValueError):  # stderr closed: nothing to tell
            return
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _project_arg(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--project" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--project="):
            return arg.split("=", 1)[1]
    return None


def check_unloaded(args: list[str]) -> None:
    """After a command that validated no whole config (none read, or only the transform's keys): validate the
    config files that exist (its `--project`'s, else the current directory's), so every problem is told.
    Costs nothing when there is no config file."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command is None or command in _SKIP or _NO_RUN.intersection(args) or _unused[0]:
        return
    _met, full_loads = files.collected()
    if full_loads:
        return
    from magic_context import paths

    project = _project_arg(args) or os.getcwd()
    project_file = files.project_config_path(project) if os.path.isdir(project) else None
    if not (os.path.exists(paths.user_config_file()) or (project_file and os.path.exists(project_file))):
        return
    from magic_context.config.load import load_config

    load_config(Path(project) if project_file else None)


def as_text() -> list[str]:
    """Every config problem met so far, as text (for a `--json` document's own `warnings` list)."""
    met, _full_loads = files.collected()
    return [str(w) for w in met]


__all__ = ["as_text", "begin", "check_unloaded", "end", "flush", "pending", "silence", "unused"]
