"""Tool arcs on canonical messages: pairing, removal without splitting, per-provider validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magic_context.wire.arcs import Arc, arcs_touching, find_arcs, remove_arcs, validate_pairing
from magic_context.wire.model import (
    ANTHROPIC,
    ASSISTANT,
    OPENAI,
    OPENCODE,
    PI,
    REASONING,
    TEXT,
    TOOL,
    TOOL_CALL,
    TOOL_RESULT,
    USER,
    Block,
    Message,
)


def call(tool_id: str, name: str = "bash") -> Block:
    return Block(TOOL_CALL, tool_id=tool_id, tool_name=name, input={"command": "ls"})


def result(tool_id: str, out: str = "ok", name: str | None = None) -> Block:
    return Block(TOOL_RESULT, text=out, original=out, tool_id=tool_id, tool_name=name)


def text(value: str) -> Block:
    return Block(TEXT, text=value, original=value)


def msg(id_: str, role: str, *blocks: Block) -> Message:
    return Message(id=id_, role=role, blocks=list(blocks))


def anthropic_parallel() -> list[Message]:
    return [
        msg("u0", USER, text("look around")),
        msg("a1", ASSISTANT, text("three at once"), call("a", "read"), call("b", "grep"), call("c", "bash")),
        msg("u2", USER, result("b"), result("a"), result("c")),
        msg("a3", ASSISTANT, text("done")),
    ]


def test_parallel_calls_pair_by_id_not_position() -> None:
    messages = anthropic_parallel()
    arcs = find_arcs(messages)
    assert [(a.tool_id, a.call, a.results, a.tool_name, a.owner) for a in arcs] == [
        ("a", (1, 1), ((2, 1),), "read", "a1"),
        ("b", (1, 2), ((2, 0),), "grep", "a1"),
        ("c", (1, 3), ((2, 2),), "bash", "a1"),
    ]
    assert not any(a.is_open or a.is_orphan for a in arcs)
    assert validate_pairing(messages, ANTHROPIC) == []
    assert arcs_touching(arcs, 2) == arcs and arcs_touching(arcs, 0) == []


def test_remove_one_parallel_arc_keeps_the_others() -> None:
    messages = anthropic_parallel()
    b = next(a for a in find_arcs(messages) if a.tool_id == "b")
    removal = remove_arcs(messages, [b])
    assert removal.blocks == 2 and removal.messages == [] and removal.arcs == [b]
    assert [x.tool_id for x in messages[1].blocks if x.kind == TOOL_CALL] == ["a", "c"]
    assert [x.tool_id for x in messages[2].blocks] == ["a", "c"]
    assert validate_pairing(messages, ANTHROPIC) == []


def test_remove_all_arcs_drops_emptied_messages_in_place() -> None:
    messages = anthropic_parallel()
    messages[1].blocks.pop(0)  # the assistant holds only the three calls
    original = messages
    removal = remove_arcs(messages, ["a", "b", "c"])
    assert messages is original and [m.id for m in messages] == ["u0", "a3"]
    assert [m.id for m in removal.messages] == ["a1", "u2"] and removal.blocks == 6
    assert find_arcs(messages) == []


def test_user_message_with_text_is_never_removed() -> None:
    messages = [
        msg("a0", ASSISTANT, call("x")),
        msg("u1", USER, result("x"), text("also, please hurry")),
    ]
    remove_arcs(messages, ["x"])
    assert [m.id for m in messages] == ["u1"] and [b.kind for b in messages[0].blocks] == [TEXT]
    blank = [msg("a0", ASSISTANT, call("x")), msg("u1", USER, result("x"), text(""))]
    remove_arcs(blank, ["x"])
    assert [m.id for m in blank] == ["u1"]  # it had a text block: kept even though the text is blank


def test_reasoning_alone_does_not_keep_a_message() -> None:
    messages = [
        msg("u0", USER, text("go")),
        msg("a1", ASSISTANT, Block(REASONING, text="think", original="think", meta={"signature": "s"}), call("x")),
        msg("t2", TOOL, result("x")),
        msg("a3", ASSISTANT, Block(REASONING, text="more"), text("answer"), call("y")),
        msg("t4", TOOL, result("y")),
    ]
    removal = remove_arcs(messages, ["x", "y"])
    assert [m.id for m in messages] == ["u0", "a3"] and [m.id for m in removal.messages] == ["a1", "t2", "t4"]


def test_reused_ids_pair_with_the_nearest_call() -> None:
    # OpenCode: call and result share a part, and providers reuse call_0 in every step.
    opencode = [
        msg("m0", USER, text("go")),
        msg("m1", ASSISTANT, call("call_0", "read"), result("call_0")),
        msg("m2", ASSISTANT, text("next"), call("call_0", "bash"), result("call_0"), call("call_1"), result("call_1")),
    ]
    arcs = find_arcs(opencode)
    assert [(a.tool_id, a.call, a.results, a.owner) for a in arcs] == [
        ("call_0", (1, 0), ((1, 1),), "m1"),
        ("call_0", (2, 1), ((2, 2),), "m2"),
        ("call_1", (2, 3), ((2, 4),), "m2"),
    ]
    assert validate_pairing(opencode, OPENCODE) == []
    remove_arcs(opencode, [arcs[0]])
    assert [m.id for m in opencode] == ["m0", "m2"] and len(find_arcs(opencode)) == 2

    # Across messages (OpenAI/Pi shape): the second result answers the second call.
    openai = [
        msg("a0", ASSISTANT, call("x")), msg("t1", TOOL, result("x", "first")),
        msg("a2", ASSISTANT, call("x")), msg("t3", TOOL, result("x", "second")),
    ]
    assert [(a.call, a.results) for a in find_arcs(openai)] == [((0, 0), ((1, 0),)), ((2, 0), ((3, 0),))]
    assert validate_pairing(openai, OPENAI) == [] and validate_pairing(openai, PI) == []


def test_a_result_pairs_with_the_nearest_call_not_the_oldest_unanswered_one() -> None:
    """An unanswered `call_0`, then a message holding another `call_0` and its result: nearest and oldest differ."""
    messages = [
        msg("m0", USER, text("go")),
        msg("m1", ASSISTANT, call("call_0", "read")),  # never answered (the harness lost its result)
        msg("m2", ASSISTANT, call("call_0", "bash"), result("call_0", "ran")),
    ]
    arcs = find_arcs(messages)
    assert [(a.tool_id, a.call, a.results, a.tool_name, a.owner) for a in arcs] == [
        ("call_0", (1, 0), (), "read", "m1"),  # the old call stays open
        ("call_0", (2, 0), ((2, 1),), "bash", "m2"),
    ]
    assert arcs[0].is_open and not arcs[1].is_open
    # Across messages: two unanswered calls, then one result: it answers the second (nearest) call.
    across = [msg("a0", ASSISTANT, call("x", "first")), msg("a1", ASSISTANT, call("x", "second")),
              msg("t2", TOOL, result("x", "out"))]
    assert [(a.call, a.results) for a in find_arcs(across)] == [((0, 0), ()), ((1, 0), ((2, 0),))]


def test_result_before_its_call_in_the_same_message() -> None:
    messages = [msg("m1", ASSISTANT, result("k"), call("k", "read"))]
    (arc,) = find_arcs(messages)
    assert (arc.call, arc.results, arc.tool_name) == ((0, 1), ((0, 0),), "read")


def test_open_calls_and_orphan_results() -> None:
    messages = [
        msg("u0", USER, result("ghost", name="read"), text("hi")),
        msg("a1", ASSISTANT, call("open")),
    ]
    orphan, open_ = find_arcs(messages)
    assert orphan.is_orphan and orphan.call is None and orphan.owner == "u0" and orphan.tool_name == "read"
    assert open_.is_open and open_.results == () and open_.owner == "a1"
    problems = validate_pairing(messages, ANTHROPIC)
    assert any("ghost" in p and "no tool_use" in p for p in problems)
    assert any("open" in p and "no message follows" in p for p in problems)
    remove_arcs(messages, [orphan, open_])
    assert [m.id for m in messages] == ["u0"] and validate_pairing(messages, ANTHROPIC) == []


def test_duplicate_result_joins_the_nearest_call() -> None:
    messages = [msg("a0", ASSISTANT, call("d")), msg("t1", TOOL, result("d")), msg("t2", TOOL, result("d"))]
    (arc,) = find_arcs(messages)
    assert arc.results == ((1, 0), (2, 0))
    assert any("answers no open call" in p for p in validate_pairing(messages, OPENAI))
    assert remove_arcs(messages, [arc]).blocks == 3 and messages == []


def test_stale_arc_is_refused() -> None:
    messages = anthropic_parallel()
    arcs = find_arcs(messages)
    remove_arcs(messages, [arcs[0]])
    with pytest.raises(ValueError, match="stale arc"):
        remove_arcs(messages, [arcs[2]])  # positions moved after the first removal


def test_anthropic_rules() -> None:
    late = [msg("a0", ASSISTANT, call("x")), msg("u1", USER, text("first"), result("x"))]
    assert any("after text" in p for p in validate_pairing(late, ANTHROPIC))
    skipped = [msg("a0", ASSISTANT, call("x")), msg("u1", USER, text("no")), msg("u2", USER, result("x"))]
    problems = validate_pairing(skipped, ANTHROPIC)
    assert any("tool_use x has no tool_result in message 1" in p for p in problems)
    assert any("tool_result x answers no tool_use" in p for p in problems)
    to_assistant = [msg("a0", ASSISTANT, call("x")), msg("a1", ASSISTANT, text("?"))]
    assert any("message 1 is assistant" in p for p in validate_pairing(to_assistant, ANTHROPIC))


def test_openai_and_pi_rules() -> None:
    ok = [msg("s", "system", text("sys")), msg("u", USER, text("go")),
          msg("a", ASSISTANT, call("p"), call("q")), msg("t1", TOOL, result("q")), msg("t2", TOOL, result("p")),
          msg("a2", ASSISTANT, text("done"))]
    assert validate_pairing(ok, OPENAI) == [] and validate_pairing(ok, PI) == []
    interrupted = [msg("a", ASSISTANT, call("p"), call("q")), msg("t1", TOOL, result("q")),
                   msg("u", USER, text("stop")), msg("t2", TOOL, result("p"))]
    assert validate_pairing(interrupted, OPENAI) == [
        "message 0: tool call p is not answered before message 2",
        "message 3: tool result p answers no open call of the preceding assistant message"]
    # Pi fills in results for unanswered calls itself; only the misplaced result is a violation.
    assert validate_pairing(interrupted, PI) == [
        "message 3: tool result p answers no open call of the preceding assistant message"]
    unanswered = [msg("a", ASSISTANT, call("z"))]
    assert validate_pairing(unanswered, OPENAI) == ["message 0: tool call z is unanswered at the end"]
    assert validate_pairing(unanswered, PI) == []
    wrong_role = [msg("a", ASSISTANT, call("z")), msg("u", USER, result("z"))]
    assert "a user message carries tool result z" in " ".join(validate_pairing(wrong_role, OPENAI))


def test_opencode_rule_and_unknown_harness() -> None:
    split = [msg("m1", ASSISTANT, call("c")), msg("m2", ASSISTANT, result("c"))]
    assert validate_pairing(split, OPENCODE) == ["message 1: tool result c has no call in its own message"]
    with pytest.raises(ValueError, match="unknown harness"):
        validate_pairing(split, "gemini")


# A random tool history: each step is an assistant with 0-3 calls (ids from a small pool, so ids repeat),
# answered in shuffled order by tool messages, some calls left open.
_step = st.tuples(st.lists(st.sampled_from(["a", "b", "c"]), max_size=3), st.randoms(use_true_random=False),
                  st.booleans())


def _history(steps: list[tuple[list[str], object, bool]]) -> list[Message]:
    out: list[Message] = [msg("u", USER, text("go"))]
    for n, (ids, rnd, answer_all) in enumerate(steps):
        out.append(msg(f"a{n}", ASSISTANT, text("t"), *(call(i) for i in ids)))
        answered = list(ids) if answer_all else ids[:-1]
        rnd.shuffle(answered)  # type: ignore[attr-defined]
        out += [msg(f"t{n}.{k}", TOOL, result(i)) for k, i in enumerate(answered)]
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(_step, max_size=6), st.data())
def test_property_arcs_cover_every_tool_block_once_and_removal_never_splits(steps, data) -> None:
    messages = _history(steps)
    arcs = find_arcs(messages)
    covered = [p for a in arcs for p in a.positions]
    tool_blocks = [(mi, bi) for mi, m in enumerate(messages) for bi, b in enumerate(m.blocks)
                   if b.kind in (TOOL_CALL, TOOL_RESULT)]
    assert sorted(covered) == tool_blocks and len(set(covered)) == len(covered)
    assert not any(a.is_orphan for a in arcs)  # results always follow their calls here
    assert validate_pairing(messages, OPENAI) == [] or any(a.is_open for a in arcs)

    chosen: list[Arc] = data.draw(st.lists(st.sampled_from(arcs), unique=True) if arcs else st.just([]))
    before = len(arcs)
    remove_arcs(messages, chosen)
    after = find_arcs(messages)
    assert len(after) == before - len(chosen)
    assert all(not a.is_orphan for a in after)  # no result lost its call
    assert not any(m.role == TOOL and not m.blocks for m in messages)
    open_before = sum(a.is_open for a in arcs) - sum(a.is_open for a in chosen)
    assert sum(a.is_open for a in after) == open_before  # no call lost its result


def test_anthropic_pairing_problems_are_all_listed_exactly() -> None:
    """Several faults in one conversation: each is reported once, in order, with the right message numbers."""
    messages = [
        msg("m0", USER, result("orphan")),                                  # a result with no message before it
        msg("m1", ASSISTANT, call("a"), call("b")),
        msg("m2", USER, result("a"), result("a"), text("note"), result("b")),  # twice; b after text
        msg("m3", ASSISTANT, call("c"), result("c")),                       # a result in an assistant message
        msg("m4", ASSISTANT, text("no answer")),                            # c unanswered: an assistant follows
        msg("m5", USER, text("hi")),
        msg("m6", ASSISTANT, call("d")),
        msg("m7", USER, result("e")),                                       # d not answered; e answers nothing
        msg("m8", ASSISTANT, call("orphan")),             # nothing follows (and m0 is not its answer)
    ]
    assert validate_pairing(messages, ANTHROPIC) == [
        "message 0: tool_result orphan answers no tool_use of message -1",
        "message 2: tool_result a appears twice",
        "message 2: tool_result b comes after text or media",
        "message 3: tool_use c is unanswered: message 4 is assistant",
        "message 3: an assistant message carries tool_result blocks",
        "message 6: tool_use d has no tool_result in message 7",
        "message 7: tool_result e answers no tool_use of message 6",
        "message 8: tool_use orphan is unanswered: no message follows",
    ]
    # A user message with text only after an answered call is fine; a user turn never needs results.
    assert validate_pairing([msg("u", USER, text("x")), msg("a", ASSISTANT, call("k")),
                             msg("t", USER, result("k"), text("thanks"))], ANTHROPIC) == []


def test_tool_run_pairing_problems_are_all_listed_exactly() -> None:
    messages = [
        msg("t0", TOOL, result("early")),                 # no assistant before the run
        msg("a1", ASSISTANT, call("x"), call("x"), call("y")),
        msg("t2", TOOL, result("x")),
        msg("t3", TOOL, result("z")),                      # answers nothing of message 1
        msg("u4", USER, text("next"), result("w")),        # x (second) and y unanswered; a user carries a result
        msg("a5", ASSISTANT, call("q")),
    ]
    assert validate_pairing(messages, OPENAI) == [
        "message 0: tool result early answers no open call of the preceding assistant message",
        "message 3: tool result z answers no open call of message 1",
        "message 1: tool call x is not answered before message 4",
        "message 1: tool call y is not answered before message 4",
        "message 4: a user message carries tool result w",
        "message 5: tool call q is unanswered at the end",
    ]
    assert validate_pairing(messages, PI) == [  # Pi fills unanswered calls itself
        "message 0: tool result early answers no open call of the preceding assistant message",
        "message 3: tool result z answers no open call of message 1",
        "message 4: a user message carries tool result w",
    ]


def test_opencode_pairing_problems_are_all_listed_exactly() -> None:
    messages = [msg("m0", ASSISTANT, call("a"), result("a"), result("b")), msg("m1", ASSISTANT, result("a")),
                msg("m2", ASSISTANT, call("c"), result("c"))]
    assert validate_pairing(messages, OPENCODE) == [
        "message 0: tool result b has no call in its own message",
        "message 1: tool result a has no call in its own message",
    ]


def test_arc_names_come_from_the_call_else_from_a_result() -> None:
    messages = [msg("a0", ASSISTANT, call("k", "grep")), msg("t1", TOOL, result("k", name="ignored")),
                msg("t2", TOOL, result("orphan", name="read")), msg("a3", ASSISTANT, call("n", None)),
                msg("t4", TOOL, result("n"), result("n", name="bash"))]
    assert [(a.tool_id, a.tool_name, a.owner) for a in find_arcs(messages)] == [
        ("k", "grep", "a0"), ("orphan", "read", "t2"), ("n", "bash", "a3")]


def test_two_open_calls_of_one_id_are_answered_nearest_first() -> None:
    """A call answered after a newer call of its id is still that call's answer, not a duplicate of the newer."""
    messages = [msg("a0", ASSISTANT, call("x", "first"), call("x", "second")),
                msg("t1", TOOL, result("x", "one")), msg("t2", TOOL, result("x", "two"))]
    assert [(a.call, a.results, a.tool_name) for a in find_arcs(messages)] == [
        ((0, 0), ((2, 0),), "first"), ((0, 1), ((1, 0),), "second")]


