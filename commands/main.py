"""The `mc` / `magic-context` entry point and the single error boundary.

`mc transform` (without --help) is dispatched to `magic_context.transform.hook.main` before
Typer is imported, so the per-LLM-call hot path loads only the standard library, sqlite3 and
orjson (DESIGN §3). Everything else goes through the Typer app in `commands.app`.
"""

from __future__ import annotations

import os
import sys

_HELP_FLAGS = frozenset({"--help", "-h"})


def _debug_enabled(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("MAGIC_CONTEXT_DEBUG", "") not in ("", "0", "false")


def _is_transform_fast_path(argv: list[str]) -> bool:
    args = [a for a in argv if a != "--debug"]
    return bool(args) and args[0] == "transform" and not _HELP_FLAGS.intersection(args)


def main(argv: list[str] | None = None) -> int:
    """Run mc; returns the process exit code (console scripts pass it to sys.exit)."""
    in_process = argv is not None
    argv = list(sys.argv[1:] if argv is None else argv)
    if _is_transform_fast_path(argv):
        if not in_process:  # a process per LLM call: skip what orjson's import chain loads but never uses
            from magic_context import lazystd

            for name in lazystd.UNUSED_BY_TRANSFORM:
                lazystd.defer(name)
        from magic_context.transform import hook

        code = hook.main([a for a in argv[1:] if a != "--debug"], debug=_debug_enabled(argv))
        if in_process:
            return code  # called in-process (tests, embedding): leave the interpreter alone
        # The hook process is done: skip interpreter teardown. Saves ~15-25 ms per LLM call. (The pass has
        # closed its database connection already, so SQLite's checkpoint-on-close did run: see the README.)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return run_app(argv)


def run_app(argv: list[str]) -> int:
    """Run the Typer app under the error boundary: MCError → one line + its exit code; config problems → one
    warning line each (`commands._config_notes`)."""
    from magic_context.errors import ExitCode, MCError

    debug = _debug_enabled(argv)
    args = [a for a in argv if a != "--debug"]
    import typer

    from commands import _config_notes

    _config_notes.begin()  # config problems any part meets are told once, before an error line
    try:
        try:
            from commands.app import build_command

            result = build_command().main(args=args, prog_name="mc", standalone_mode=False)
            _check_config(args)
            return int(result) if isinstance(result, int) else 0
        finally:
            _config_notes.flush()
            _config_notes.end()
    except MCError as exc:
        _maybe_traceback(debug)
        print(f"mc: error: {exc.one_line()}", file=sys.stderr)
        return int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        print("mc: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except Exception as exc:
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # Typer/Click usage errors
            exc.show()
            return int(exc.exit_code)
        _maybe_traceback(debug)
        print(f"mc: internal error: {type(exc).__name__}: {exc} — rerun with --debug for details", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)


def _check_config(args: list[str]) -> None:
    """Validate the config files of a command that read no whole config (best effort: never changes the exit code)."""
    from commands import _config_notes

    try:
        _config_notes.check_unloaded(args)
    except Exception:  # telling about config problems must not fail a command that succeeded
        pass


def _maybe_traceback(debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exc()


__all__ = ["main", "run_app"]
