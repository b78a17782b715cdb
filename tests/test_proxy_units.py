"""`mc proxy` parts without a server: routes, headers, session ids, usage taps, error shapes, redaction."""

from __future__ import annotations

import itertools
import json

from fake_llm_server import RecordedRequest, Reply, _anthropic_events, _openai_events, _responses_events
from hypothesis import given, settings
from hypothesis import strategies as st

from magic_context import log
from magic_context.proxy import replies, routes, usage
from magic_context.wire import model as m


def test_model_routes_and_upstreams() -> None:
    assert routes.model_route("POST", "/v1/messages").wire == routes.ANTHROPIC
    assert routes.model_route("POST", "/v1/chat/completions").harness == m.OPENAI
    assert routes.model_route("POST", "/v1/responses").wire == routes.RESPONSES
    for method, path in (("GET", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("POST", "/v1/models"),
                         ("POST", "/v1/responses/compact"), ("GET", "/v1/responses/resp_1")):
        assert routes.model_route(method, path) is None, (method, path)
    assert routes.upstream_for("/v1/models", {"anthropic-version": "2023-06-01"}, None) == "anthropic"
    assert routes.upstream_for("/v1/models", {"authorization": "Bearer x"}, None) == "openai"
    assert routes.upstream_for("/v1/messages/count_tokens", {}, None) == "anthropic"


def test_upstream_url_joins_with_or_without_v1() -> None:
    assert routes.upstream_url("https://api.anthropic.com", "/v1/messages", "beta=true") == \
        "https://api.anthropic.com/v1/messages?beta=true"
    assert routes.upstream_url("https://api.openai.com/v1/", "/v1/responses", "") == "https://api.openai.com/v1/responses"
    assert routes.upstream_url("https://openrouter.ai/api", "/v1/chat/completions", "") == \
        "https://openrouter.ai/api/v1/chat/completions"


def test_forwarded_headers_drop_hop_by_hop_host_length_and_mc_headers() -> None:
    sent = [("Host", "127.0.0.1:8790"), ("Content-Length", "12"), ("Connection", "keep-alive, X-Trace"),
            ("X-Trace", "1"), ("Transfer-Encoding", "chunked"), ("x-api-key", "k"), ("Accept-Encoding", "gzip, br"),
            ("x-mc-project-dir", "/p"), ("anthropic-beta", "a,b"), ("anthropic-beta", "c")]
    out = routes.forward_headers(sent)
    assert out == [("x-api-key", "k"), ("anthropic-beta", "a,b"), ("anthropic-beta", "c"),
                   ("accept-encoding", "identity")]
    back = routes.response_headers([("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"),
                                    ("Content-Length", "5"), ("request-id", "r1")])
    assert back == [("Content-Type", "text/event-stream"), ("Content-Length", "5"), ("request-id", "r1")]


def test_session_ids_from_bodies() -> None:
    anthropic = routes.model_route("POST", "/v1/messages")
    chat = routes.model_route("POST", "/v1/chat/completions")
    user_id = json.dumps({"device_id": "d", "session_id": "4e55-uuid"})
    assert routes.session_from_body({"metadata": {"user_id": user_id}}, anthropic) == "4e55-uuid"
    assert routes.session_from_body({"metadata": {"user_id": "{broken"}}, anthropic) is None
    assert routes.session_from_body({"metadata": {"user_id": "user_x_account__session_abcd1234-ef"}}, anthropic) \
        == "abcd1234-ef"
    assert routes.session_from_body({"prompt_cache_key": "019a-thread"}, chat) == "019a-thread"
    assert routes.session_from_body({"prompt_cache_key": "k"}, anthropic) is None
    assert routes.session_from_body([], chat) is None
    assert routes.session_from_headers({"session-id": "a", "x-session-id": "b"}) == "a"
    assert routes.project_dir({"x-mc-project-dir": "/srv/my%20app"}, "/cwd") == "/srv/my app"
    assert routes.context_limit({"x-mc-context-limit": "200000"}) == "200000"
    assert routes.context_limit({"x-mc-context-limit": "-5"}) is None


def test_secrets_from_auth_headers() -> None:
    found = routes.secrets({"authorization": "Bearer tok-123456", "x-api-key": "key-abcdef", "other": "x"})
    assert found == ["key-abcdef", "Bearer tok-123456", "tok-123456"]


def _request(wire: str, body: dict) -> RecordedRequest:
    path = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "responses": "/v1/responses"}[wire]
    return RecordedRequest("POST", path, {}, body, json.dumps(body).encode())


