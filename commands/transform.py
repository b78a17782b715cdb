"""`mc transform`: the Typer face of the hot path (help, completion, man page).

Real invocations never reach this module: `commands.main` dispatches `mc transform` straight to
`magic_context.transform.hook` before Typer is imported. Both routes call the same function.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from magic_context.transform.flags import FLAGS


def _opt(flag: str) -> Any:
    """A Typer option declared by `magic_context.transform.flags` (the hot path's own table)."""
    metavar, text = FLAGS[flag]
    return typer.Option(None if metavar else False, flag, metavar=metavar, help=text)


def transform(
    harness: str = _opt("--harness"),
    session: str = _opt("--session"),
    project: str = _opt("--project"),
    model: str = _opt("--model"),
    context_limit: int = _opt("--context-limit"),
    report: bool = _opt("--report"),
    dry_run: bool = _opt("--dry-run"),
) -> None:
    """Rewrite one request read from stdin (JSON) and print it on stdout.

    \b
    Input: an envelope {"messages": [...], ...}, a provider request body
    (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses with
    "input" items), or a bare OpenCode / Pi message array.
    Output: the same shape, rewritten.
    \b
    Example:
      mc transform --harness opencode < messages.json
    """
    from magic_context.transform import hook

    args: list[str] = []
    for flag, value in (("--harness", harness), ("--session", session), ("--project", project),
                        ("--model", model), ("--context-limit", context_limit)):
        if value is not None:
            args += [flag, str(value)]
    args += [flag for flag, on in (("--report", report), ("--dry-run", dry_run)) if on]
    code = hook.main(args)
    if code:
        raise typer.Exit(code)
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("transform")(transform)


__all__ = ["register", "transform"]
