"""What the proxy learns from a request about where it goes and whom it belongs to: the installer's
`x-mc-upstream` base URL, the project the client says it works in, and Claude Code subagents, which keep
a session of their own (`<session>/agent-<id>`) so they never disturb the parent's history."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fake_llm_server import FakeLLMServer, Reply
from proxy_helpers import ANTHROPIC_HEADERS, anthropic_body, pass_reports, proxy_in_thread, session_ids, settings_for

from magic_context.proxy import routes

FIRST = [{"role": "user", "content": "list the files in src/"}]
ANSWER = "src holds main.py and util.py"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens


@pytest.fixture
def fake():
    with FakeLLMServer() as server:
        yield server


def _post(url: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(url + "/v1/messages?beta=true", content=json.dumps(body),
                      headers={**ANTHROPIC_HEADERS, **(headers or {})}, timeout=30)


def test_agent_session_names() -> None:
    assert routes.agent_session("s1", {}) == "s1"
    assert routes.agent_session("s1", {"x-claude-code-agent-id": "a0e2"}) == "s1/agent-a0e2"
    assert routes.agent_session(None, {"x-claude-code-agent-id": "a0e2"}) is None  # the fingerprint decides
    odd = routes.agent_session("s1", {"x-claude-code-agent-id": "has spaces/and slashes"})
    assert odd is not None and odd.startswith("s1/agent-") and " " not in odd and odd.count("/") == 1
    # Labelled side requests (seen in the 2.1.332 binary, not in an offline -p run) are filed apart too.
    assert routes.agent_session("s1", {"x-claude-code-auxiliary-type": "extract_memories"}) == "s1/aux-extract_memories"
    assert routes.agent_session("s1", {"x-claude-code-request-class": "compaction"}) == "s1/compaction"
    assert routes.agent_session("s1", {"x-claude-code-request-class": "main"}) == "s1"
    assert routes.agent_session("s1", {"x-claude-code-agent-id": "a1", "x-claude-code-request-class": "subagent"}) \
        == "s1/agent-a1"


def test_upstream_override_takes_only_http_urls() -> None:
    assert routes.upstream_override({"x-mc-upstream": "https://gw.example.com/anthropic/"}) == \
        "https://gw.example.com/anthropic"
    assert routes.upstream_override({"x-mc-upstream": "file:///etc/passwd"}) is None
    assert routes.upstream_override({"x-mc-upstream": ""}) is None
    assert routes.upstream_override({}) is None


def test_project_dir_from_what_the_client_declares(tmp_path: Path) -> None:
    claude = {"messages": [{"role": "user", "content": "hi"},
                           {"role": "system", "content": f"# Environment\n - Primary working directory: {tmp_path}\n"}]}
    codex_item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": f"<environment_context>\n  <cwd>{tmp_path}</cwd>\n</environment_context>"}]}
    metadata = json.dumps({"workspaces": {str(tmp_path): {"has_changes": False}}})
    assert routes.project_dir({}, "/default", claude) == str(tmp_path)
    assert routes.project_dir({}, "/default", {"input": [codex_item]}) == str(tmp_path)
    assert routes.project_dir({"x-codex-turn-metadata": metadata}, "/default", {}) == str(tmp_path)
    assert routes.project_dir({"x-mc-project-dir": "/from/header"}, "/default", claude) == "/from/header"
    missing = {"messages": [{"role": "system", "content": "Primary working directory: /no/such/dir"}]}
    assert routes.project_dir({}, "/default", missing) == "/default"  # a directory that is not there: ignored
    assert routes.project_dir({"x-codex-turn-metadata": "not json"}, "/default", None) == "/default"


def test_x_mc_upstream_sends_the_request_to_the_clients_own_provider(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    with proxy_in_thread(settings_for(UNREACHABLE)) as url:
        answer = _post(url, anthropic_body(FIRST, stream=False), {"x-mc-upstream": fake.url, "x-session-id": "u1"})
        count = httpx.post(url + "/v1/messages/count_tokens", content=b"{}", timeout=30,
                           headers={**ANTHROPIC_HEADERS, "x-mc-upstream": fake.url})
        lost = _post(url, anthropic_body(FIRST, stream=False), {"x-session-id": "u2"})
    assert answer.status_code == 200 and ANSWER in answer.text
    assert count.status_code != 502  # pass-through routes follow the header too
    assert [r.path.split("?")[0] for r in fake.requests] == ["/v1/messages", "/v1/messages/count_tokens"]
    assert all("x-mc-upstream" not in r.headers for r in fake.requests)
    assert lost.status_code == 502 and UNREACHABLE in lost.json()["error"]["message"]


def test_a_subagent_gets_its_own_session_and_leaves_the_parents_prefix_alone(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    parent_second = [*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "and tests/?"}]
    child = [{"role": "user", "content": "subtask: count the lines of main.py"}]
    session = {"x-claude-code-session-id": "cc-parent"}
    agent = {**session, "x-claude-code-agent-id": "a7f3e9"}
    with proxy_in_thread(settings_for(fake.url)) as url:
        for body, headers in ((FIRST, session), (child, agent), (parent_second, session),
                              ([*child, {"role": "assistant", "content": "42"}, {"role": "user", "content": "ok"}],
                               agent)):
            assert _post(url, anthropic_body(body, stream=False), headers).status_code == 200
    assert session_ids() == {"cc-parent", "cc-parent/agent-a7f3e9"}
    parent = pass_reports("cc-parent")
    assert [r["pass"] for r in parent] == ["fold", "defer"] and not parent[1]["bust"]
    first, second = fake.requests[0].raw.decode(), fake.requests[2].raw.decode()
    start = first.index('"messages":') + len('"messages":')
    _, end = json.JSONDecoder().raw_decode(first, start)
    assert second.startswith(first[:end - 1])  # the parent's next request extends its first, byte for byte
    assert "count the lines" not in json.dumps(fake.requests[2].body["messages"])  # no subagent text in the parent
    assert [r["pass"] for r in pass_reports("cc-parent/agent-a7f3e9")] == ["fold", "defer"]
