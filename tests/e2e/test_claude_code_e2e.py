"""Claude Code (the real, pinned client) through the real `mc proxy`, offline against the fake provider.

Claude Code has no hook that sees its messages: its base URL points at `mc proxy`, which runs the pass
on every `POST /v1/messages?beta=true` and forwards to the fake. What reaches the provider is mc's
rewrite: its `<session-history>` head opens the conversation. No `§N§` tag reaches the wire, and that is
right: mc writes the visible tags only while the client offers the `ctx_reduce` tool (tagger.py), and
Claude Code's tools are its own; the tags are still recorded (the pass reports count them).
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from fake_llm_server import RecordedRequest, Reply, ok, tool_call, tool_round

from e2e import clients
from e2e import harness as h
from e2e.proxied import assert_key_never_stored, mc_proxy, session_rows

pytestmark = pytest.mark.e2e

FINAL = "All done: FAKE-PROVIDER-FINAL-ANSWER"
API_KEY = "sk-ant-api03-e2e-client-secret-7f3a9c2e5b"
HARNESS = "anthropic"  # Claude Code speaks Anthropic Messages: mc files its sessions under that harness
BASH = ("Bash", {"command": "echo hi-from-tool", "description": "Echo a probe string"})
CLIENT_TIMEOUT_S = 90


def claude(project: Path, env: dict[str, str], prompt: str, *tools: str) -> h.Run:
    client = clients.require("claude")
    # The prompt goes before --allowedTools (a variadic option: it would swallow the prompt).
    return h.run_client([str(client.path), "-p", prompt, "--allowedTools", *tools], cwd=project, env=env,
                        timeout=CLIENT_TIMEOUT_S)


def client_env(env: dict[str, str], base_url: str | None) -> dict[str, str]:
    extra = {"ANTHROPIC_API_KEY": API_KEY}
    if base_url is not None:
        extra["ANTHROPIC_BASE_URL"] = base_url
    return dict(env, **extra)


def session_of(request: RecordedRequest) -> str:
    return request.headers["x-claude-code-session-id"]


def _plain(message: dict) -> dict:
    """A message without cache_control marks, one text block written as the plain string it stands for."""
    content = message["content"]
    if isinstance(content, list):
        content = [{k: v for k, v in block.items() if k != "cache_control"} for block in content]
        if len(content) == 1 and set(content[0]) == {"type", "text"} and content[0]["type"] == "text":
            content = content[0]["text"]
    return {**message, "content": content}


def assert_prefix_kept(first: RecordedRequest, second: RecordedRequest) -> None:
    """`second` repeats `first` byte for byte up to `first`'s last message; that one may differ only in the form
    Claude Code itself gives it: the last message carries the cache breakpoint, so the client writes it as a
    block list with cache_control there and as a plain string once it is older (seen in the captured bodies,
    real-clients.md §4). Both are the same prompt to the provider's cache."""
    a, b = h.CACHE_MARK.sub(b"", first.raw), h.CACHE_MARK.sub(b"", second.raw)
    last = json.dumps(first.body["messages"][-1]["role"])
    start = a.rindex(b'{"role":' + last.encode())
    assert b.startswith(a[:start]), h._first_difference(a[:start], b)
    index = len(first.body["messages"]) - 1
    assert _plain(second.body["messages"][index]) == _plain(first.body["messages"][index])
    for key in ("system", "tools"):
        assert json.loads(a).get(key) == json.loads(b).get(key), f"`{key}` changed between the two requests"


def assert_no_tags_on_the_wire(request: RecordedRequest) -> None:
    assert not h.TAG.search(h.messages_text(request)), "a §N§ tag reached the wire without ctx_reduce"


def test_claude_code_runs_through_mc_proxy(project, env, fake_provider, isolated_dirs):
    clients.require("claude")
    fake_provider.script([], default=tool_round(*BASH, FINAL))

    with mc_proxy(env, "--upstream-anthropic", fake_provider.url) as proxy:
        run = claude(project, client_env(env, proxy.url), "Run echo via bash, then say done.", "Bash")
    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    assert run.seconds < 60, run.explain()

    calls = h.main_requests(fake_provider.requests)
    assert len(calls) == 2, [r.path for r in fake_provider.requests]
    for call in calls:
        assert call.path.startswith("/v1/messages") and call.stream
        assert h.first_user_text(call).startswith("<session-history>"), h.first_user_text(call)[:200]
        assert_no_tags_on_the_wire(call)
        assert call.headers["x-api-key"] == API_KEY  # the client's own auth reached the provider untouched
        assert not any(name.startswith("x-mc-") for name in call.headers)
    assert "hi-from-tool" in h.messages_text(calls[1])
    assert_prefix_kept(calls[0], calls[1])

    session_id = session_of(calls[0])
    assert session_of(calls[1]) == session_id
    data = h.assert_session_stored(session_id, HARNESS, env, passes=2)
    assert data["passes"][-1]["tags"] > 0  # tags recorded, though not shown (no ctx_reduce tool)
    assert data["passes"][-1]["usage_source"] == "provider"  # the streamed usage was recorded by the proxy
    assert [(harness, sid) for harness, sid, _ in session_rows(env)] == [(HARNESS, session_id)]
    assert session_rows(env)[0][2] == str(project)  # read from Claude Code's "Primary working directory"
    assert_key_never_stored(isolated_dirs["data"], API_KEY)
    assert API_KEY.encode() not in proxy.stderr


