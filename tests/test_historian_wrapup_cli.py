"""`mc wrapup` end to end: the command module on a Typer app, the real providers against a real HTTP
server on 127.0.0.1 (tests/fake_llm_server.py) for both wire formats, and the command provider."""

from __future__ import annotations

import itertools
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from fake_llm_server import FakeLLMServer, RecordedRequest, error, slow
from historian_helpers import PiBuilder, compartments, store_pi
from typer.testing import CliRunner

from commands import wrapup as wrapup_command
from magic_context.errors import BadInput
from magic_context.history import runner
from magic_context.store.db import open_db

KEY_ENV = "MC_TEST_HISTORIAN_KEY"
SESSION = "cli-session"
_RANGE = re.compile(r'<new_messages first="(\d+)" last="(\d+)">')


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-test-historian-0123456789abcdef")


@pytest.fixture
def pk() -> int:
    b = PiBuilder()
    for i in range(8):
        b.turn(f"please port module {i} to the new theme api", f"src/m{i}.py", padding=1_500)
    conn = open_db()
    try:
        return store_pi(conn, b.messages, session_id=SESSION)
    finally:
        conn.close()


def app() -> typer.Typer:
    application = typer.Typer()

    @application.callback()
    def _root() -> None:
        """mc (test app)."""

    wrapup_command.register(application)
    return application


def invoke(*args: str):
    return CliRunner().invoke(app(), ["wrapup", "--session", SESSION, *args])


def write_config(config_dir: Path, text: str) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(textwrap.dedent(text), encoding="utf-8")


def http_config(config_dir: Path, server: FakeLLMServer, provider: str, *, timeout_ms: int = 10_000,
                retries: int = 1) -> None:
    base = server.openai_base_url if provider == "openai" else server.url
    write_config(config_dir, f"""
        [historian]
        provider = "{provider}"
        fallback = ["extractive"]
        timeout_ms = {timeout_ms}
        max_retries = {retries}

        [historian.{provider}]
        base_url = "{base}"
        model = "test-model"
        api_key_env = "{KEY_ENV}"
        """)


def valid_answer(prompt: str) -> str:
    first, last = _RANGE.search(prompt).groups()
    return (f'<output><compartments><compartment start="{first}" end="{last}" title="Ported modules to the theme api" '
            f'episode_type="refactor" importance="61"><p1>U: port the modules; edited src/m0.py …</p1>'
            f"<p2>Ported the modules.</p2><p3>Modules ported.</p3><p4>src/m0.py</p4></compartment></compartments>"
            f"<facts><NAMING>\n* Theme modules live in src/.\n</NAMING></facts>"
            f"<meta><unprocessed_from>{int(last) + 1}</unprocessed_from></meta></output>")


def answer(request: RecordedRequest) -> str:
    return valid_answer(request.prompt)


def flat_answer(request: RecordedRequest) -> str:
    first, last = _RANGE.search(request.prompt).groups()
    return f'<output><compartments><compartment start="{first}" end="{last}" title="x">flat</compartment>' \
           f"</compartments></output>"


def rows(pk: int):
    conn = open_db()
    try:
        return [dict(r) for r in compartments(conn, pk)], _failure(conn, pk)
    finally:
        conn.close()


