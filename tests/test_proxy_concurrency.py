"""Acceptance: 8 concurrent streaming sessions through one `mc proxy`: no interleaved or lost events."""

from __future__ import annotations

import json
import threading

import httpx
from fake_llm_server import FakeLLMServer, RecordedRequest, Reply
from proxy_helpers import ANTHROPIC_HEADERS, anthropic_body, anthropic_text, pass_reports, proxy_process, sse_events

SESSIONS = 8
WORDS = 40
TURNS = 2
EXPECTED_KINDS = ["message_start", "content_block_start", *["content_block_delta"] * WORDS, "content_block_stop",
                  "message_delta", "message_stop"]


def _text(session: str, turn: int) -> str:
    return " ".join(f"{session}-t{turn}-w{i}" for i in range(WORDS))


def _answer(request: RecordedRequest) -> Reply:
    """Each session's answer names the session and the turn, so a crossed or lost event is visible."""
    session = request.headers["x-claude-code-session-id"]
    turn = sum(1 for message in request.body["messages"] if message["role"] == "assistant")
    return Reply(text=_text(session, turn), event_delay_s=0.01,
                 usage={"input_tokens": 1_000 * (turn + 1), "cache_read_input_tokens": 20_000, "output_tokens": WORDS})


def test_eight_concurrent_streaming_sessions_through_one_proxy() -> None:
    results: dict[str, list[list[tuple[str | None, object]]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(SESSIONS)
    with FakeLLMServer() as fake, proxy_process("--upstream-anthropic", fake.url) as proxy:
        fake.script([], default=_answer)

        def session(index: int) -> None:
            name = f"s{index}"
            messages: list[dict] = [{"role": "user", "content": f"task of {name}"}]
            try:
                start.wait(30)
                for turn in range(TURNS):
                    body = json.dumps(anthropic_body(messages))
                    headers = {**ANTHROPIC_HEADERS, "x-claude-code-session-id": name}
                    with httpx.stream("POST", proxy.url + "/v1/messages", content=body, headers=headers,
                                      timeout=60) as resp:
                        assert resp.status_code == 200
                        events = sse_events(b"".join(resp.iter_raw()))
                    results.setdefault(name, []).append(events)
                    messages += [{"role": "assistant", "content": anthropic_text(events)},
                                 {"role": "user", "content": f"next step {turn} of {name}"}]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert not errors, errors
    assert sorted(results) == [f"s{i}" for i in range(SESSIONS)]
    for name, turns in results.items():
        assert len(turns) == TURNS
        for turn, events in enumerate(turns):
            assert [kind for kind, _ in events] == EXPECTED_KINDS, (name, turn)
            assert anthropic_text(events) == _text(name, turn), (name, turn)  # in order, none lost or crossed
        reports = pass_reports(name)
        assert [r["pass"] for r in reports] == ["fold", "defer"]
        assert reports[1]["usage_source"] == "provider"  # each session's own recorded usage
        assert reports[1]["usage_tokens"] >= 21_000 + WORDS
    # Every request reached the upstream rewritten, under its own session.
    assert len(fake.requests) == SESSIONS * TURNS
    for request in fake.requests:
        assert request.body["messages"][0]["content"][0]["text"].startswith("<session-history>")