def test_results_and_calls_in_one_message_pair_by_id() -> None:
    # a result whose id has no call anywhere stays an orphan even when another call follows it
    lone = [msg("m0", ASSISTANT, result("k", name="read"), call("j", "bash"))]
    assert [(a.tool_id, a.call, a.results) for a in find_arcs(lone)] == [("k", None, ((0, 0),)), ("j", (0, 1), ())]
    # result, its call, then a repeated result: the repeat joins the same arc
    repeat = [msg("m0", ASSISTANT, result("k"), call("k", "read"), result("k"))]
    assert [(a.call, a.results) for a in find_arcs(repeat)] == [((0, 1), ((0, 0), (0, 2)))]


def test_remove_arcs_takes_arcs_and_ids_together_once_each() -> None:
    messages = anthropic_parallel()
    a, b, _ = find_arcs(messages)
    removal = remove_arcs(messages, [a, a, "b", b])
    assert removal.arcs == [a, b] and removal.blocks == 4
    assert [x.tool_id for x in messages[1].blocks if x.kind == TOOL_CALL] == ["c"]
    assert [x.tool_id for x in messages[2].blocks] == ["c"]


@pytest.mark.parametrize("stale", [Arc("x", (4, 0), ()), Arc("x", (1, 9), ()), Arc("b", (1, 1), ()),
                                   Arc("a", (0, 0), ())])
def test_an_arc_that_does_not_point_at_its_tool_block_is_refused(stale: Arc) -> None:
    messages = anthropic_parallel()
    with pytest.raises(ValueError, match=rf"^stale arc '{stale.tool_id}': no matching tool block at "
                                         rf"\({stale.call[0]}, {stale.call[1]}\)$"):
        remove_arcs(messages, [stale])
    assert [len(x.blocks) for x in messages] == [1, 4, 3, 1]  # nothing removed


def test_anthropic_checks_the_first_pair_and_only_assistant_calls() -> None:
    assert validate_pairing([msg("a0", ASSISTANT, call("x")), msg("u1", USER, result("x"))], ANTHROPIC) == []
    # a tool_use in a user turn is passed through as sent: only assistant calls need answers (repair could not
    # answer one there anyway)
    assert validate_pairing([msg("u0", USER, text("hi"), call("x"))], ANTHROPIC) == []


def test_an_arc_without_any_name_is_unnamed() -> None:
    messages = [msg("a0", ASSISTANT, call("n", None), call("o", None)), msg("t1", TOOL, result("n"))]
    assert [(a.tool_id, a.tool_name) for a in find_arcs(messages)] == [("n", None), ("o", None)]
