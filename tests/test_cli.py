"""The CLI contract: help, the error boundary and exit codes, the transform fast path's imports."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys

import pytest

from commands import main as entry
from magic_context.errors import BadInput, ExitCode, StorageUnavailable
from magic_context.store import db

BANNED_ON_HOT_PATH = ("typer", "click", "rich", "pydantic", "questionary", "prompt_toolkit", "sqlite_utils",
                      "platformdirs", "importlib.metadata", "tiktoken", "httpx",
                      # the knowledge layer (#12 acceptance: the transform gains no import): vectors, search, models
                      "numpy", "wordllama", "magic_context.search")


def test_help_and_version(mc) -> None:
    result = mc("--help")
    assert result.returncode == 0
    for command in ("transform", "migrate", "doctor"):
        assert command in result.stdout.decode()
    version = mc("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("mc ")


def test_usage_error_exits_2(mc) -> None:
    result = mc("no-such-command")
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stdout == b""


def test_migrate_and_doctor_json_on_empty_dirs(mc, isolated_dirs) -> None:
    migrate = mc("migrate", "--json")
    assert migrate.returncode == 0, migrate.stderr
    data = json.loads(migrate.stdout)
    assert data["command"] == "migrate" and data["data"]["schema_version"] == db.SCHEMA_VERSION
    assert set(data) == {"mc_version", "envelope_version", "command", "data", "errors", "problems"}
    doctor = mc("doctor", "--json")
    report = json.loads(doctor.stdout)
    statuses = {c["name"]: c["status"] for c in report["data"]["checks"]}
    assert doctor.returncode == 0, statuses
    assert statuses["database"] == "ok" and statuses["schema"] == "ok"
    assert (isolated_dirs["data"] / "context.db").stat().st_mode & 0o777 == 0o600


def test_newer_schema_exits_3_with_one_line(mc, isolated_dirs) -> None:
    db.open_db().close()
    conn = sqlite3.connect(isolated_dirs["data"] / "context.db")
    conn.execute("PRAGMA user_version=999")
    conn.close()
    for args in (("migrate",), ("doctor",), ("doctor", "--json"), ("migrate", "--json")):
        result = mc(*args)
        assert result.returncode == ExitCode.STORAGE_UNAVAILABLE, args
        lines = result.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "999" in lines[0] and "upgrade mc" in lines[0]
        assert "Traceback" not in result.stderr.decode()


def test_boundary_maps_errors_and_interrupts(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import commands.app

    def boom(error):
        def build():
            raise error
        return build

    cases = [
        (BadInput("bad flag --x", fix="see --help"), ExitCode.BAD_INPUT),
        (StorageUnavailable("cannot open"), ExitCode.STORAGE_UNAVAILABLE),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
        (RuntimeError("surprise"), ExitCode.CHECK_FAILED),
    ]
    for error, code in cases:
        monkeypatch.setattr(commands.app, "build_command", boom(error))
        assert entry.run_app(["doctor"]) == code
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1
        assert "Traceback" not in err
    monkeypatch.setenv("MAGIC_CONTEXT_DEBUG", "1")
    monkeypatch.setattr(commands.app, "build_command", boom(BadInput("bad")))
    assert entry.run_app(["doctor"]) == ExitCode.BAD_INPUT
    assert "Traceback" in capsys.readouterr().err


def test_transform_hook_interrupt_and_bad_flags(capsys) -> None:
    class Interrupting(io.BytesIO):
        def read(self, *args):
            raise KeyboardInterrupt

    from magic_context.transform import hook

    assert hook.main([], stdin=Interrupting(), stdout=io.BytesIO()) == ExitCode.INTERRUPTED
    out = io.BytesIO()
    assert hook.main(["--bogus"], stdin=io.BytesIO(b"[]"), stdout=out) == ExitCode.BAD_INPUT
    assert out.getvalue() == b""
    assert "unknown argument" in capsys.readouterr().err


def test_transform_fast_path_imports_nothing_heavy() -> None:
    # Creating a database imports sqlite-utils once (migrations); the steady-state pass must not.
    db.open_db().close()
    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "magic_context", "transform"],
                          input=payload.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    for banned in BANNED_ON_HOT_PATH:
        hits = [m for m in imported if m == banned or m.startswith(banned + ".")]
        assert not hits, f"{banned} imported on the transform hot path: {hits}"
    assert "magic_context.transform.hook" in imported
    # Start-up trims: pathlib is not needed, and `inspect` (pulled in by orjson's dataclasses import) is deferred.
    assert not {"pathlib", "inspect", "ast", "dis", "tokenize", "typing", "copy"} & imported


def test_help_route_for_transform_goes_through_typer(mc) -> None:
    result = mc("transform", "--help")
    assert result.returncode == 0
    assert "--context-limit" in result.stdout.decode()
