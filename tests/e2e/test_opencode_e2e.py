"""OpenCode (the real, pinned client) with mc's plugin installed by `mc setup`, offline against the fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, tool_round, tool_sequence

from e2e import clients
from e2e import harness as h
from e2e.stubs import EMERGENCY_LINE, stub_mc

pytestmark = pytest.mark.e2e

FINAL = "All done: FAKE-PROVIDER-FINAL-ANSWER"
CONTEXT_LIMIT = 150000  # not mc's default: the status check proves the plugin passed OpenCode's limit
NPM = {"anthropic": "@ai-sdk/anthropic", "openai": "@ai-sdk/openai-compatible"}


def write_config(project: Path, server: FakeLLMServer, api: str) -> bytes:
    """The user's own opencode.json (JSONC, with a comment), pointing OpenCode at the fake provider."""
    provider = {"npm": NPM[api], "name": "Fake", "options": {"baseURL": server.openai_base_url, "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake", "tool_call": True,
                                          "limit": {"context": CONTEXT_LIMIT, "output": 8192}}}}
    body = json.dumps({"$schema": "https://opencode.ai/config.json", "provider": {"fake": provider},
                       "model": "fake/fake-model", "small_model": "fake/fake-model", "autoupdate": False,
                       "share": "disabled"}, indent=2)
    text = "// the user's own OpenCode settings\n" + body + "\n"
    (project / "opencode.json").write_text(text)
    return text.encode()


def opencode(project: Path, env: dict[str, str], *words: str) -> h.Run:
    client = clients.require("opencode")
    return h.run_client([str(client.path), "run", *words], cwd=project, env=env)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_opencode_runs_every_call_through_mc(api, project, env, fake_provider, isolated_dirs):
    clients.require("opencode")
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("protected_tags = 1\n")  # so the model may drop §1§ after one tool call
    original = write_config(project, fake_provider, api)
    installed = h.setup("opencode", project, env)
    assert installed["changed"]
    fake_provider.script([], default=tool_sequence(
        [("bash", {"command": "echo hi-from-tool", "description": "Echo"}), ("ctx_reduce", {"drop": "1"})], FINAL))

    run = opencode(project, env, "Run", "echo", "via", "bash,", "drop", "tag", "1,", "then", "say", "done.")

    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    calls = h.main_requests(fake_provider.requests)
    assert len(calls) == 3, [r.path for r in fake_provider.requests]
    for call in calls:
        h.assert_mc_in_the_loop(call)
        assert "ctx_reduce" in call.tool_names
        assert "## Magic Context" in h.text_of(call)  # the guidance reached the system prompt
    assert calls[1].has_tool_result and "hi-from-tool" in h.text_of(calls[1])
    assert "Queued drop of §1§" in h.text_of(calls[2])  # ctx_reduce ran `mc reduce`; its text came back
    h.assert_prefix_kept(calls[0], calls[1])  # defer passes: the cached prefix replays byte for byte
    h.assert_prefix_kept(calls[1], calls[2])
    session_id = calls[0].headers["x-session-affinity"]
    data = h.assert_session_stored(session_id, "opencode", env, passes=3)
    assert data["pending_drops"] == [1]
    assert data["context"]["limit_tokens"] == CONTEXT_LIMIT
    assert data["session"]["model"] == "fake/fake-model"  # queued by the tool, applied on the next busting pass

    removed = h.mc("setup", "--harness", "opencode", "--project", str(project), "--uninstall", "--yes", env=env)
    assert removed.returncode == 0, removed.stderr
    assert (project / "opencode.json").read_bytes() == original


@pytest.mark.parametrize("kind", h.FAILING_MC)
def test_opencode_completes_when_mc_fails(kind, project, env, fake_provider, tmp_path):
    clients.require("opencode")
    write_config(project, fake_provider, "anthropic")
    h.setup("opencode", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi-from-tool", "description": "Echo"},
                                                FINAL))

    run = opencode(project, h.failing_mc_env(env, kind, tmp_path), "Run", "echo", "via", "bash.")

    h.assert_completed_on_its_own(run, fake_provider.requests, FINAL, "hi-from-tool")


def test_opencode_context_emergency_stops_the_call(project, env, fake_provider, tmp_path):
    clients.require("opencode")
    write_config(project, fake_provider, "anthropic")
    h.setup("opencode", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi"}, FINAL))

    run = opencode(project, dict(env, MAGIC_CONTEXT_MC=str(stub_mc(tmp_path, "emergency"))), "Say", "hi.")

    assert run.returncode != 0, run.explain()
    assert EMERGENCY_LINE in run.stderr, run.explain()
    assert h.main_requests(fake_provider.requests) == []  # the over-limit call was never sent