def _failure(conn, pk: int):
    row = conn.execute("SELECT value FROM session_state WHERE session_pk = ? AND key = ?",
                       (pk, runner.FAILURE_KEY)).fetchone()
    return None if row is None else json.loads(row[0])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_valid_answer(provider: str, server: FakeLLMServer, pk: int, isolated_dirs: dict) -> None:
    http_config(isolated_dirs["config"], server, provider)
    server.script([answer])
    result = invoke("--keep", "5", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    assert data["disposition"] == "completed" and data["providers"] == [provider]
    assert data["start"] == 0 and data["compartments"] == 1
    (request,) = server.requests
    assert request.wire == provider
    assert "historian" in request.system and "<new_messages" in request.prompt
    if provider == "anthropic":
        assert request.headers["x-api-key"].startswith("sk-test-historian")
    else:
        assert request.headers["authorization"].startswith("Bearer sk-test-historian")
    stored, failure = rows(pk)
    assert stored[0]["title"] == "Ported modules to the theme api" and stored[0]["importance"] == 61
    assert failure is None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_invalid_then_repaired(provider: str, server: FakeLLMServer, pk: int, isolated_dirs: dict) -> None:
    http_config(isolated_dirs["config"], server, provider)
    server.script([flat_answer, answer])
    result = invoke("--keep", "5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"]["providers"] == [provider]
    _, repair = server.requests
    assert "rejected by the validator" in repair.prompt and "tiered paraphrase" in repair.prompt
    assert "flat" in repair.prompt  # the previous answer travels with the repair request
    stored, failure = rows(pk)
    assert stored[0]["title"] == "Ported modules to the theme api"
    assert failure is None  # repaired by the same provider: no failure to report


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_429_then_success(provider: str, server: FakeLLMServer, pk: int, isolated_dirs: dict) -> None:
    http_config(isolated_dirs["config"], server, provider)
    server.script([error(429, retry_after="0"), answer])
    result = invoke("--keep", "5")
    assert result.exit_code == 0, result.output
    assert "folded messages 0-" in result.stdout and f"via {provider}" in result.stdout
    assert len(server.requests) == 2
    stored, failure = rows(pk)
    assert stored[0]["title"] == "Ported modules to the theme api" and failure is None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_timeout_falls_back_to_extractive(provider: str, server: FakeLLMServer, pk: int,
                                          isolated_dirs: dict) -> None:
    http_config(isolated_dirs["config"], server, provider, timeout_ms=1_000, retries=0)
    server.script([slow(5.0, "too late")])
    result = invoke("--keep", "5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"]["providers"] == ["extractive"]
    stored, failure = rows(pk)
    first, last = map(int, _RANGE.search(server.requests[0].prompt).groups())
    # the extractive fallback folds exactly the range the provider was asked for, without gaps
    assert stored[0]["start_ordinal"] == first
    assert stored[-1]["end_ordinal"] == last
    assert all(b["start_ordinal"] == a["end_ordinal"] + 1 for a, b in itertools.pairwise(stored))
    assert all(r["p1"] and r["title"] for r in stored)
    assert failure["class"] == "timeout" and failure["provider"] == provider
    assert failure["recovered_by"] == "extractive"


def test_command_provider(tmp_path: Path, pk: int, isolated_dirs: dict) -> None:
    script = tmp_path / "historian.py"
    script.write_text(textwrap.dedent("""
        import re, sys
        prompt = sys.stdin.read()
        first, last = re.search(r'<new_messages first="(\\d+)" last="(\\d+)">', prompt).groups()
        print(f'<output><compartments><compartment start="{first}" end="{last}" title="Ported modules to the '
              f'theme api"><p1>edited src/m0.py</p1><p2>ported</p2><p3>ported</p3><p4/></compartment>'
              f'</compartments></output>')
        """), encoding="utf-8")
    argv = json.dumps([sys.executable, str(script)])
    write_config(isolated_dirs["config"], f"""
        [historian]
        provider = "command"
        [historian.command]
        argv = {argv}
        """)
    result = invoke("--keep", "5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"]["providers"] == ["command"]
    stored, _ = rows(pk)
    assert stored[0]["title"] == "Ported modules to the theme api"


def test_provider_flag_overrides_the_config(server: FakeLLMServer, pk: int, isolated_dirs: dict) -> None:
    http_config(isolated_dirs["config"], server, "openai")
    result = invoke("--keep", "5", "--provider", "extractive", "--json")
    assert result.exit_code == 0 and server.requests == []
    assert json.loads(result.stdout)["data"]["providers"] == ["extractive"]


def test_nothing_to_compact_is_a_normal_outcome(pk: int) -> None:
    result = invoke("--keep", "500")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("nothing to compact")
    as_json = invoke("--keep", "500", "--json")
    envelope = json.loads(as_json.stdout)
    assert envelope["command"] == "wrapup" and envelope["errors"] == []
    assert envelope["data"]["disposition"] == "nothing_to_compact"


def test_default_keep_and_human_output(pk: int) -> None:
    result = invoke()
    assert result.exit_code == 0, result.output
    assert "the newest 20 messages stay raw" in result.stdout and "via extractive" in result.stdout
    stored, _ = rows(pk)
    assert stored[-1]["end_ordinal"] <= 48 - 21


def test_unknown_provider_and_session(pk: int) -> None:
    result = invoke("--provider", "gpt")
    assert isinstance(result.exception, BadInput)
    missing = CliRunner().invoke(app(), ["wrapup", "--session", "nope"])
    assert missing.exception is not None and "no session" in str(missing.exception)


def test_already_in_progress_exits_1(pk: int) -> None:
    conn = open_db()
    try:
        runner.acquire_lease(conn, pk, "someone-else", int(__import__("time").time() * 1000), 600_000)
    finally:
        conn.close()
    result = invoke("--json")
    assert result.exit_code == 1
    envelope = json.loads(result.stdout)
    assert envelope["data"]["disposition"] == "already_in_progress" and envelope["errors"]


def test_background_flag_runs_one_silent_run(pk: int) -> None:
    conn = open_db()
    try:
        conn.execute("UPDATE sessions SET context_limit = 8000 WHERE id = ?", (pk,))
    finally:
        conn.close()
    result = invoke("--background")
    assert result.exit_code == 0 and result.stdout == ""
    stored, _ = rows(pk)
    assert stored  # token mode with a small window: the head before the protected tail is folded
