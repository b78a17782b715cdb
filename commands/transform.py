"""`mc transform`: the Typer face of the hot path (help, completion, man page).

Real invocations never reach this module: `commands.main` dispatches `mc transform` straight to
`magic_context.transform.hook` before Typer is imported. Both routes call the same function.
"""

from __future__ import annotations

import sys

import typer


def transform(
    harness: str = typer.Option(None, "--harness",
                                help="opencode | pi | anthropic | openai | openai-responses (default: detected)."),
    session: str = typer.Option(None, "--session", help="Session id (default: from the input or a fingerprint)."),
    project: str = typer.Option(None, "--project", help="Project directory (default: the current directory)."),
    model: str = typer.Option(None, "--model", help="Model as PROVIDER/ID."),
    context_limit: int = typer.Option(None, "--context-limit", help="Context window in tokens."),
    report: bool = typer.Option(False, "--report", help="Print the pass report as one JSON line on stderr."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and print, persist nothing."),
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
