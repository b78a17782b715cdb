"""Reasoning in token counts: each format's reasoning counts exactly when the provider reads it back.

Chat Completions reasoning fields (`reasoning_content`, `reasoning`, `reasoning_details`) are never
read as prompt, so neither the raw store's estimate (what the pass and the historian budget on) nor
the replay's exact counter count them; every other format's reasoning is sent back and counts. The
two counters agree on which blocks are prompt.
"""

from __future__ import annotations

from typing import Any

import pytest

from magic_context import tokens
from magic_context.replay.units import MESSAGE_OVERHEAD, TokenCounter
from magic_context.store import raw
from magic_context.transform.protocol import CODECS
from magic_context.wire import model as m

THOUGHT = "First I will check the parser, then the tests, then the changelog entry for this release."
ANSWER = "Done."


def _chars(text: str) -> int:
    return len(text)


# format → (one assistant message carrying reasoning in that format, is the reasoning read back?)
CASES: dict[str, tuple[list[Any], bool]] = {
    "openai reasoning_content": ([{"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT}], False),
    "openai reasoning": ([{"role": "assistant", "content": ANSWER, "reasoning": THOUGHT}], False),
    "openai reasoning_details": ([{"role": "assistant", "content": ANSWER, "reasoning_details": [
        {"type": "reasoning.text", "text": THOUGHT}]}], False),
    "anthropic": ([{"role": "assistant", "content": [{"type": "thinking", "thinking": THOUGHT, "signature": "s"},
                                                      {"type": "text", "text": ANSWER}]}], True),
    "pi": ([{"role": "assistant", "content": [{"type": "thinking", "thinking": THOUGHT},
                                              {"type": "text", "text": ANSWER}], "timestamp": 1}], True),
    "opencode": ([{"info": {"id": "msg_1", "sessionID": "ses", "role": "assistant", "time": {"created": 1}},
                   "parts": [{"id": "prt_1", "type": "reasoning", "text": THOUGHT},
                             {"id": "prt_2", "type": "text", "text": ANSWER}]}], True),
    "openai-responses": ([{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": THOUGHT}]},
                          {"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": ANSWER}]}], True),
}
HARNESS = {"openai reasoning_content": m.OPENAI, "openai reasoning": m.OPENAI, "openai reasoning_details": m.OPENAI,
           "anthropic": m.ANTHROPIC, "pi": m.PI, "opencode": m.OPENCODE, "openai-responses": m.OPENAI_RESPONSES}


def _assistant(case: str) -> m.Message:
    messages = CASES[case][0]
    decoded = CODECS[HARNESS[case]].decode(messages)
    (reply,) = [msg for msg in decoded if msg.role == m.ASSISTANT]
    assert any(b.kind == m.REASONING and THOUGHT in b.text for b in reply.blocks), "the codec kept the reasoning"
    return reply


@pytest.mark.parametrize("case", sorted(CASES))
def test_estimate_counts_reasoning_only_when_it_is_sent_back(case: str) -> None:
    reply = _assistant(case)
    sent = CASES[case][1]
    visible = sum(len(b.text) for b in reply.blocks if b.kind != m.REASONING)
    expected = MESSAGE_OVERHEAD + visible + (len(THOUGHT) if sent else 0)
    assert raw.message_tokens(reply, _chars) == expected
    assert all(m.in_prompt(b) == (sent or b.kind != m.REASONING) for b in reply.blocks)


@pytest.mark.parametrize("case", sorted(CASES))
def test_replay_counter_agrees_with_the_estimate(case: str) -> None:
    reply = _assistant(case)
    counter = TokenCounter(_chars)
    assert counter.message(reply, memo=False)[1] == raw.message_tokens(reply, _chars)
    # The reasoning is part of the cache key exactly when it is part of the prompt.
    without = m.Message(reply.id, reply.role, [b for b in reply.blocks if b.kind != m.REASONING])
    same_key = counter.message(without, memo=False)[0] == counter.message(reply, memo=False)[0]
    assert same_key is not CASES[case][1]


def test_deepseek_trajectory_estimate_no_longer_counts_reasoning(sessions_dir) -> None:
    """The sqlfluff deepseek-reasoner trajectory: reasoning was ~a third of the old estimate."""
    from magic_context.replay.passes import prepare
    from magic_context.wire.importers import load_session

    rep = prepare(load_session(sessions_dir / "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"))
    thoughts = sum(tokens.estimate(b.text) for msg in rep.canon for b in msg.blocks if b.kind == m.REASONING)
    assert thoughts > 10_000  # the recording does carry reasoning_content
    estimate = sum(raw.message_tokens(msg, tokens.estimate) for msg in rep.canon)
    exact = sum(TokenCounter().message(msg)[1] for msg in rep.canon)
    assert 0.85 < estimate / exact < 1.15  # the estimate tracks what the provider is sent, reasoning excluded
