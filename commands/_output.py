"""The one place that prints: JSON envelopes on stdout for scripts, Rich for people (stderr for notes)."""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any

from magic_context import __version__

ENVELOPE_VERSION = 1


def envelope(command: str, data: Any, errors: list[str] | None = None) -> dict[str, Any]:
    """The versioned `--json` envelope of DESIGN §8."""
    return {
        "mc_version": __version__,
        "envelope_version": ENVELOPE_VERSION,
        "command": command,
        "data": data,
        "errors": list(errors or []),
    }


def print_json(command: str, data: Any, errors: list[str] | None = None) -> None:
    sys.stdout.write(json.dumps(envelope(command, data, errors), indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


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


__all__ = ["console", "envelope", "err_console", "note", "print_json", "warn"]
