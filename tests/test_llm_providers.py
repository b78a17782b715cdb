"""Historian providers against a real HTTP server on 127.0.0.1 (tests/fake_llm_server.py) and real
subprocesses: wire formats, keys from env, retries, timeouts, error classes, the repair + fallback chain."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer, Reply, empty, error, malformed, ok, slow

from magic_context.config.model import MCConfig
from magic_context.llm import (
    AnthropicProvider,
    ChainExhausted,
    CommandProvider,
    Completion,
    HttpSettings,
    OpenAIProvider,
    Provider,
    ProviderAuthError,
    ProviderCommandError,
    ProviderConfigError,
    ProviderEmpty,
    ProviderError,
    ProviderHTTPError,
    ProviderParseError,
    ProviderTimeout,
    build_chain,
    complete_with_chain,
)
from magic_context.llm.base import retry_after_s

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefghij"
SYSTEM = "You are the historian."
PROMPT = "Summarize: the user asked for a fix."


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's proxy settings must not reroute requests meant for 127.0.0.1."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sleeps() -> list[float]:
    return []


def historian(server: FakeLLMServer, **overrides: Any) -> Any:
    section: dict[str, Any] = {
        "provider": "openai",
        "fallback": ["extractive"],
        "openai": {"base_url": server.openai_base_url, "api_key_env": "MC_TEST_OPENAI_KEY", "model": "gpt-test"},
        "anthropic": {"base_url": server.url, "api_key_env": "MC_TEST_ANTHROPIC_KEY", "model": "claude-test"},
    }
    section.update(overrides)
    return MCConfig.model_validate({"historian": section}).historian


def openai(server: FakeLLMServer, sleeps: list[float], **overrides: Any) -> OpenAIProvider:
    return OpenAIProvider.from_config(historian(server, **overrides), sleep=sleeps.append)


def anthropic(server: FakeLLMServer, sleeps: list[float], **overrides: Any) -> AnthropicProvider:
    return AnthropicProvider.from_config(historian(server, **overrides), sleep=sleeps.append)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MC_TEST_OPENAI_KEY", OPENAI_KEY)
    monkeypatch.setenv("MC_TEST_ANTHROPIC_KEY", ANTHROPIC_KEY)


# --- success and wire formats -------------------------------------------------------------------------


def test_openai_success_matches_wire_format(server, sleeps, monkeypatch):
    provider = openai(server, sleeps)
    monkeypatch.setenv("MC_TEST_OPENAI_KEY", OPENAI_KEY)  # read at call time, not at construction
    server.script(["the summary"])
    result = provider.complete(SYSTEM, PROMPT)
    assert isinstance(provider, Provider)
    assert isinstance(result, Completion)
    assert (result.text, result.provider, result.model, result.stop_reason) == ("the summary", "openai", "gpt-test",
                                                                                "stop")
    assert result.usage is not None and result.usage["completion_tokens"] == 2
    assert result.ms >= 0
    [req] = server.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert req.headers["content-type"] == "application/json"
    assert req.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        "max_tokens": 8000,
        "temperature": 0.2,
    }
    assert sleeps == []


def test_openai_without_key_env_sends_no_authorization(server, sleeps, keys):
    provider = openai(server, sleeps, openai={"base_url": server.openai_base_url, "api_key_env": None,
                                              "model": "llama3"})
    server.script(["local answer"])
    assert provider.complete(SYSTEM, PROMPT, max_tokens=300).text == "local answer"
    [req] = server.requests
    assert "authorization" not in req.headers
    assert req.body["max_tokens"] == 300
    assert req.body["model"] == "llama3"


def test_anthropic_success_matches_wire_format(server, sleeps, keys):
    server.script([ok("compartment text", usage={"input_tokens": 12, "output_tokens": 2})])
    result = anthropic(server, sleeps, temperature=0.0).complete(SYSTEM, PROMPT, max_tokens=1234)
    assert (result.text, result.provider, result.model, result.stop_reason) == (
        "compartment text", "anthropic", "claude-test", "end_turn")
    assert result.usage == {"input_tokens": 12, "output_tokens": 2}
    [req] = server.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == ANTHROPIC_KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.headers["content-type"] == "application/json"
    assert "authorization" not in req.headers
    assert req.body == {
        "model": "claude-test",
        "max_tokens": 1234,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0.0,
    }


def test_anthropic_joins_text_blocks_and_skips_others(server, sleeps, keys):
    body = {"type": "message", "model": "claude-test", "stop_reason": "end_turn", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "x"},
        {"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}]}
    server.script([Reply(json_body=body)])
    result = anthropic(server, sleeps).complete(SYSTEM, PROMPT)
    assert result.text == "part one, part two"
    assert result.usage is None


# --- keys and auth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [openai, anthropic])
def test_missing_key_env_is_auth_with_fix_and_sends_nothing(server, sleeps, monkeypatch, make):
    monkeypatch.delenv("MC_TEST_OPENAI_KEY", raising=False)
    monkeypatch.delenv("MC_TEST_ANTHROPIC_KEY", raising=False)
    with pytest.raises(ProviderAuthError) as info:
        make(server, sleeps).complete(SYSTEM, PROMPT)
    assert info.value.kind == "auth"
    assert info.value.fix is not None and info.value.fix.startswith("export MC_TEST_")
    assert "is not set" in info.value.one_line()
    assert server.requests == []


@pytest.mark.parametrize("status", [401, 403])
def test_401_403_is_auth_without_retry(server, sleeps, keys, status):
    server.script([error(status, message=f"invalid x-api-key {OPENAI_KEY}"), "never served"])
    with pytest.raises(ProviderAuthError) as info:
        openai(server, sleeps).complete(SYSTEM, PROMPT)
    assert info.value.status == status
    assert len(server.requests) == 1 and sleeps == []
    assert OPENAI_KEY not in info.value.one_line()  # the server echoed the key; the message is redacted
    assert "MC_TEST_OPENAI_KEY" in (info.value.fix or "")


def test_other_4xx_is_http_without_retry(server, sleeps, keys):
    server.script([error(400, message="prompt is too long"), "never served"])
    with pytest.raises(ProviderHTTPError) as info:
        anthropic(server, sleeps).complete(SYSTEM, PROMPT)
    assert info.value.kind == "http" and info.value.status == 400
    assert "prompt is too long" in info.value.one_line()
    assert PROMPT not in info.value.one_line()
    assert len(server.requests) == 1 and sleeps == []


# --- retries ---------------------------------------------------------------------------------------------


def test_429_honors_retry_after_then_succeeds(server, sleeps, keys):
    server.script([error(429, retry_after="2"), "after the wait"])
    assert openai(server, sleeps).complete(SYSTEM, PROMPT).text == "after the wait"
    assert len(server.requests) == 2
    assert sleeps == [2.0]


def test_retry_after_is_capped(server, sleeps, keys):
    server.script([error(529, retry_after="3600"), "ok"])
    assert anthropic(server, sleeps).complete(SYSTEM, PROMPT).text == "ok"
    assert sleeps == [30.0]


def test_500_twice_then_success_backs_off_exponentially(server, sleeps, keys):
    server.script([error(500), error(503), "third time"])
    assert anthropic(server, sleeps, max_retries=2).complete(SYSTEM, PROMPT).text == "third time"
    assert len(server.requests) == 3
    assert sleeps == [0.5, 1.0]
    assert server.requests[0].body == server.requests[2].body


def test_5xx_past_max_retries_is_http(server, sleeps, keys):
    server.script([error(500), error(502), "never served"])
    with pytest.raises(ProviderHTTPError) as info:
        openai(server, sleeps, max_retries=1).complete(SYSTEM, PROMPT)
    assert info.value.status == 502
    assert len(server.requests) == 2 and sleeps == [0.5]


def test_timeout_is_classified_timeout(server, sleeps, keys):
    provider = OpenAIProvider(base_url=server.openai_base_url, api_key_env="MC_TEST_OPENAI_KEY", model="m",
                              max_tokens=100, temperature=None,
                              settings=HttpSettings(timeout_s=0.3, max_retries=0, sleep=sleeps.append))
    server.script([slow(1.0)])
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        provider.complete(SYSTEM, PROMPT)
    assert time.monotonic() - started < 0.9
    assert info.value.kind == "timeout"
    assert len(server.requests) == 1
    assert "temperature" not in server.requests[0].body


def test_timeout_is_retried(server, sleeps, keys):
    provider = AnthropicProvider(base_url=server.url, api_key_env="MC_TEST_ANTHROPIC_KEY", model="m",
                                 max_tokens=100, temperature=0.2,
                                 settings=HttpSettings(timeout_s=0.3, max_retries=1, sleep=sleeps.append))
    server.script([slow(1.0), "on time"])
    assert provider.complete(SYSTEM, PROMPT).text == "on time"
    assert len(server.requests) == 2 and sleeps == [0.5]


def test_connection_refused_is_retried_then_http(sleeps, keys):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, model="m",
                              max_tokens=100, temperature=None,
                              settings=HttpSettings(timeout_s=2, max_retries=2, sleep=sleeps.append))
    with pytest.raises(ProviderHTTPError) as info:
        provider.complete(SYSTEM, PROMPT)
    assert "connection failed" in info.value.one_line()
    assert sleeps == [0.5, 1.0]


def test_retry_after_parsing():
    assert retry_after_s("1.5", 30) == 1.5
    assert retry_after_s("-3", 30) == 0.0
    assert retry_after_s("soon", 30) is None
    assert retry_after_s(None, 30) is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", 30) == 0.0  # in the past
    assert retry_after_s("Fri, 01 Jan 2100 00:00:00 GMT", 30) == 30


# --- bad answers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [openai, anthropic])
def test_malformed_json_is_parse_without_retry(server, sleeps, keys, make):
    server.script([malformed(), "never served"])
    with pytest.raises(ProviderParseError) as info:
        make(server, sleeps).complete(SYSTEM, PROMPT)
    assert info.value.kind == "parse"
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", [openai, anthropic])
def test_empty_content_is_empty(server, sleeps, keys, make):
    server.script([empty()])
    with pytest.raises(ProviderEmpty) as info:
        make(server, sleeps).complete(SYSTEM, PROMPT)
    assert info.value.kind == "empty"


def test_missing_model_is_config_error(server, sleeps, keys):
    provider = openai(server, sleeps, openai={"base_url": server.openai_base_url, "api_key_env": None})
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(SYSTEM, PROMPT)
    assert "historian.openai.model" in info.value.one_line()
    assert server.requests == []


# --- the chain ---------------------------------------------------------------------------------------------


def validate_json(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"output is not JSON: {exc.msg}") from exc
    if "summary" not in data:
        raise ValueError("missing key 'summary'")
    return data


def test_invalid_then_repaired(server, sleeps, keys):
    server.script(["Sure! Here it is: {summary", '{"summary": "fixed"}'])
    chain = build_chain(historian(server, fallback=[]), sleep=sleeps.append)
    value, attempts = complete_with_chain(chain, SYSTEM, PROMPT, validate_json)
    assert value == {"summary": "fixed"}
    assert [(a.provider, a.kind, a.repair) for a in attempts] == [("openai", "invalid", False),
                                                                  ("openai", "ok", True)]
    assert "output is not JSON" in (attempts[0].error or "")
    first, second = server.requests
    assert first.prompt == PROMPT
    assert second.system == SYSTEM
    assert PROMPT in second.prompt  # built from the original prompt,
    assert "output is not JSON" in second.prompt  # the validation error,
    assert "Sure! Here it is: {summary" in second.prompt  # and the previous output


def test_custom_repair_prompt(server, sleeps, keys):
    server.script(["nope", '{"summary": 1}'])
    chain = build_chain(historian(server, fallback=[]), sleep=sleeps.append)
    value, _ = complete_with_chain(chain, SYSTEM, PROMPT, validate_json,
                                   lambda err, prev: f"REPAIR<{err}><{prev}>")
    assert value == {"summary": 1}
    assert server.requests[1].prompt.startswith("REPAIR<output is not JSON") and "<nope>" in server.requests[1].prompt


def test_chain_falls_back_from_failing_openai_to_anthropic(server, sleeps, keys):
    server.script([error(500), error(500), error(500), '{"summary": "from anthropic"}'])
    chain = build_chain(historian(server, provider="openai", fallback=["anthropic", "openai", "extractive"]),
                        sleep=sleeps.append)
    assert [p.name for p in chain] == ["openai", "anthropic"]
    value, attempts = complete_with_chain(chain, SYSTEM, PROMPT, validate_json)
    assert value == {"summary": "from anthropic"}
    assert [(a.provider, a.kind) for a in attempts] == [("openai", "http"), ("anthropic", "ok")]
    assert [r.wire for r in server.requests] == ["openai"] * 3 + ["anthropic"]


def test_invalid_twice_moves_on_and_exhaustion_lists_classes(server, sleeps, keys, monkeypatch):
    monkeypatch.delenv("MC_TEST_ANTHROPIC_KEY")
    server.script(["bad", "still bad"])
    chain = build_chain(historian(server, fallback=["anthropic"]), sleep=sleeps.append)
    with pytest.raises(ChainExhausted) as info:
        complete_with_chain(chain, SYSTEM, PROMPT, validate_json)
    assert [(a.provider, a.kind, a.repair) for a in info.value.attempts] == [
        ("openai", "invalid", False), ("openai", "invalid", True), ("anthropic", "auth", False)]
    line = info.value.one_line()
    assert "openai: invalid" in line and "openai (repair): invalid" in line and "anthropic: auth" in line
    assert isinstance(info.value, ProviderError) and info.value.kind == "exhausted"
    assert len(server.requests) == 2


class _Extractive:
    name = "extractive"
    model = None

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        self.calls.append((system, prompt))
        return Completion(text='{"summary": "extracted"}', provider=self.name, model="", usage=None, ms=0)


class _Broken:
    name = "broken"

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        raise KeyError("bug")


def test_build_chain_extractive_object_factory_or_skipped(server):
    hist = historian(server, provider="anthropic", fallback=["extractive", "anthropic", "command"])
    assert [p.name for p in build_chain(hist)] == ["anthropic", "command"]
    extractive = _Extractive()
    assert build_chain(hist, extractive=extractive)[1] is extractive
    assert isinstance(build_chain(hist, extractive=_Extractive)[1], _Extractive)
    assert isinstance(build_chain(hist, extractive=lambda: extractive)[1], _Extractive)


def test_provider_bug_is_recorded_and_chain_continues():
    extractive = _Extractive()
    value, attempts = complete_with_chain([_Broken(), extractive], SYSTEM, PROMPT, validate_json)
    assert value == {"summary": "extracted"}
    assert [(a.provider, a.kind) for a in attempts] == [("broken", "internal"), ("extractive", "ok")]
    assert "KeyError" in (attempts[0].error or "")


def test_empty_chain_raises_exhausted():
    with pytest.raises(ChainExhausted, match="no historian provider"):
        complete_with_chain([], SYSTEM, PROMPT, validate_json)


# --- the command provider ------------------------------------------------------------------------------


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_command_echo_reads_system_blank_line_prompt(tmp_path):
    argv = script(tmp_path, "echo", """
        import sys
        data = sys.stdin.read()
        sys.stdout.write("ANSWER:" + repr(data))
    """)
    result = CommandProvider(argv=argv, timeout_s=10).complete(SYSTEM, PROMPT)
    assert result.text == "ANSWER:" + repr(f"{SYSTEM}\n\n{PROMPT}")
    assert (result.provider, result.model, result.usage) == ("command", Path(sys.executable).name, None)


def test_command_from_config_in_chain(tmp_path, server):
    argv = script(tmp_path, "json", 'import sys; sys.stdin.read(); print(\'{"summary": "cli"}\')')
    hist = historian(server, provider="command", fallback=[], command={"argv": argv, "timeout_ms": 5000})
    [provider] = build_chain(hist)
    assert provider.timeout_s == 5.0
    value, attempts = complete_with_chain([provider], SYSTEM, PROMPT, validate_json)
    assert value == {"summary": "cli"} and attempts[0].provider == "command"


def test_command_failure_reports_first_stderr_line_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MC_TEST_OPENAI_KEY", OPENAI_KEY)
    argv = script(tmp_path, "fail", f"""
        import sys
        sys.stdin.read()
        sys.stderr.write("\\nerror: bad key {OPENAI_KEY}\\nsecond line\\n")
        sys.exit(3)
    """)
    with pytest.raises(ProviderCommandError) as info:
        CommandProvider(argv=argv, timeout_s=10).complete(SYSTEM, PROMPT)
    line = info.value.one_line()
    assert info.value.kind == "command"
    assert "status 3" in line and "error: bad key [REDACTED]" in line
    assert OPENAI_KEY not in line and "second line" not in line and PROMPT not in line


def test_command_timeout_kills_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    argv = script(tmp_path, "sleepy", f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        CommandProvider(argv=argv, timeout_s=0.5).complete(SYSTEM, PROMPT)
    assert time.monotonic() - started < 5
    assert info.value.kind == "timeout"
    child = int(pid_file.read_text())
    for _ in range(50):  # the grandchild was killed with the group (it may linger briefly as a zombie)
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0); it is dead for our purposes
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_command_empty_output_is_empty(tmp_path):
    argv = script(tmp_path, "quiet", "import sys; sys.stdin.read(); print('   ')")
    with pytest.raises(ProviderEmpty):
        CommandProvider(argv=argv, timeout_s=10).complete(SYSTEM, PROMPT)


def test_command_missing_program_and_empty_argv(tmp_path):
    with pytest.raises(ProviderCommandError, match="cannot run"):
        CommandProvider(argv=[str(tmp_path / "no-such-tool")], timeout_s=10).complete(SYSTEM, PROMPT)
    with pytest.raises(ProviderConfigError):
        CommandProvider(argv=[], timeout_s=10).complete(SYSTEM, PROMPT)
