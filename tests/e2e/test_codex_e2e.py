"""Codex CLI (the real, pinned client) through the real `mc proxy`, offline against the fake provider.

Codex speaks only the OpenAI Responses API (`POST /v1/responses`, SSE) to a custom model provider whose
`base_url` is the proxy; the proxy runs the pass (harness `openai-responses`) and forwards to the fake.
mc's `<session-history>` head is the first user item on the wire. No `§N§` tag reaches the wire: mc
writes the visible tags only while the client offers the `ctx_reduce` tool (tagger.py), and Codex's tools
are its own; the tags are still recorded (the pass reports count them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_llm_server import RecordedRequest, tool_round

from e2e import clients
from e2e import harness as h
from e2e.proxied import assert_key_never_stored, mc_proxy, session_rows

pytestmark = pytest.mark.e2e

FINAL = "All done: FAKE-PROVIDER-FINAL-ANSWER"
API_KEY = "sk-proj-e2e-codex-client-secret-4d8b1f"
HARNESS = "openai-responses"
SHELL = ("exec_command", {"cmd": "echo hi-from-tool"})
CLIENT_TIMEOUT_S = 90
# Offline switches (real-clients.md §5): no plugin sync (github.com), no analytics (ab.chatgpt.com).
OFFLINE = "[analytics]\nenabled = false\n\n[features]\nplugins = false\n"


def user_config(base_url: str) -> str:
    """A user's own Codex config: a custom provider (here the fake itself, or the proxy), with comments."""
    return ("# my Codex settings\nmodel = \"fake-model\"  # the model I use\nmodel_provider = \"fake\"\n\n"
            "[model_providers.fake]\nname = \"Fake\"\n"
            f"base_url = \"{base_url}\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n\n" + OFFLINE)


def codex(project: Path, env: dict[str, str], prompt: str) -> h.Run:
    client = clients.require("codex")
    return h.run_client([str(client.path), "exec", "--skip-git-repo-check", prompt], cwd=project,
                        env=dict(env, FAKE_API_KEY=API_KEY), timeout=CLIENT_TIMEOUT_S)


def items(request: RecordedRequest) -> list[dict]:
    return request.body["input"]


def first_user_text(request: RecordedRequest) -> str:
    first = next(item for item in items(request) if item.get("type") == "message" and item.get("role") == "user")
    return "".join(part.get("text", "") for part in first["content"])


def assert_prefix_kept(first: RecordedRequest, second: RecordedRequest) -> None:
    """`second` repeats `first` byte for byte up to the end of its input items; instructions and tools too."""
    text = first.raw.decode("utf-8")
    start = text.index('"input":') + len('"input":')
    _, end = json.JSONDecoder().raw_decode(text, start)
    head = text[:end - 1].encode("utf-8")  # all but the closing bracket of the first request's input
    assert second.raw.startswith(head), h._first_difference(head, second.raw)
    for key in ("instructions", "tools"):
        assert first.body.get(key) == second.body.get(key), f"`{key}` changed between the two requests"


def check_run(run: h.Run, requests: list[RecordedRequest], project: Path, env: dict[str, str],
              data_dir: Path) -> str:
    """The one-tool turn completed through mc: returns the session id Codex sent."""
    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    calls = h.main_requests(requests)
    assert len(calls) == 2, [r.path for r in requests]
    for call in calls:
        assert call.path == "/v1/responses" and call.stream
        assert first_user_text(call).startswith("<session-history>"), first_user_text(call)[:200]
        assert not h.TAG.search(json.dumps(items(call), ensure_ascii=False))  # no ctx_reduce tool: no tags shown
        assert call.headers["authorization"] == f"Bearer {API_KEY}"
        assert not any(name.startswith("x-mc-") for name in call.headers)
    assert any(item.get("type") == "function_call_output" and "hi-from-tool" in item.get("output", "")
               for item in items(calls[1]))
    assert_prefix_kept(calls[0], calls[1])

    session_id = calls[0].headers["session-id"]
    assert calls[1].headers["session-id"] == session_id
    data = h.assert_session_stored(session_id, HARNESS, env, passes=2)
    assert data["passes"][-1]["tags"] > 0  # tags recorded, though not shown
    assert data["context"]["usage_source"] == "provider"  # the proxy recorded the streamed usage
    # The project comes from Codex's own request (its <environment_context> cwd): its config is global.
    assert session_rows(env) == [(HARNESS, session_id, str(project))]
    assert_key_never_stored(data_dir, API_KEY)
    return session_id


def test_codex_runs_through_mc_proxy(project, env, fake_provider, isolated_dirs):
    clients.require("codex")
    fake_provider.script([], default=tool_round(*SHELL, FINAL))

    with mc_proxy(env, "--upstream-openai", fake_provider.openai_base_url) as proxy:
        Path(env["CODEX_HOME"], "config.toml").write_text(user_config(f"{proxy.url}/v1"))
        run = codex(project, env, "Run echo in the shell, then say done.")
    assert run.seconds < 60, run.explain()
    check_run(run, fake_provider.requests, project, env, isolated_dirs["data"])
    assert API_KEY.encode() not in proxy.stderr


def test_mc_setup_routes_codex_through_the_proxy(project, env, fake_provider, isolated_dirs):
    """`mc setup --harness codex` alone makes the real client go through the proxy: the user's provider points
    at the fake; the proxy, started with its default upstream (unreachable offline), forwards there because
    the installed provider sends the old base_url in an `x-mc-upstream` header."""
    clients.require("codex")
    config = Path(env["CODEX_HOME"], "config.toml")
    original = user_config(fake_provider.openai_base_url).encode()
    config.write_bytes(original)
    fake_provider.script([], default=tool_round(*SHELL, FINAL))

    with mc_proxy(env) as proxy:
        proc = h.mc("setup", "--harness", "codex", "--yes", "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        (result,) = json.loads(proc.stdout)["data"]["results"]
        assert result["changed"] and result["scope"]["kind"] == "global"
        text = config.read_text()
        assert text.startswith("# my Codex settings\n") and "# the model I use" in text  # comments kept
        assert 'model_provider = "magic-context"' in text and f'base_url = "{proxy.url}/v1"' in text
        assert f'"x-mc-upstream" = "{fake_provider.openai_base_url}"' in text or \
            f'x-mc-upstream = "{fake_provider.openai_base_url}"' in text
        again = h.mc("setup", "--harness", "codex", "--yes", "--json", env=env)
        assert json.loads(again.stdout)["data"]["results"][0]["changed"] is False  # idempotent

        run = codex(project, env, "Run echo in the shell, then say done.")
        on_path = dict(env, PATH=f"{clients.require('codex').path.parent}:{env['PATH']}")
        doctor = h.mc("doctor", "--json", env=on_path, cwd=project)

    check_run(run, fake_provider.requests, project, env, isolated_dirs["data"])
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["data"]["checks"]}
    check = checks["codex_global"]
    assert check["status"] == "ok" and f"mc proxy at {proxy.url} (answering)" in check["detail"], check

    removed = h.mc("setup", "--harness", "codex", "--uninstall", "--yes", env=env)
    assert removed.returncode == 0, removed.stderr
    assert config.read_bytes() == original
