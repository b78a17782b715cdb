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
NPM = {"anthropic": "@ai-sdk/anthropic", "openai": "@ai-sdk/openai-compatible"}


def write_config(project: Path, server: FakeLLMServer, api: str) -> bytes:
    """The user's own opencode.json (JSONC, with a comment), pointing OpenCode at the fake provider."""
    provider = {"npm": NPM[api], "name": "Fake", "options": {"baseURL": server.openai_base_url, "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake", "tool_call": True,
                                          "limit": {"context": 200000, "output": 8192}}}}
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
    assert data["pending_drops"] == [1]  # queued by the tool, applied on the next busting pass

    removed = h.mc("setup", "--harness", "opencode", "--project", str(project), "--uninstall", "--yes", env=env)
    assert removed.returncode == 0, removed.stderr
    assert (project / "opencode.json").read_bytes() == original


def test_opencode_completes_with_a_broken_mc(project, env, fake_provider):
    clients.require("opencode")
    write_config(project, fake_provider, "anthropic")
    h.setup("opencode", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi-from-tool", "description": "Echo"},
                                                FINAL))

    run = opencode(project, dict(env, MAGIC_CONTEXT_MC="/nonexistent/bin/mc"), "Run", "echo", "via", "bash.")

    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    calls = h.main_requests(fake_provider.requests)
    assert len(calls) == 2
    for call in calls:
        h.assert_mc_absent(call)
    assert "hi-from-tool" in h.text_of(calls[1])


def test_opencode_context_emergency_stops_the_call(project, env, fake_provider, tmp_path):
    clients.require("opencode")
    write_config(project, fake_provider, "anthropic")
    h.setup("opencode", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi"}, FINAL))

    run = opencode(project, dict(env, MAGIC_CONTEXT_MC=str(stub_mc(tmp_path, "emergency"))), "Say", "hi.")

    assert run.returncode != 0, run.explain()
    assert EMERGENCY_LINE in run.stderr, run.explain()
    assert h.main_requests(fake_provider.requests) == []  # the over-limit call was never sent
