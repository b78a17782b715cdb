"""Issue #14 item 7: redaction uses the configured key's value, whatever the env var is called.

A provider that echoes the key in an error (here: a real HTTP server on 127.0.0.1) must not put it in
the log, the database, `mc status` (JSON or text) or `mc doctor --json`, even when `api_key_env` names a
variable without KEY/TOKEN/SECRET/PASSWORD in its name and the key has no recognizable prefix.
(The header secrets `mc proxy` registers are covered by tests/test_proxy_cli.py.)
"""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import run_mc
from fake_llm_server import FakeLLMServer, error
from historian_helpers import PiBuilder, store_pi

from magic_context import log, paths
from magic_context.store.db import open_db

ENV = "MC_HISTORIAN_CREDS"  # no KEY/TOKEN/SECRET/PASSWORD in the name
VALUE = "q7Qm9xZ2pL4vN8rT1wY6eA3cOpaque"  # no sk- prefix either
SESSION = "leaky-session"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV, VALUE)


def _config(config_dir, provider: str, base: str) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(textwrap.dedent(f"""
        [historian]
        provider = "{provider}"
        fallback = ["extractive"]
        max_retries = 0

        [historian.{provider}]
        base_url = "{base}"
        model = "test-model"
        api_key_env = "{ENV}"
        """), encoding="utf-8")


def _store_session() -> None:
    b = PiBuilder()
    for i in range(8):
        b.turn(f"please port module {i} to the new theme api", f"src/m{i}.py", padding=1_500)
    conn = open_db()
    try:
        store_pi(conn, b.messages, session_id=SESSION)
    finally:
        conn.close()


def _everything_written() -> list[str]:
    return [p.read_bytes().decode("utf-8", "replace") for p in paths.data_dir().rglob("*") if p.is_file()]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_echoed_key_of_any_env_name_is_redacted_everywhere(provider, isolated_dirs):
    with FakeLLMServer() as server:
        _config(isolated_dirs["config"], provider, server.openai_base_url if provider == "openai" else server.url)
        server.script([error(401, message=f"invalid credential {VALUE} for this org"),
                       error(500, message=f"upstream said: key={VALUE}")])
        _store_session()
        wrapup = run_mc("wrapup", "--session", SESSION, "--keep", "5", "--json")
        assert server.requests, "the provider was never called"
    assert wrapup.returncode == 0, wrapup.stderr
    status_json = run_mc("status", "--session", SESSION, "--json")
    status_text = run_mc("status", "--session", SESSION)
    doctor = run_mc("doctor", "--json")
    assert status_json.returncode == 0 and status_text.returncode == 0
    failure = json.loads(status_json.stdout)["data"]["historian"]["last_failure"]
    assert failure["class"] == "auth" and "invalid credential" in failure["message"]  # shown, the key redacted
    seen = [wrapup.stdout.decode(), wrapup.stderr.decode(), status_json.stdout.decode(), status_text.stdout.decode(),
            status_text.stderr.decode(), doctor.stdout.decode(), doctor.stderr.decode(), *_everything_written()]
    leaks = [text[max(0, text.find(VALUE) - 80):text.find(VALUE) + 40] for text in seen if VALUE in text]
    assert leaks == []


def test_stored_text_written_before_the_key_was_known_is_redacted_on_show(isolated_dirs):
    """A value stored unredacted (by an older mc, or a process that never read the key) is still hidden."""
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text(
        f'[embedding]\nprovider = "openai-compatible"\napi_key_env = "{ENV}"\n', encoding="utf-8")
    _store_session()
    conn = open_db()
    try:
        pk = conn.execute("SELECT id FROM sessions WHERE session_id = ?", (SESSION,)).fetchone()[0]
        conn.execute("INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?, ?, ?, 0)",
                     (pk, "historian_failure", json.dumps({"class": "auth", "provider": "openai", "at": 1,
                                                           "message": f"bad key {VALUE}", "attempts": 1})))
    finally:
        conn.close()
    status_json = run_mc("status", "--session", SESSION, "--json")
    status_text = run_mc("status", "--session", SESSION)
    assert status_json.returncode == 0, status_json.stderr
    assert VALUE not in status_json.stdout.decode() and VALUE not in status_text.stdout.decode()


def test_read_key_registers_the_value_for_redaction(monkeypatch):
    from magic_context.llm.base import read_key

    monkeypatch.setenv("SOME_CREDS_VAR", "zz-opaque-value-123456")
    assert read_key("openai", "SOME_CREDS_VAR", "historian.openai") == "zz-opaque-value-123456"
    assert log.redact("echo zz-opaque-value-123456 back") == f"echo {log.REDACTED} back"


def test_every_api_key_env_of_the_config_model_is_found():
    from magic_context.config.model import MCConfig
    from magic_context.config.secrets import key_env_names

    config = MCConfig.model_validate({"embedding": {"api_key_env": "EMBED_CREDS"},
                                      "historian": {"openai": {"api_key_env": ENV}}})
    names = key_env_names(config)
    assert {"EMBED_CREDS", ENV, "ANTHROPIC_API_KEY"} <= set(names)
    assert len(names) == len(set(names))


def test_redact_data_reaches_nested_strings_and_keeps_keys():
    log.register_secret(VALUE)
    data = {"a": [f"x {VALUE}", {"b": VALUE, "n": 3}], VALUE[:3]: None}
    assert log.redact_data(data) == {"a": [f"x {log.REDACTED}", {"b": log.REDACTED, "n": 3}], VALUE[:3]: None}
