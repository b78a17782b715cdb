"""Issue #14 item 4: tool pairing the harness broke is repaired the way the provider accepts it.

Unit and property tests of `wire.repair` on canonical messages; the CLI tests of the reproducers are in
tests/test_repro_pairing.py.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from magic_context.wire import anthropic, arcs, openai, repair, responses
from magic_context.wire import model as m

CODECS = {m.ANTHROPIC: anthropic, m.OPENAI: openai, m.OPENAI_RESPONSES: responses}


def test_valid_input_is_left_alone():
    msgs = anthropic.decode([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}])
    before = [(x.role, [(b.kind, b.tool_id) for b in x.blocks]) for x in msgs]
    assert repair.repair(msgs, m.ANTHROPIC) == []
    assert [(x.role, [(b.kind, b.tool_id) for b in x.blocks]) for x in msgs] == before


def test_a_duplicate_answer_is_an_orphan():
    msgs = openai.decode([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "first"},
        {"role": "tool", "tool_call_id": "c1", "content": "again"}])
    assert repair.repair(msgs, m.OPENAI) == ["removed the orphan tool result c1 (no call before it)"]
    assert arcs.validate_pairing(msgs, m.OPENAI) == []
    assert [x["content"] for x in openai.encode(msgs) if x["role"] == "tool"] == ["first"]


def test_pi_orphans_are_removed_but_open_calls_left_to_pi():
    from magic_context.wire import pi

    msgs = pi.decode([
        {"role": "user", "content": "go", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}],
         "timestamp": 2},
        {"role": "toolResult", "toolCallId": "zz", "toolName": "bash", "content": [{"type": "text", "text": "x"}],
         "isError": False, "timestamp": 3}])
    done = repair.repair(msgs, m.PI)
    assert done == ["removed the orphan tool result zz (no call before it)"]
    assert not any(b.kind == m.TOOL_RESULT for x in msgs for b in x.blocks)


def test_a_pi_tool_result_with_an_unknown_part_goes_whole_when_it_is_an_orphan():
    """Fuzz case 826: the result block goes, but an unknown content part kept the toolResult message (its call
    id sits on the message), so an orphan was served with exit 0."""
    from magic_context.wire import pi

    msgs = pi.decode([
        {"role": "user", "content": "go", "timestamp": 1},
        {"role": "assistant", "content": [], "timestamp": 2},
        {"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
         "content": [{"type": {"": None}, "text": "hi"}], "isError": False, "timestamp": 3}])
    assert repair.repair(msgs, m.PI) == ["removed the orphan tool result t1 (no call before it)"]
    assert [x.role for x in msgs] == [m.USER, m.ASSISTANT]
    assert arcs.validate_pairing(pi.decode(pi.encode(msgs)), m.PI) == []


# --- property: any breakage of pairing is repaired into a valid request ----------------------------

EVENT = st.sampled_from(["user", "assistant-call", "assistant-2calls", "assistant-text", "answer", "orphan",
                         "answer-late"])


def _anthropic(events: list[str]) -> list[dict]:
    out: list[dict] = []
    n = 0
    last_calls: list[str] = []
    for e in events:
        if e.startswith("assistant"):
            k = {"assistant-call": 1, "assistant-2calls": 2, "assistant-text": 0}[e]
            last_calls = [f"t{n + j}" for j in range(k)]
            n += k
            blocks = [{"type": "text", "text": "hm"}] + [
                {"type": "tool_use", "id": c, "name": "bash", "input": {"c": c}} for c in last_calls]
            out.append({"role": "assistant", "content": blocks})
        elif e == "user":
            out.append({"role": "user", "content": "next"})
        else:
            tid = {"answer": last_calls[0] if last_calls else "none", "orphan": "ghost",
                   "answer-late": "t0"}[e]
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": "r"}]})
    return out


def _openai(events: list[str]) -> list[dict]:
    out: list[dict] = []
    n = 0
    last_calls: list[str] = []
    for e in events:
        if e.startswith("assistant"):
            k = {"assistant-call": 1, "assistant-2calls": 2, "assistant-text": 0}[e]
            last_calls = [f"c{n + j}" for j in range(k)]
            n += k
            calls = [{"id": c, "type": "function", "function": {"name": "bash", "arguments": "{}"}} for c in last_calls]
            out.append({"role": "assistant", "content": "hm", **({"tool_calls": calls} if calls else {})})
        elif e == "user":
            out.append({"role": "user", "content": "next"})
        else:
            tid = {"answer": last_calls[0] if last_calls else "none", "orphan": "ghost", "answer-late": "c0"}[e]
            out.append({"role": "tool", "tool_call_id": tid, "content": "r"})
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=14), st.sampled_from([m.ANTHROPIC, m.OPENAI]))
def test_any_broken_pairing_is_repaired_into_a_valid_request(events, harness):
    native = _anthropic(events) if harness == m.ANTHROPIC else _openai(events)
    codec = CODECS[harness]
    msgs = codec.decode(native)
    repair.repair(msgs, harness)
    assert arcs.validate_pairing(msgs, harness) == []
    again = codec.decode(codec.encode(msgs))  # what is served decodes to a valid request too
    assert arcs.validate_pairing(again, harness) == []
    calls = {b.tool_id for x in again for b in x.blocks if b.kind == m.TOOL_CALL}
    assert calls == {b.tool_id for x in msgs for b in x.blocks if b.kind == m.TOOL_CALL}  # no call was lost