def subagent_or_parent(request: RecordedRequest) -> Reply:
    """The parent delegates once to a subagent (the Agent tool); the subagent runs Bash once, then reports."""
    if request.headers.get("x-claude-code-agent-id"):
        if request.tool_result_count == 0 and "Bash" in request.tool_names:
            return tool_call(*BASH)
        return ok("SUBAGENT-REPORT: hi-from-tool seen")
    if request.tool_result_count == 0 and "Agent" in request.tool_names:
        return tool_call("Agent", {"description": "Probe", "prompt": "Run echo via bash, then report.",
                                   "subagent_type": "general-purpose"})
    return ok(FINAL)


def test_claude_code_subagent_gets_its_own_session(project, env, fake_provider, isolated_dirs):
    clients.require("claude")
    fake_provider.script([], default=subagent_or_parent)

    with mc_proxy(env, "--upstream-anthropic", fake_provider.url) as proxy:
        run = claude(project, client_env(env, proxy.url), "Ask a subagent to run echo, then say done.",
                     "Bash", "Agent")
    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()

    parent = [r for r in fake_provider.requests if r.tool_names and "x-claude-code-agent-id" not in r.headers]
    child = [r for r in fake_provider.requests if r.tool_names and "x-claude-code-agent-id" in r.headers]
    # The parent: the Agent call, its result, and (Agent runs in the background) the subagent's report.
    assert len(parent) >= 2 and len(child) == 2, [(r.headers.get("x-claude-code-agent-id"), r.tool_result_count)
                                                  for r in fake_provider.requests]
    session_id = session_of(parent[0])
    agent_id = child[0].headers["x-claude-code-agent-id"]
    assert {session_of(r) for r in fake_provider.requests} == {session_id}  # one session id for all of them
    for request in (*parent, *child):
        assert h.first_user_text(request).startswith("<session-history>")
    for before, after in pairwise(parent):
        assert_prefix_kept(before, after)  # the subagent's turns did not disturb the parent's prefix
    assert_prefix_kept(child[0], child[1])
    assert "SUBAGENT-REPORT" in h.messages_text(parent[-1])

    stored = {sid for _, sid, _ in session_rows(env)}
    assert stored == {session_id, f"{session_id}/agent-{agent_id}"}
    parent_passes = h.assert_session_stored(session_id, HARNESS, env, passes=2)["passes"]
    assert not any(p["bust"] for p in parent_passes[1:]), parent_passes
    h.assert_session_stored(f"{session_id}/agent-{agent_id}", HARNESS, env, passes=2)
    assert_key_never_stored(isolated_dirs["data"], API_KEY)


def setup(env: dict[str, str], *extra: str) -> dict:
    proc = h.mc("setup", "--harness", "claude-code", "--global", "--yes", "--json", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]["results"][0]


def test_mc_setup_routes_claude_code_through_the_proxy(project, env, fake_provider, isolated_dirs):
    """`mc setup --harness claude-code --global` alone makes the real client go through the proxy: the user's
    settings (in a throwaway HOME) named their own base URL (the fake, as a gateway would be); the proxy,
    started with its default upstream (unreachable offline), forwards there because the installer put it in
    an `x-mc-upstream` header. (Global, not project: with the base URL only in a project's settings, Claude
    Code 2.1.332 still resolves api.anthropic.com at start-up, a ~20 s stall where DNS hangs; see README.)"""
    clients.require("claude")
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps({"permissions": {"allow": ["Bash(echo:*)"]},
                           "env": {"ANTHROPIC_BASE_URL": fake_provider.url, "MY_OWN": "1"}}, indent=4).encode()
    settings.write_bytes(original)
    fake_provider.script([], default=tool_round(*BASH, FINAL))

    with mc_proxy(env, cwd=isolated_dirs["data"].parent) as proxy:
        installed = setup(env)
        assert installed["changed"] and installed["scope"]["kind"] == "global"
        configured = json.loads(settings.read_text())["env"]
        assert configured["ANTHROPIC_BASE_URL"] == proxy.url and configured["MY_OWN"] == "1"
        assert configured["ANTHROPIC_CUSTOM_HEADERS"] == f"x-mc-upstream: {fake_provider.url}"
        assert setup(env)["changed"] is False  # idempotent

        run = claude(project, client_env(env, None), "Run echo via bash, then say done.", "Bash")
        on_path = dict(env, PATH=f"{clients.require('claude').path.parent}:{env['PATH']}")
        doctor = h.mc("doctor", "--json", env=on_path, cwd=project)

    assert run.returncode == 0, run.explain()
    assert FINAL in run.stdout, run.explain()
    assert run.seconds < 30, run.explain()
    calls = h.main_requests(fake_provider.requests)
    assert len(calls) == 2
    for call in calls:
        assert h.first_user_text(call).startswith("<session-history>")
        assert not any(name.startswith("x-mc-") for name in call.headers)
    assert_prefix_kept(calls[0], calls[1])
    (row,) = session_rows(env)
    assert row[1] == session_of(calls[0]) and row[2] == str(project)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["data"]["checks"]}
    check = checks["claude-code_global"]
    assert check["status"] == "ok" and f"mc proxy at {proxy.url} (answering)" in check["detail"], check

    removed = h.mc("setup", "--harness", "claude-code", "--global", "--uninstall", "--yes", env=env)
    assert removed.returncode == 0, removed.stderr
    assert settings.read_bytes() == original
    assert_key_never_stored(isolated_dirs["data"], API_KEY)
