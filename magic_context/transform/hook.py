"""`mc transform` process entry: argv → stdin JSON → pass → stdout JSON, with the exit-code contract.

This module is reached from `commands.main` before Typer is imported, so it and everything it
imports at module level must stay within the standard library, sqlite3 and orjson.
"""

from __future__ import annotations

import sys
from typing import BinaryIO

from magic_context.errors import BadInput, ExitCode, MCError

USAGE = (
    "usage: mc transform [--harness H] [--session ID] [--project DIR] [--model PROVIDER/ID] "
    "[--context-limit N] [--report] [--dry-run]"
)
_VALUE_FLAGS = ("--harness", "--session", "--project", "--model", "--context-limit")
_BOOL_FLAGS = ("--report", "--dry-run")


def parse_args(args: list[str]) -> dict[str, str | bool]:
    """Parse the transform flags by hand (argparse would pull in gettext and friends)."""
    options: dict[str, str | bool] = {flag: False for flag in _BOOL_FLAGS}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if name in _VALUE_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                raise BadInput(f"{name} needs a value", fix=USAGE)
            options[name] = value
        elif arg in _BOOL_FLAGS:
            options[arg] = True
        else:
            raise BadInput(f"unknown argument {arg!r}", fix=USAGE)
        i += 1
    limit = options.get("--context-limit")
    if isinstance(limit, str) and not limit.isdigit():
        raise BadInput(f"--context-limit must be a positive integer, got {limit!r}", fix=USAGE)
    return options


def main(args: list[str], *, debug: bool = False, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Run one transform pass; returns the exit code. Nothing but the result reaches stdout."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    try:
        options = parse_args(args)
        from magic_context.transform import protocol

        output = protocol.run(stdin.read(), options)
    except MCError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"mc: error: {exc.one_line()}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("mc: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    stdout.write(output)
    stdout.flush()
    return int(ExitCode.OK)


__all__ = ["USAGE", "main", "parse_args"]
