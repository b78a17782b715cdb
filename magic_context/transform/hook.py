"""`mc transform` process entry: argv → stdin JSON → pass → stdout JSON, with the exit-code contract.

Reached from `commands.main` before Typer is imported, so it and everything it imports at module
level stay within the standard library, sqlite3 and orjson. Transient trouble never breaks the
agent: a busy database or a crashed sub-step serves the last-known-good output (a read-only replay
of the stored decisions, with the new raw tail untouched), or the input unchanged, and exits 0.
"""

from __future__ import annotations

import sys

from magic_context import log
from magic_context.errors import (
    BadInput,
    ContextEmergency,
    ExitCode,
    MCError,
    SchemaTooNew,
    StorageBusy,
    UnsafeLocation,
)
from magic_context.records import record
from magic_context.transform import flags

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, BinaryIO

USAGE = flags.USAGE
_VALUE_FLAGS = flags.VALUE_FLAGS
_BOOL_FLAGS = flags.BOOL_FLAGS
# Errors that must reach the user as their exit code rather than be papered over by a fallback.
_FATAL = (BadInput, ContextEmergency, SchemaTooNew, UnsafeLocation)


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
    if isinstance(limit, str) and not (limit.isdigit() and int(limit) > 0):
        raise BadInput(f"--context-limit must be a positive integer, got {limit!r}", fix=USAGE)
    return options


def _warn(message: str) -> None:
    sys.stderr.write(f"mc: warning: {message}\n")
    log.warning(message)


@record
class Served:
    """One served pass: the output bytes and report; after a full written pass, its input and the raw
    ordinal of the input's last message (what `mc proxy` pairs the response's usage with)."""

    output: bytes
    report: dict[str, Any] | None
    inp: Any = None
    prompt_ordinal: int | None = None


def serve(data: bytes, options: dict[str, str | bool], *, debug: bool = False) -> tuple[bytes, dict[str, Any] | None]:
    """Run one pass on the raw stdin bytes; returns (stdout bytes, report)."""
    from magic_context import records

    served = serve_pass(data, options, debug=debug)
    # The first processes compile the record initializers (some only on busting passes); later ones load
    # them. Saved only after a served pass: exit 2 (and any other refusal) writes nothing anywhere.
    records.save_code_cache()
    return served.output, served.report


def serve_pass(data: bytes, options: dict[str, str | bool], *, debug: bool = False, document: Any = None) -> Served:
    """The pass, or the last known good when it fails transiently (see the module docstring).

    `document` is `data` already parsed (the caller must not reuse it: the pass edits it in place).
    Raises BadInput, ContextEmergency and the storage errors that must not be papered over.
    """
    from magic_context.transform import pipeline, protocol

    inp = protocol.read_input(protocol.parse_document(data) if document is None else document, options)
    try:
        result = pipeline.run(inp)
        return Served(protocol.dumps(result.document), result.report, inp, result.prompt_ordinal)
    except _FATAL:
        raise
    except MCError as exc:
        if not isinstance(exc, StorageBusy) and _fail_closed(inp):
            raise
        reason = exc.one_line()
    except Exception as exc:  # a crashed sub-step must never break the agent
        reason = f"internal error ({type(exc).__name__}: {exc})"
        if debug:
            import traceback

            traceback.print_exc()
    # Last known good: replay stored decisions read-only on a fresh copy of the input.
    fresh = protocol.read_input(protocol.parse_document(data), options)
    try:
        result = pipeline.run(fresh, readonly=True)
        _warn(f"{reason}; served the last known good context")
        _record_fallback(fresh, reason, "last known good")
        report = dict(result.report, lkg=True)
        report["warnings"] = [*report.get("warnings", []), reason]
        return Served(protocol.dumps(result.document), report, fresh)
    except Exception:
        from magic_context.store.passes import PassKind

        _warn(f"{reason}; served the input unchanged")
        _record_fallback(fresh, reason, "input unchanged")
        return Served(data, {"pass": PassKind.DEFER, "bust": False, "reason": "input served unchanged",
                             "warnings": [reason]})


FALLBACKS_KEY = "fallbacks"


def _record_fallback(inp: Any, reason: str, served: str) -> None:
    """Count a pass that fell back in its session's state, for `mc status` (issue #14: a session must never
    fall back silently). Best effort: the trouble that caused the fallback may refuse this write too (the
    warning on stderr and in the log is then the record), and it never creates a database or a session."""
    try:
        from magic_context.store import db, sessions, state

        conn = db.connect(busy_timeout_ms=500, create=False)
        try:
            if db.user_version(conn) != db.SCHEMA_VERSION:
                return
            found = sessions.lookup_session(conn, inp.harness, inp.session_id)
            if found is None:
                return
            with db.atomic(conn):
                seen = state.load_state(conn, found[0], (FALLBACKS_KEY,)).get(FALLBACKS_KEY) or {}
                state.set_state(conn, found[0], FALLBACKS_KEY, {
                    "count": int(seen.get("count", 0)) + 1, "first_at": seen.get("first_at", inp.now_ms),
                    "last_at": inp.now_ms, "last_reason": reason, "served": served}, inp.now_ms)
        finally:
            conn.close()
    except Exception:  # recording must never turn a served fallback into a failure
        pass


def _fail_closed(inp: Any) -> bool:
    try:
        from magic_context.config.hot import load_hot

        return bool(load_hot(inp.project_dir)["fail_closed_blocking"])
    except Exception:
        return True


def main(args: list[str], *, debug: bool = False, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Run one transform pass; returns the exit code. Nothing but the result reaches stdout."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    try:
        options = parse_args(args)
        output, report = serve(stdin.read(), options, debug=debug)
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
    if options.get("--report") and report is not None:
        import json

        sys.stderr.write(json.dumps(report, ensure_ascii=False, separators=(",", ":")) + "\n")
    return int(ExitCode.OK)


__all__ = ["USAGE", "Served", "main", "parse_args", "serve", "serve_pass"]
