"""`mc proxy` over real HTTP: the proxy's uvicorn server on 127.0.0.1 in front of the fake upstream.

Rewriting reaches the upstream, defer passes keep the prefix byte-identical, SSE streams through
unbuffered and in order, the response usage is recorded and used by the next pass, session ids come
from each client's header, pass-through routes are untouched, garbage fails open, an emergency is
answered in the provider's shape, and the limits (body size, upstream timeout) answer clearly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import REPO
from fake_llm_server import FakeLLMServer, Reply, slow
from proxy_helpers import (
    ANTHROPIC_HEADERS,
    anthropic_body,
    anthropic_text,
    chat_body,
    pass_reports,
    proxy_in_thread,
    session_ids,
    settings_for,
    sse_events,
)

from magic_context import paths

REQUESTS = REPO.parent / "shared" / "data" / "requests"
FIRST = [{"role": "user", "content": "list the files in src/"}]
ANSWER = "src holds main.py and util.py"
USAGE = {"input_tokens": 2_000, "cache_read_input_tokens": 60_000, "cache_creation_input_tokens": 500,
         "output_tokens": 40}


@pytest.fixture
def fake():
    with FakeLLMServer() as server:
        yield server


def _post(url: str, body: dict, headers: dict | None = None, path: str = "/v1/messages?beta=true") -> httpx.Response:
    return httpx.post(url + path, content=json.dumps(body), headers={**ANTHROPIC_HEADERS, **(headers or {})},
                      timeout=30)


def test_rewrite_reaches_upstream_and_the_defer_prefix_is_byte_identical(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    with proxy_in_thread(settings_for(fake.url)) as url:
        first = _post(url, anthropic_body(FIRST, stream=False), {"x-claude-code-session-id": "s-rewrite"})
        second_messages = [*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "open it"}]
        second = _post(url, anthropic_body(second_messages, stream=False), {"x-claude-code-session-id": "s-rewrite"})
    assert first.status_code == second.status_code == 200
    assert first.json()["content"][0]["text"] == ANSWER
    sent = [r.body for r in fake.requests]
    head = sent[0]["messages"][0]["content"][0]["text"]
    assert head.startswith("<session-history>"), head
    assert sent[0]["messages"][2]["content"].startswith("§1§ ")
    assert "## Magic Context" in sent[0]["system"]
    # The second request replays the first byte for byte, then appends (a defer pass keeps the cache).
    n = len(sent[0]["messages"])
    assert orjson.dumps(sent[1]["messages"][:n]) == orjson.dumps(sent[0]["messages"])
    assert sent[1]["system"] == sent[0]["system"]
    assert [r["pass"] for r in pass_reports("s-rewrite")] == ["fold", "defer"]
    # The path and query reach the upstream as the client sent them.
    assert fake.requests[0].path == "/v1/messages?beta=true"


def test_sse_streams_through_in_order_and_unbuffered(fake) -> None:
    words = " ".join(f"w{i}" for i in range(6))
    fake.script([], default=Reply(text=words, event_delay_s=0.25))
    with proxy_in_thread(settings_for(fake.url)) as url:
        arrivals, raw = [], b""
        body = json.dumps(anthropic_body(FIRST))
        with httpx.stream("POST", url + "/v1/messages", content=body, headers=ANTHROPIC_HEADERS, timeout=30) as resp:
            assert resp.headers["content-type"] == "text/event-stream"
            for chunk in resp.iter_raw():
                arrivals.append(time.perf_counter())
                raw += chunk
    events = sse_events(raw)
    assert [name for name, _ in events] == ["message_start", "content_block_start", *["content_block_delta"] * 6,
                                            "content_block_stop", "message_delta", "message_stop"]
    assert anthropic_text(events) == words
    # 10 gaps of 0.25 s upstream: a buffering proxy would deliver everything at once at the end.
    assert len(arrivals) >= 8
    assert arrivals[-1] - arrivals[0] > 0.25 * 10 * 0.7


def test_time_to_first_byte_with_a_slow_upstream(fake) -> None:
    fake.script([], default=Reply(text="a b c", event_delay_s=1.5))
    with proxy_in_thread(settings_for(fake.url)) as url:
        _post(url, anthropic_body(FIRST, stream=False), {"x-claude-code-session-id": "warm"})  # warm the pass
        fake.script([], default=Reply(text="a b c", event_delay_s=1.5))
        started = time.perf_counter()
        body = json.dumps(anthropic_body(FIRST))
        with httpx.stream("POST", url + "/v1/messages", content=body, headers=ANTHROPIC_HEADERS, timeout=30) as resp:
            chunks = resp.iter_raw()
            first = next(chunks)
            first_at = time.perf_counter() - started
            rest = b"".join(chunks)
            done_at = time.perf_counter() - started
    assert first.startswith(b"event: message_start")
    assert first_at < 1.0 < done_at  # the first event arrives before the upstream's first pause ends
    assert sse_events(first + rest)[-1][0] == "message_stop"


@pytest.mark.parametrize("form", ["anthropic-stream", "anthropic-json", "chat-stream", "chat-json"])
def test_response_usage_is_recorded_and_used_by_the_next_pass(fake, mc, form: str) -> None:
    wire, mode = form.split("-")
    stream = mode == "stream"
    if wire == "anthropic":
        usage, path, build = USAGE, "/v1/messages", anthropic_body
        proven = USAGE["input_tokens"] + USAGE["cache_read_input_tokens"] + USAGE["cache_creation_input_tokens"] \
            + USAGE["output_tokens"]
    else:
        usage = {"prompt_tokens": 62_000, "completion_tokens": 40, "total_tokens": 62_040,
                 "prompt_tokens_details": {"cached_tokens": 60_000}}
        path, build, proven = "/v1/chat/completions", chat_body, 62_040
    extra = {"stream_options": {"include_usage": True}} if wire == "chat" and stream else {}
    session = {"x-session-id": f"usage-{form}"}
    fake.script([], default=Reply(text=ANSWER, usage=usage))
    with proxy_in_thread(settings_for(fake.url)) as url:
        first = _post(url, build(FIRST, stream=stream, **extra), session, path=path)
        assert first.status_code == 200
        follow = [*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "and util.py?"}]
        _post(url, build(follow, stream=stream, **extra), session, path=path)
    reports = pass_reports(f"usage-{form}")
    assert reports[0]["usage_source"] == "estimate"
    assert reports[1]["usage_source"] == "provider"
    assert proven <= reports[1]["usage_tokens"] < proven + 50  # + an estimate of the new user message
    if form == "anthropic-stream":  # `mc status` shows the recorded figures
        status = json.loads(mc("status", "--json", "--session", f"usage-{form}").stdout)["data"]["context"]
        assert status["usage_source"] == "provider"
        assert status["last_response_usage"]["cache_read_input_tokens"] == USAGE["cache_read_input_tokens"]


def test_chat_stream_without_usage_leaves_the_next_pass_on_estimates(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    with proxy_in_thread(settings_for(fake.url)) as url:
        _post(url, chat_body(FIRST), {"x-session-id": "no-usage"}, path="/v1/chat/completions")
        follow = [*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "more"}]
        _post(url, chat_body(follow), {"x-session-id": "no-usage"}, path="/v1/chat/completions")
    assert [r["usage_source"] for r in pass_reports("no-usage")] == ["estimate", "estimate"]


@pytest.mark.parametrize(("headers", "path", "body_extra", "expected"), [
    ({"x-claude-code-session-id": "cc-header"}, "/v1/messages", {}, "cc-header"),
    ({}, "/v1/messages",
     {"metadata": {"user_id": json.dumps({"device_id": "d", "account_uuid": "", "session_id": "cc-body"})}},
     "cc-body"),
    ({}, "/v1/messages", {"metadata": {"user_id": "user_abc_account__session_0f8e7d6c-aaaa"}},
     "0f8e7d6c-aaaa"),
    ({"session-id": "codex-header"}, "/v1/chat/completions", {}, "codex-header"),
    ({}, "/v1/chat/completions", {"prompt_cache_key": "codex-cache-key"}, "codex-cache-key"),
    ({"x-session-id": "opencode-header"}, "/v1/chat/completions", {}, "opencode-header"),
    ({"x-mc-session-id": "explicit", "x-session-id": "other"}, "/v1/messages", {}, "explicit"),
])
def test_session_id_from_each_client_form(fake, headers: dict, path: str, body_extra: dict, expected: str) -> None:
    fake.script([], default=Reply(text=ANSWER))
    build = anthropic_body if path == "/v1/messages" else chat_body
    with proxy_in_thread(settings_for(fake.url)) as url:
        assert _post(url, build(FIRST, stream=False, **body_extra), headers, path=path).status_code == 200
    assert session_ids() == {expected}
    assert "x-mc-session-id" not in fake.requests[0].headers  # mc's own headers stay local


def test_without_any_session_id_the_session_is_a_stable_fingerprint(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    with proxy_in_thread(settings_for(fake.url)) as url:
        _post(url, anthropic_body(FIRST, stream=False))
        _post(url, anthropic_body([*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "ok"}],
                                  stream=False))
    (only,) = session_ids()
    assert only.startswith("fp-")
    assert [r["pass"] for r in pass_reports(only)] == ["fold", "defer"]


def test_project_dir_from_the_installer_header(fake, tmp_path: Path) -> None:
    fake.script([], default=Reply(text=ANSWER))
    project = tmp_path / "proj"
    project.mkdir()
    with proxy_in_thread(settings_for(fake.url)) as url:
        _post(url, anthropic_body(FIRST, stream=False), {"x-mc-project-dir": str(project), "x-session-id": "p1"})
    from magic_context.store import db

    conn = db.open_db()
    try:
        assert conn.execute("SELECT project_dir FROM sessions").fetchone()[0] == str(project)
    finally:
        conn.close()
    assert "x-mc-project-dir" not in fake.requests[0].headers


def test_pass_through_routes_are_forwarded_unchanged(fake) -> None:
    with proxy_in_thread(settings_for(fake.url)) as url:
        models = httpx.get(url + "/v1/models", headers=ANTHROPIC_HEADERS)
        count_body = json.dumps(anthropic_body(FIRST, stream=False)).encode()
        counted = httpx.post(url + "/v1/messages/count_tokens?beta=true", content=count_body,
                             headers={**ANTHROPIC_HEADERS, "x-custom": "kept"})
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "fake-model"
    assert counted.status_code == 200 and "input_tokens" in counted.json()
    get, post = fake.requests
    assert (get.method, get.path) == ("GET", "/v1/models")
    assert post.path == "/v1/messages/count_tokens?beta=true"
    assert post.raw == count_body  # not rewritten
    assert post.headers["x-api-key"] == ANTHROPIC_HEADERS["x-api-key"] and post.headers["x-custom"] == "kept"
    assert post.headers["host"] == fake.url.removeprefix("http://")
    assert session_ids() == set()  # nothing went through the pass


def test_garbage_body_fails_open_and_is_logged_once_per_session(fake) -> None:
    fake.script([], default=Reply(text=ANSWER))
    garbage = b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": 42'
    with proxy_in_thread(settings_for(fake.url)) as url:
        for _ in range(3):
            answer = httpx.post(url + "/v1/messages", content=garbage,
                                headers={**ANTHROPIC_HEADERS, "x-claude-code-session-id": "broken"})
            assert answer.status_code == 200
    assert [r.raw for r in fake.requests] == [garbage] * 3
    log_text = paths.log_path().read_text()
    assert log_text.count("transform failed for session broken") == 1
    assert "forwarded the original body" in log_text


def test_responses_route_goes_through_the_pass(fake) -> None:
    codex = (REQUESTS / "codex-0.171.0-2.json").read_bytes()
    fake.script([], default=Reply(text=ANSWER))
    with proxy_in_thread(settings_for(fake.url)) as url:
        answer = httpx.post(url + "/v1/responses", content=codex, timeout=30,
                            headers={"authorization": "Bearer sk-test-codex-000000", "session-id": "codex-1",
                                     "content-type": "application/json", "accept": "text/event-stream"})
    assert answer.status_code == 200
    events = sse_events(answer.content)
    assert events[-1][0] == "response.completed"
    upstream = fake.requests[0]
    assert b"<session-history>" in upstream.raw  # rewritten by the Responses codec


@pytest.mark.parametrize("wire", ["anthropic", "chat"])
def test_context_emergency_is_answered_in_the_providers_shape(fake, wire: str) -> None:
    if wire == "anthropic":
        usage, path, build = {"input_tokens": 9_800, "output_tokens": 10}, "/v1/messages", anthropic_body
    else:
        usage = {"prompt_tokens": 9_800, "completion_tokens": 10, "total_tokens": 9_810}
        path, build = "/v1/chat/completions", chat_body
    fake.script([], default=Reply(text=ANSWER, usage=usage))
    headers = {"x-session-id": "full", "x-mc-context-limit": "10000"}
    with proxy_in_thread(settings_for(fake.url)) as url:
        assert _post(url, build(FIRST, stream=False), headers, path=path).status_code == 200
        follow = [*FIRST, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "continue"}]
        refused = _post(url, build(follow), headers, path=path)
    assert refused.status_code == 400
    error = refused.json()
    if wire == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    else:
        assert error["error"]["code"] == "context_length_exceeded"
        message = error["error"]["message"]
    # Two short turns fill the window: the advice is the one that works here (tests/test_exit4_advice.py)
    assert message.startswith("prompt is too long") and "a model with a larger window" in message
    assert len(fake.requests) == 1  # the refused call was not sent


def test_request_body_size_limit(fake) -> None:
    with proxy_in_thread(settings_for(fake.url, max_body_bytes=2_000)) as url:
        big = anthropic_body([{"role": "user", "content": "x" * 5_000}])
        refused = _post(url, big)
        chat_refused = _post(url, chat_body([{"role": "user", "content": "x" * 5_000}]), path="/v1/chat/completions")
    assert refused.status_code == 413
    assert refused.json()["error"]["type"] == "request_too_large"
    assert chat_refused.status_code == 413 and "proxy.max_body_mb" in chat_refused.json()["error"]["message"]
    assert fake.requests == []


def test_upstream_timeout_before_the_answer(fake) -> None:
    fake.script([slow(3.0, ANSWER)])
    with proxy_in_thread(settings_for(fake.url, read_timeout_s=0.5)) as url:
        started = time.perf_counter()
        answer = _post(url, anthropic_body(FIRST, stream=False))
    assert time.perf_counter() - started < 2.5
    assert answer.status_code == 504
    assert answer.json()["type"] == "error" and "did not answer in time" in answer.json()["error"]["message"]


def test_upstream_timeout_mid_stream_ends_with_an_error_event(fake) -> None:
    fake.script([Reply(text="a b c d", event_delay_s=2.0)])
    with proxy_in_thread(settings_for(fake.url, read_timeout_s=0.6)) as url:
        answer = _post(url, anthropic_body(FIRST))
    events = sse_events(answer.content)
    assert events[0][0] == "message_start"
    assert events[-1][0] == "error" and "broke off" in events[-1][1]["error"]["message"]


def test_unreachable_upstream_is_a_provider_shaped_502() -> None:
    with proxy_in_thread(settings_for("http://127.0.0.1:9")) as url:
        answer = _post(url, chat_body(FIRST, stream=False), path="/v1/chat/completions")
    assert answer.status_code == 502
    assert "cannot reach the upstream" in answer.json()["error"]["message"]


def test_health_endpoint(fake) -> None:
    with proxy_in_thread(settings_for(fake.url)) as url:
        health = httpx.get(url + "/mc/health").json()
    assert health["status"] == "ok" and health["address"] == url
    assert health["upstreams"] == {"anthropic": fake.url, "openai": fake.url}
    assert fake.requests == []
