"""The one place that prints: JSON envelopes on stdout for scripts, Rich for people (stderr for notes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from magic_context import __version__
from magic_context.records import replace
from magic_context.results import Result

ENVELOPE_VERSION = 1


def envelope(command: str, data: Any, errors: list[str] | None = None,
             problems: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The versioned `--json` envelope of DESIGN §8.

    `errors` holds the problems' messages (what envelope version 1 always carried); `problems` the same
    problems with their stable `code` and `fix` (added in version 1 without a bump: readers of the first
    five keys are unaffected).
    """
    errors = list(errors or [])
    return {
        "mc_version": __version__,
        "envelope_version": ENVELOPE_VERSION,
        "command": command,
        "data": data,
        "errors": errors,
        "problems": list(problems) if problems is not None else [
            {"code": "error", "message": text, "fix": None} for text in errors],
    }


def _write(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def emit(result: Result, *, as_json: bool, human: Callable[[Result], None],
         redact: Callable[[Any], Any] | None = None) -> None:
    """The one renderer of engine results: the `--json` envelope on stdout, else `human(result)` (Rich).

    `redact` rewrites what is shown (data and problem texts) first, e.g. to hide configured API keys. A
    failed result is still the command's to turn into an error message and an exit code.
    """
    if redact is not None:
        problems = tuple(replace(p, message=redact(p.message), fix=redact(p.fix)) for p in result.problems)
        result = replace(result, data=redact(result.data), problems=problems)
    if as_json:
        _write(envelope(result.command, result.data, result.errors(), [p.as_dict() for p in result.problems]))
    else:
        human(result)


@cache
def console():
    """Rich console on stdout for human-readable results."""
    from rich.console import Console

    return Console(highlight=False)


@cache
def err_console():
    """Rich console on stderr for progress, warnings and notes."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def note(text: str) -> None:
    err_console().print(text)


def warn(text: str) -> None:
    err_console().print(f"[yellow]warning:[/yellow] {text}", markup=True)


__all__ = ["console", "emit", "envelope", "err_console", "note", "warn"]
