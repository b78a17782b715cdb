"""Response usage recorded by `mc proxy` (m002 `response_usage`): paired with the right assistant message,
used only when the input carries no usage of its own, never applied after the harness rewrote history."""

from __future__ import annotations

import copy
import json

import pytest

from magic_context.store import db, responses
from magic_context.transform import hook
from magic_context.wire import model as m

USAGE = m.Usage(input_tokens=1_000, output_tokens=200, cache_read_input_tokens=40_000, cache_creation_input_tokens=800)


def _body(messages: list) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are terse.", "messages": messages}


def _pass(body: dict, session: str = "s1") -> hook.Served:
    options = {"--harness": "anthropic", "--session": session, "--project": "/tmp/proj", "--report": False,
               "--dry-run": False}
    return hook.serve_pass(json.dumps(body).encode(), options)


def _record(served: hook.Served, usage: m.Usage = USAGE) -> None:
    conn = db.open_db()
    try:
        assert responses.record(conn, served.inp.harness, served.inp.session_id, served.prompt_ordinal, usage,
                                now_ms=1)
    finally:
        conn.close()


FIRST = [{"role": "user", "content": "list the files in src/"}]
ANSWER = {"role": "assistant", "content": [{"type": "text", "text": "src/ holds main.py and util.py."}]}
NEXT = {"role": "user", "content": "now open util.py"}


def test_recorded_usage_is_provider_proven_on_the_next_pass() -> None:
    first = _pass(_body(FIRST))
    assert first.prompt_ordinal == 0 and first.report["usage_source"] == "estimate"
    _record(first)
    second = _pass(_body([*FIRST, ANSWER, NEXT]))
    assert second.report["usage_source"] == "provider"
    # The response's prompt and output, plus an estimate of what came after it (the new user message).
    assert USAGE.total_input + USAGE.output_tokens < second.report["usage_tokens"] < USAGE.total_input + 400
    assert second.prompt_ordinal == 2


def test_usage_of_an_unrecorded_later_response_is_not_taken_from_an_older_one() -> None:
    _record(_pass(_body(FIRST)))
    later = [*FIRST, ANSWER, NEXT, {"role": "assistant", "content": "util.py defines helpers."},
             {"role": "user", "content": "thanks"}]
    assert _pass(_body(later)).report["usage_source"] == "estimate"


def test_stale_record_is_not_applied_after_the_harness_rewrote_history() -> None:
    opening = [{"role": "user", "content": "read the README"}, {"role": "assistant", "content": "It says hello."},
               {"role": "user", "content": "and the LICENSE?"}]
    served = _pass(_body(opening))
    assert served.prompt_ordinal == 2
    _record(served)
    edited = copy.deepcopy(opening)
    edited[0]["content"] = "read the README twice"  # the harness edited history before the prompt's end
    assert _pass(_body([*edited, ANSWER, NEXT])).report["usage_source"] == "estimate"


def test_moving_cache_breakpoint_on_the_prompts_last_message_keeps_the_pairing() -> None:
    # Claude Code marks the last block of the last message with cache_control and moves it on the next
    # request: only the prompt's own last message changes, which the provider figures still describe.
    opening = [{"role": "user", "content": "read the README"}, {"role": "assistant", "content": "It says hello."}]
    breakpoint_ = {"type": "ephemeral"}
    marked = [*opening, {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": breakpoint_}]}]
    _record(_pass(_body(marked)))
    plain = [*opening, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    follow = {"role": "user", "content": [{"type": "text", "text": "go on", "cache_control": breakpoint_}]}
    assert _pass(_body([*plain, ANSWER, follow])).report["usage_source"] == "provider"


def test_input_usage_wins_over_the_recorded_one() -> None:
    _record(_pass(_body(FIRST)))
    envelope = {"messages": [*FIRST, ANSWER, NEXT], "harness": "anthropic", "session_id": "s1",
                "usage": {"input_tokens": 7, "output_tokens": 3}}
    served = hook.serve_pass(json.dumps(envelope).encode(), {"--project": "/tmp/proj"})
    assert served.report["usage_source"] == "provider" and served.report["usage_tokens"] < 1_000


def test_record_for_an_unknown_session_writes_nothing() -> None:
    conn = db.open_db()
    try:
        assert not responses.record(conn, "anthropic", "nobody", 3, USAGE, now_ms=1)
        assert conn.execute("SELECT count(*) FROM response_usage").fetchone()[0] == 0
    finally:
        conn.close()



@pytest.mark.parametrize("summary", [None, "Summary: the README says hello."])
def test_record_is_not_applied_after_the_harness_compacted_up_to_the_prompts_last_message(summary: str | None) -> None:
    """The boundary of the rewrite rule: a harness compaction that keeps exactly the prompt's last message (the
    view now starts at the recorded prompt ordinal, with or without the harness's summary in front) dropped
    history the provider counted, so the recorded usage would over-count the new prompt: it is not used. (With a
    summary in front the answer takes a fresh ordinal after it, so the pairing check already refused the usage;
    without one only the compaction divergence tells.)"""
    opening = [{"role": "user", "content": "read the README"}, {"role": "assistant", "content": "It says hello."},
               {"role": "user", "content": "and the LICENSE?"}]
    served = _pass(_body(opening))
    assert served.prompt_ordinal == 2
    _record(served)
    front = [] if summary is None else [{"role": "user", "content": summary}]
    after = _pass(_body([*front, opening[2], ANSWER, NEXT]))
    assert after.report["usage_source"] == "estimate"
    assert after.report["usage_tokens"] < 1_000  # not the 41,800 the provider counted for the whole history