STREAMS = {
    routes.ANTHROPIC: (_anthropic_events, "anthropic", {"input_tokens": 11, "cache_read_input_tokens": 900,
                                                        "cache_creation_input_tokens": 7, "output_tokens": 5},
                       m.Usage(11, 5, 900, 7)),
    routes.CHAT: (_openai_events, "openai", {"prompt_tokens": 950, "completion_tokens": 5, "total_tokens": 955,
                                             "prompt_tokens_details": {"cached_tokens": 900}},
                  m.Usage(50, 5, 900, 0)),
    routes.RESPONSES: (_responses_events, "responses", {"input_tokens": 950, "output_tokens": 5,
                                                        "input_tokens_details": {"cached_tokens": 900}},
                       m.Usage(50, 5, 900, 0)),
}


def _stream(wire: str) -> tuple[bytes, m.Usage]:
    build, fake_wire, raw_usage, expected = STREAMS[wire]
    body = {"stream": True, "stream_options": {"include_usage": True}, "messages": [], "input": []}
    events = build(Reply(text="one two three four five", usage=raw_usage), "fake", 1, _request(fake_wire, body))
    return b"".join(events), expected


@settings(max_examples=60, deadline=None)
@given(wire=st.sampled_from(sorted(STREAMS)), cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_usage_tap_reads_the_same_usage_however_the_stream_is_chunked(wire: str, cuts: list[int]) -> None:
    data, expected = _stream(wire)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    tap = usage.UsageTap(wire)
    completing = [i for i, chunk in enumerate(chunks) if tap.feed(chunk)]
    assert tap.usage == expected
    assert len(completing) == 1
    # Nothing after the completing chunk may hold the final usage event: the proxy records before relaying it.
    final_marker = {routes.ANTHROPIC: b"message_delta", routes.CHAT: b'"usage": {', routes.RESPONSES:
                    b"response.completed"}[wire]
    assert final_marker in b"".join(chunks[:completing[0] + 1])


def test_anthropic_final_event_can_restate_prompt_figures() -> None:
    tap = usage.UsageTap(routes.ANTHROPIC)
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
                                                             "output_tokens": 1}}}
    delta = {"type": "message_delta", "usage": {"output_tokens": 42, "input_tokens": 12}}
    assert not tap.feed(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
    assert tap.feed(f"event: message_delta\ndata: {json.dumps(delta)}\n\n".encode())
    assert tap.usage == m.Usage(12, 42, 100, 0)


def test_usage_from_json_answers() -> None:
    assert usage.from_json(routes.ANTHROPIC, b'{"usage": {"input_tokens": 3, "output_tokens": 4}}') == m.Usage(3, 4)
    assert usage.from_json(routes.CHAT, b'{"usage": {"prompt_tokens": 9, "completion_tokens": 1}}') == m.Usage(9, 1)
    assert usage.from_json(routes.RESPONSES, b'{"usage": {"input_tokens": 9, "output_tokens": 1, '
                           b'"input_tokens_details": {"cached_tokens": 4}}}') == m.Usage(5, 1, 4, 0)
    assert usage.from_json(routes.ANTHROPIC, b"not json") is None
    assert usage.from_json(routes.CHAT, b'{"choices": []}') is None


def test_error_shapes() -> None:
    anthropic = json.loads(replies.error_body(routes.ANTHROPIC, 413, "too big"))
    assert anthropic == {"type": "error", "error": {"type": "request_too_large", "message": "too big"}}
    openai = json.loads(replies.error_body(routes.RESPONSES, 400, "long", code="context_length_exceeded"))
    assert openai == {"error": {"message": "long", "type": "invalid_request_error", "param": None,
                                "code": "context_length_exceeded"}}
    event = replies.error_event(routes.ANTHROPIC, "cut").decode()
    assert event.startswith("event: error\ndata: ") and event.endswith("\n\n")


def test_registered_secrets_are_redacted_everywhere() -> None:
    secret = "opaque-client-value-4711"
    assert log.redact(f"token {secret}") == f"token {secret}"
    log.register_secret(secret)
    assert log.redact(f"token {secret}!") == f"token {log.REDACTED}!"
    assert secret not in replies.error_body(routes.CHAT, 502, f"upstream said {secret}").decode()
    for i in range(log.MAX_REGISTERED + 5):  # bounded: the oldest are forgotten, the newest kept
        log.register_secret(f"other-secret-{i:04d}")
    assert log.redact(f"other-secret-{log.MAX_REGISTERED + 4:04d}") == log.REDACTED
