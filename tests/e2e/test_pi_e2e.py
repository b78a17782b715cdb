"""Pi (the real, pinned client) with mc's extension installed by `mc setup`, offline against the fake provider.

Pi hands the `context` event a fresh copy of its own messages on every call and keeps none of the rewrite,
so each call's request is mc's replay of its stored decisions — the prefix checks below prove it holds,
within one process and across a second process continuing the session (`pi -c`)."""

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
CONTEXT_LIMIT = 180000  # not mc's default: the status check proves the extension passed Pi's window
PROVIDERS = {"anthropic": "fake", "openai": "fakeoai"}


def write_models(env: dict[str, str], server: FakeLLMServer) -> None:
    """Pi's models.json: one provider per API, both at the fake (no /v1 for Anthropic: the SDK adds it)."""
    models = [{"id": "fake-model", "contextWindow": CONTEXT_LIMIT, "maxTokens": 8192}]
    providers = {"fake": {"baseUrl": server.url, "api": "anthropic-messages", "apiKey": "dummy", "models": models},
                 "fakeoai": {"baseUrl": server.openai_base_url, "api": "openai-completions", "apiKey": "dummy",
                             "models": models}}
    Path(env["PI_CODING_AGENT_DIR"], "models.json").write_text(json.dumps({"providers": providers}))


def pi(project: Path, env: dict[str, str], api: str, prompt: str, *flags: str) -> h.Run:
    client = clients.require("pi")
    return h.run_client([str(client.path), "-p", *flags, "--provider", PROVIDERS[api], "--model", "fake-model",
                         prompt], cwd=project, env=env)


def latest_session(env: dict[str, str]) -> str:
    proc = h.mc("status", "--latest", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]["session"]["session_id"]


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_pi_runs_every_call_through_mc(api, project, env, fake_provider, isolated_dirs):
    clients.require("pi")
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("protected_tags = 1\n")  # so the model may drop §1§ after one tool call
    write_models(env, fake_provider)
    installed = h.setup("pi", project, env)
    assert installed["changed"]
    fake_provider.script([], default=tool_sequence([("bash", {"command": "echo hi-from-tool"}),
                                                    ("ctx_reduce", {"drop": "1"})], FINAL))

    run = pi(project, env, api, "Run echo via bash, drop tag 1, then say done.")

    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    calls = h.main_requests(fake_provider.requests)
    assert len(calls) == 3
    for call in calls:
        h.assert_mc_in_the_loop(call)
        assert "ctx_reduce" in call.tool_names
        assert "## Magic Context" in h.text_of(call)  # guidance swapped into the payload's system prompt
    assert "hi-from-tool" in h.messages_text(calls[1])
    assert "Queued drop of §1§" in h.messages_text(calls[2])
    h.assert_prefix_kept(calls[0], calls[1])
    h.assert_prefix_kept(calls[1], calls[2])
    session_id = latest_session(env)
    data = h.assert_session_stored(session_id, "pi", env, passes=3)
    assert data["context"]["limit_tokens"] == CONTEXT_LIMIT
    assert data["session"]["model"] == f"{PROVIDERS[api]}/fake-model"
    pi_files = [p for p in Path(env["PI_CODING_AGENT_DIR"]).rglob("*.jsonl") if session_id in p.read_text()]
    assert pi_files, "mc's session id is not Pi's (ctx.sessionManager.getSessionId())"

    # A second process continues the session from Pi's own (untagged) history: mc replays its decisions.
    fake_provider.clear()
    again = pi(project, env, api, "Say done again.", "-c")
    assert again.returncode == 0, again.explain()
    resumed = h.main_requests(fake_provider.requests)
    assert len(resumed) == 1
    h.assert_prefix_kept(calls[2], resumed[0])
    assert latest_session(env) == session_id

    removed = h.mc("setup", "--harness", "pi", "--project", str(project), "--uninstall", "--yes", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not (project / ".pi").exists()


@pytest.mark.parametrize("kind", h.FAILING_MC)
def test_pi_completes_when_mc_fails(kind, project, env, fake_provider, tmp_path):
    clients.require("pi")
    write_models(env, fake_provider)
    h.setup("pi", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi-from-tool"}, FINAL))

    run = pi(project, h.failing_mc_env(env, kind, tmp_path), "anthropic", "Run echo via bash.")

    h.assert_completed_on_its_own(run, fake_provider.requests, FINAL, "hi-from-tool")
    assert run.stderr.count("magic-context: ") == 1, run.stderr  # logged once, not per call


def test_pi_context_emergency_stops_the_call(project, env, fake_provider, tmp_path):
    clients.require("pi")
    write_models(env, fake_provider)
    h.setup("pi", project, env)
    fake_provider.script([], default=tool_round("bash", {"command": "echo hi"}, FINAL))

    run = pi(project, dict(env, MAGIC_CONTEXT_MC=str(stub_mc(tmp_path, "emergency"))), "anthropic", "Say hi.")

    assert EMERGENCY_LINE in run.stderr, run.explain()
    assert fake_provider.requests == []  # the over-limit call was never sent
    assert FINAL not in run.stdout
