"""The `mc` strategy of a replay: the real transform, pass by pass, with its own fresh data dir.

In-process (the default) each pass runs `transform.hook.serve` on the payload bytes, the same code
`mc transform` runs after argument parsing; with `subprocess=True` each pass runs
`python -m magic_context transform` for honest wall-time latency. The JSON floor is measured the
same way on the same payload: the stdlib json module parsing and re-serializing it, in-process or
in a fresh `python -c` process. MAGIC_CONTEXT_STORAGE_DIR / CONFIG_DIR point at a temporary
directory (and MAGIC_CONTEXT_HISTORIAN=inline) while the runner is open; the previous values are
restored on exit. The temporary config dir holds a copy of `config_file` (the user's `config.toml`
unless the caller chose another file or none), so a replay runs the settings it is asked about
and never writes to the user's directories. While open, config loads record no problems for the CLI to
tell (`files.paused`): they would name the temporary copy; the runner checks the original file instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from magic_context import paths
from magic_context.config import files
from magic_context.errors import ContextEmergency, ExitCode, MCError
from magic_context.records import Factory, record
from magic_context.transform.protocol import CODECS, dumps, loads
from magic_context.wire import anthropic
from magic_context.wire import model as m

FLOOR_CODE: Final = "import json,sys;sys.stdout.write(json.dumps(json.loads(sys.stdin.buffer.read())))"
SESSION_ID: Final = "mc-replay"
PASS_TIMEOUT_S: Final = 120


@record
class McPass:
    """One served pass: the decoded request, the pass report, and its timing."""

    messages: list[m.Message]
    system: list[str]
    report: dict[str, Any]
    ms: float
    floor_ms: float
    emergency: bool = False
    warnings: list[str] = Factory(factory=list)


def provider_of(model_id: str | None) -> str:
    name = (model_id or "").lower()
    for fragment, provider in (("claude", "anthropic"), ("gpt", "openai"), ("o3", "openai"), ("o4", "openai"),
                               ("deepseek", "deepseek"), ("gemini", "google")):
        if fragment in name:
            return provider
    return "replay"


class McRunner:
    """Serves passes through mc; use as a context manager (it owns the temporary data dir)."""

    def __init__(self, *, harness: str, window: int, system: str | None = None, subprocess: bool = False,
                 config_file: Path | None = None) -> None:
        self.harness = harness
        self.config_file = config_file
        self.window = window
        self.system = system
        self.subprocess = subprocess
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._saved: dict[str, str | None] = {}
        self.project_dir = Path()
        self._env: dict[str, str] = {}
        self._quiet = files.paused()  # the copy's config problems: the runner told them under the user's file name

    def __enter__(self) -> McRunner:
        self._tmp = tempfile.TemporaryDirectory(prefix="mc-replay-")
        root = Path(self._tmp.name)
        self.project_dir = root / "project"
        self.project_dir.mkdir()
        if self.config_file is not None:
            (root / "config").mkdir()
            shutil.copyfile(self.config_file, root / "config" / paths.CONFIG_FILENAME)
        self._env = {paths.STORAGE_ENV: str(root / "data"), paths.CONFIG_ENV: str(root / "config"),
                     "MAGIC_CONTEXT_HISTORIAN": "inline"}
        for key, value in self._env.items():
            self._saved[key] = os.environ.get(key)
            os.environ[key] = value
        self._quiet.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        self._quiet.__exit__()

    def store_facts(self) -> dict[str, Any]:
        """What the replay's own database says about the historian (best effort: None when unreadable)."""
        import sqlite3

        from magic_context.store import compartments, db, state

        facts: dict[str, Any] = {"compartments": None, "historian_failure": None}
        try:
            conn = db.connect_read_only(paths.db_path())
        except sqlite3.Error:
            return facts
        try:
            facts["compartments"] = compartments.count_all(conn)
            failure = state.newest_value(conn, "historian_failure")
            if failure is not None:
                facts["historian_failure"] = failure.get("message") if isinstance(failure, dict) else str(failure)
        except sqlite3.Error:
            pass
        finally:
            conn.close()
        return facts

    def historian_state(self) -> dict[str, Any] | None:
        """The historian's state in the replay's database (`last_run_at`, `last_calls`…), None if unreadable."""
        import sqlite3

        from magic_context.store import db, state

        try:
            conn = db.connect_read_only(paths.db_path())
        except sqlite3.Error:
            return None
        try:
            found = state.newest_value(conn, "historian")
        except sqlite3.Error:
            return None
        finally:
            conn.close()
        return found if isinstance(found, dict) else None

    def payload(self, messages: list[Any], at_ms: int | None, model_id: str | None) -> bytes:
        """The envelope mc would receive for this call."""
        envelope: dict[str, Any] = {
            "messages": messages, "harness": self.harness, "session_id": SESSION_ID,
            "project_dir": str(self.project_dir),
            "model": {"provider": provider_of(model_id), "id": model_id or "unknown", "context_limit": self.window},
        }
        if at_ms is not None:
            envelope["now"] = at_ms
        if self.system is not None:
            envelope["system"] = self.system
        return dumps(envelope)

    def serve(self, payload: bytes) -> McPass:
        """Run one pass and measure it and the JSON floor on the same payload."""
        if self.subprocess:
            out, report, ms, emergency, warnings = self._serve_process(payload)
            floor = self._floor_process(payload)
        else:
            out, report, ms, emergency, warnings = self._serve_inline(payload)
            floor = self._floor_inline(payload)
        document = loads(out)
        raw_messages = document["messages"] if isinstance(document, dict) else document
        messages = CODECS[self.harness].decode(raw_messages)
        system = document.get("system") if isinstance(document, dict) else None
        if isinstance(system, str):
            texts = [system]
        elif isinstance(system, list):
            texts = anthropic.system_texts(system)
        else:
            texts = []
        return McPass(messages, texts, report, ms, floor, emergency, warnings)

    def _serve_inline(self, payload: bytes) -> tuple[bytes, dict[str, Any], float, bool, list[str]]:
        from magic_context.transform import hook

        options = hook.parse_args(["--context-limit", str(self.window)])
        captured = io.StringIO()
        started = time.perf_counter()
        emergency = False
        with contextlib.redirect_stderr(captured):
            try:
                out, report = hook.serve(payload, options)
            except ContextEmergency as exc:
                out, report, emergency = payload, {"pass": "emergency", "reason": exc.one_line()}, True
        ms = (time.perf_counter() - started) * 1000
        warnings = [line for line in captured.getvalue().splitlines() if line.strip()]
        return out, report or {}, ms, emergency, warnings

    def _process_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self._env)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        return env

    def _serve_process(self, payload: bytes) -> tuple[bytes, dict[str, Any], float, bool, list[str]]:
        cmd = [sys.executable, "-m", "magic_context", "transform", "--context-limit", str(self.window), "--report"]
        started = time.perf_counter()
        proc = subprocess.run(cmd, input=payload, capture_output=True, env=self._process_env(),
                              timeout=PASS_TIMEOUT_S, check=False)
        ms = (time.perf_counter() - started) * 1000
        lines = proc.stderr.decode("utf-8", "replace").splitlines()
        if proc.returncode == ExitCode.CONTEXT_EMERGENCY:
            return payload, {"pass": "emergency", "reason": lines[-1] if lines else ""}, ms, True, lines
        if proc.returncode != 0:
            raise MCError(f"mc transform exited {proc.returncode} during the replay: {lines[-1] if lines else ''}",
                          fix="rerun without --subprocess, or with --debug, to see the failing pass")
        report: dict[str, Any] = {}
        if lines:
            try:
                report = json.loads(lines[-1])
                lines = lines[:-1]
            except ValueError:
                pass
        return proc.stdout, report, ms, False, lines

    @staticmethod
    def _floor_inline(payload: bytes) -> float:
        started = time.perf_counter()
        json.dumps(json.loads(payload))
        return (time.perf_counter() - started) * 1000

    def _floor_process(self, payload: bytes) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR_CODE], input=payload, capture_output=True,
                       env=self._process_env(), timeout=PASS_TIMEOUT_S, check=True)
        return (time.perf_counter() - started) * 1000


__all__ = ["FLOOR_CODE", "McPass", "McRunner", "provider_of"]
