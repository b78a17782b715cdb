"""Pi AgentMessage codec: exact round trips on real sessions, write-back of edits, rendering, bad shapes."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire import pi

REAL = ["pi_large-session.jsonl", "pi_before-compaction.jsonl"]
USAGE = {"input": 10, "output": 5, "cacheRead": 90, "cacheWrite": 7, "totalTokens": 112,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def pi_messages(path) -> list[dict]:
    """The `message` of every session entry of type "message" (what the `context` event carries)."""
    return [e["message"] for e in map(orjson.loads, path.read_bytes().splitlines()) if e["type"] == "message"]


def sample() -> list[dict]:
    return [
        {"role": "compactionSummary", "summary": "We fixed the parser.", "tokensBefore": 50000, "timestamp": 1},
        {"role": "branchSummary", "summary": "Tried a branch.", "fromId": "ab12cd34", "timestamp": 2},
        {"role": "user", "content": "read the parser", "timestamp": "2025-11-20T23:33:01.550Z"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look first.", "thinkingSignature": "EqQBsig=="},
            {"type": "text", "text": "Reading."},
            {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "p.ts"}, "partialJson": "{"},
            {"type": "toolCall", "id": "call_2", "name": "bash", "arguments": {"command": "ls"}},
        ], "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": USAGE,
         "stopReason": "toolUse", "timestamp": 3},
        {"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
         "content": [{"type": "text", "text": "line 1"}, {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
                     {"type": "text", "text": "line 2"}], "details": {"diff": "x"}, "isError": False, "timestamp": 4},
        {"role": "toolResult", "toolCallId": "call_2", "toolName": "bash", "content": [{"type": "text", "text": "a"}],
         "isError": True, "timestamp": 5},
        {"role": "bashExecution", "command": "ls", "output": "AGENTS.md\n", "exitCode": 0, "cancelled": False,
         "truncated": False, "timestamp": 6},
        {"role": "bashExecution", "command": "secret", "output": "x", "exitCode": 0, "cancelled": False,
         "truncated": False, "excludeFromContext": True, "timestamp": 7},
        {"role": "custom", "customType": "note", "content": [{"type": "text", "text": "ext says hi"}],
         "display": True, "timestamp": 8},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "data": "AAA",
                                                                         "mimeType": "image/jpeg"}], "timestamp": 9},
        {"role": "somethingNew", "payload": [1, 2], "timestamp": 10},
        {"role": "user", "content": "read the parser", "timestamp": "2025-11-20T23:33:01.550Z"},
    ]


def unanswered(out: list[dict]) -> set[str]:
    """Call ids the input itself never answers (Pi keeps aborted/errored turns; convertToLlm skips them)."""
    calls = {b["id"] for x in out if x["role"] == "assistant" for b in x["content"] if b["type"] == "toolCall"}
    return calls - {x["toolCallId"] for x in out if x["role"] == "toolResult"}


def pairing_ok(out: list[dict], open_ok: frozenset[str] | set[str] = frozenset()) -> bool:
    """Every toolCall (bar `open_ok`) is answered by a later toolResult; every toolResult answers an earlier call."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for msg in out:
        if msg["role"] == "assistant":
            open_calls |= {b["id"] for b in msg["content"] if b["type"] == "toolCall"}
        elif msg["role"] == "toolResult":
            if msg["toolCallId"] not in open_calls:
                return False
            answered.add(msg["toolCallId"])
    return open_calls - set(open_ok) == answered


# ------------------------------------------------------------------------------------------ decode


def test_decode_maps_every_role() -> None:
    msgs = pi.decode(sample())
    roles = [(x.role, x.compaction, x.synthetic) for x in msgs]
    assert roles == [
        (m.USER, m.COMPACTION_SUMMARY, False), (m.USER, m.BRANCH_SUMMARY, False), (m.USER, None, False),
        (m.ASSISTANT, None, False), (m.TOOL, None, False), (m.TOOL, None, False), (m.USER, None, False),
        (m.USER, None, False), (m.USER, None, True), (m.USER, None, False), (m.USER, None, False),
        (m.USER, None, False)]
    assert [x.ordinal for x in msgs] == list(range(12))
    summary, _, user, asst, read, bash_res, bash, excluded, custom, img, unknown, repeat = msgs
    assert summary.blocks[0].text == "We fixed the parser." and summary.blocks[0].key == "summary"
    assert user.created_at == 1763681581550 and user.blocks[0].key == "p0" and user.blocks[0].text == "read the parser"
    assert user.id != repeat.id and repeat.id == user.id + ".1" and user.id.startswith("h")
    assert [(b.kind, b.key) for b in asst.blocks] == [(m.REASONING, "p0"), (m.TEXT, "p1"), (m.TOOL_CALL, "p2"),
                                                      (m.TOOL_CALL, "p3")]
    assert asst.blocks[0].meta == {"thinkingSignature": "EqQBsig=="}
    assert asst.usage == m.Usage(10, 5, 90, 7) and (asst.provider, asst.model) == ("anthropic", "claude-sonnet-4-5")
    assert (asst.blocks[2].tool_id, asst.blocks[2].tool_name, asst.blocks[2].input) == ("call_1", "read",
                                                                                      {"path": "p.ts"})
    assert [(b.kind, b.key) for b in read.blocks] == [(m.TOOL_RESULT, "out"), (m.MEDIA, "p1")]
    assert read.blocks[0].text == "line 1\nline 2" and read.blocks[0].tool_id == "call_1"
    assert read.blocks[1].media_type == "image/png"
    assert bash_res.blocks[0].is_error and bash_res.blocks[0].tool_name == "bash"
    assert bash.blocks[0].kind == m.TEXT and bash.blocks[0].text == "AGENTS.md\n"
    assert bash.blocks[0].meta == {"command": "ls", "exitCode": 0}
    assert excluded.blocks[0].kind == m.OPAQUE and unknown.blocks[0].kind == m.OPAQUE
    assert custom.blocks[0].text == "ext says hi" and img.blocks[1].kind == m.MEDIA


# -------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("name", REAL)
def test_real_session_round_trip_every_message(sessions_dir, name: str) -> None:
    src = pi_messages(sessions_dir / name)
    reference = pi_messages(sessions_dir / name)
    out = pi.encode(pi.decode(src))
    assert len(out) == len(reference)
    for i, (got, want) in enumerate(zip(out, reference, strict=True)):
        assert orjson.dumps(got) == orjson.dumps(want), f"message {i} differs"


def test_sample_round_trip_is_byte_identical() -> None:
    src = sample()
    before = orjson.dumps(src)
    out = pi.encode(pi.decode(src))
    assert orjson.dumps(out) == before and out[3] is src[3]


texts = st.text(max_size=30)
json_leaf = st.none() | st.booleans() | st.integers(-5, 10**6) | texts
json_value = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
                          max_leaves=6)
text_block = st.builds(lambda t: {"type": "text", "text": t}, texts)
image_block = st.builds(lambda d, mt: {"type": "image", "data": d, "mimeType": mt}, texts, texts)
other_block = st.builds(lambda t, extra: {**extra, "type": t}, st.sampled_from(["audio", "zzz"]),
                        st.dictionaries(texts, json_value, max_size=2))
thinking_block = st.builds(lambda t, extra: {"type": "thinking", "thinking": t, **extra}, texts,
                           st.fixed_dictionaries({}, optional={"thinkingSignature": texts, "redacted": st.booleans()}))
call_block = st.builds(lambda i, n, a: {"type": "toolCall", "id": i, "name": n, "arguments": a}, texts, texts,
                       st.dictionaries(texts, json_value, max_size=3))
stamp = st.integers(0, 10**13) | st.just("2025-12-08T23:58:22.057Z") | st.just("not a date")
user_content = texts | st.lists(st.one_of(text_block, image_block, other_block), max_size=4)
pi_message = st.one_of(
    st.builds(lambda c, t: {"role": "user", "content": c, "timestamp": t}, user_content, stamp),
    st.builds(lambda c, t, u: {"role": "assistant", "content": c, "provider": "p", "model": "x", "usage": u,
                               "stopReason": "stop", "timestamp": t},
              st.lists(st.one_of(text_block, thinking_block, call_block, other_block), max_size=5), stamp,
              st.fixed_dictionaries({"input": st.integers(0, 99), "output": st.integers(0, 99),
                                     "cacheRead": st.integers(0, 99), "cacheWrite": st.integers(0, 99)})),
    st.builds(lambda i, c, e, d: {"role": "toolResult", "toolCallId": i, "toolName": "bash", "content": c,
                                  "isError": e, "details": d, "timestamp": 1},
              texts, st.lists(st.one_of(text_block, image_block, other_block), max_size=4) | texts, st.booleans(),
              json_value),
    st.builds(lambda c, o, x: {"role": "bashExecution", "command": c, "output": o, "exitCode": 0,
                               "cancelled": False, "truncated": False, **x}, texts, texts,
              st.fixed_dictionaries({}, optional={"excludeFromContext": st.booleans(), "fullOutputPath": texts})),
    st.builds(lambda c: {"role": "custom", "customType": "t", "content": c, "display": False}, user_content),
    st.builds(lambda s: {"role": "compactionSummary", "summary": s, "tokensBefore": 3}, texts),
    st.builds(lambda s: {"role": "branchSummary", "summary": s, "fromId": "f"}, texts),
    st.builds(lambda r, x: {**x, "role": r}, st.sampled_from(["hookMessage2", "weird"]),
              st.dictionaries(texts, json_value, max_size=3)),
)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pi_message, max_size=8))
def test_round_trip_generated(src: list) -> None:
    before = orjson.dumps(src)
    assert orjson.dumps(pi.encode(pi.decode(src))) == before


def visible(msgs: list[m.Message]) -> list[tuple[str, str]]:
    return [(b.kind, b.text) for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.TOOL_RESULT)]


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pi_message, max_size=8), st.booleans())
def test_edited_texts_read_back(src: list, replace: bool) -> None:
    msgs = pi.decode(src)
    for n, b in enumerate(b for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.TOOL_RESULT)):
        b.text = f"[dropped §{n}§]" if replace else f"§{n}§ {b.text}"
    expected = visible(msgs)
    assert visible(pi.decode(orjson.loads(orjson.dumps(pi.encode(msgs))))) == expected


# ------------------------------------------------------------------------------------------- edits


def test_prefix_goes_into_first_text_part() -> None:
    msgs = pi.decode(sample())
    for b in (msgs[0].blocks[0], msgs[2].blocks[0], msgs[3].blocks[1], msgs[4].blocks[0], msgs[6].blocks[0]):
        b.text = "§1§ " + b.text
    out = pi.encode(msgs)
    assert out[0]["summary"] == "§1§ We fixed the parser."
    assert out[2]["content"] == "§1§ read the parser"
    assert out[3]["content"][1] == {"type": "text", "text": "§1§ Reading."}
    assert out[4]["content"] == [{"type": "text", "text": "§1§ line 1"},
                                 {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
                                 {"type": "text", "text": "line 2"}]
    assert out[6]["output"] == "§1§ AGENTS.md\n" and out[6]["command"] == "ls"
    assert out[4]["details"] == {"diff": "x"}


def test_replacing_a_multi_part_result_keeps_one_text_part() -> None:
    msgs = pi.decode(sample())
    msgs[4].blocks[0].text = "[dropped §3§]"
    msgs[4].blocks.pop()  # drop the image too
    out = pi.encode(msgs)
    assert out[4]["content"] == [{"type": "text", "text": "[dropped §3§]"}]
    assert out[4]["toolCallId"] == "call_1" and out[4]["isError"] is False


def test_removing_a_tool_call_and_its_result_keeps_pairing() -> None:
    msgs = pi.decode(sample())
    msgs[3].blocks = [b for b in msgs[3].blocks if b.tool_id != "call_2"]
    msgs = [x for x in msgs if not any(b.kind == m.TOOL_RESULT and b.tool_id == "call_2" for b in x.blocks)]
    out = orjson.loads(orjson.dumps(pi.encode(msgs)))
    assert pairing_ok(out)
    assert [b["type"] for b in out[3]["content"]] == ["thinking", "text", "toolCall"]
    assert sum(x["role"] == "toolResult" for x in out) == 1


@pytest.mark.parametrize("name", REAL)
def test_dropping_old_turns_in_real_session_keeps_pairing(sessions_dir, name: str) -> None:
    src = pi_messages(sessions_dir / name)
    open_ok = unanswered(src)
    msgs = pi.decode(src)
    dropped = {b.tool_id for x in msgs[: len(msgs) // 2] for b in x.blocks if b.kind == m.TOOL_CALL}
    for x in msgs:
        x.blocks = [b for b in x.blocks if not (b.kind == m.TOOL_CALL and b.tool_id in dropped)]
    kept = [x for x in msgs if not (x.role == m.TOOL and x.blocks[0].tool_id in dropped)]
    for b in (b for x in kept for b in x.blocks if b.kind == m.TOOL_RESULT):
        b.text = "[dropped]"
    out = orjson.loads(orjson.dumps(pi.encode(kept)))
    assert pairing_ok(out, open_ok) and all(x["content"] == [{"type": "text", "text": "[dropped]"}]
                                   for x in out if x["role"] == "toolResult")


def test_thinking_blocks_are_byte_identical_after_encode(sessions_dir) -> None:
    src = pi_messages(sessions_dir / "pi_before-compaction.jsonl")
    before = [orjson.dumps(b) for x in src if x["role"] == "assistant" for b in x["content"] if b["type"] == "thinking"]
    msgs = pi.decode(src)
    for b in (b for x in msgs for b in x.blocks if b.kind == m.TEXT):
        b.text = "§0§ " + b.text
    out = pi.encode(msgs)
    after = [orjson.dumps(b) for x in out if x["role"] == "assistant" for b in x["content"] if b["type"] == "thinking"]
    assert len(before) == 49 and after == before


def test_removed_single_field_block_empties_the_field() -> None:
    msgs = pi.decode(sample())
    msgs[6].blocks = []
    msgs[2].blocks = []
    out = pi.encode(msgs)
    assert out[6]["output"] == "" and out[2]["content"] == ""


# ---------------------------------------------------------------------------------- fresh rendering


def strip_raw(msgs: list[m.Message]) -> list[m.Message]:
    for x in msgs:
        x.raw = None
        for b in x.blocks:
            b.raw = None
    return msgs


def summary_of(msgs: list[m.Message]) -> tuple[list, list, dict]:
    text = [b.text for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.REASONING)]
    calls = [(b.tool_id, b.tool_name, b.input) for x in msgs for b in x.blocks if b.kind == m.TOOL_CALL]
    results = {b.tool_id: (b.text, b.is_error) for x in msgs for b in x.blocks if b.kind == m.TOOL_RESULT}
    return text, calls, results


@pytest.mark.parametrize("name", REAL)
def test_render_real_session_from_scratch(sessions_dir, name: str) -> None:
    src = pi_messages(sessions_dir / name)
    decoded = strip_raw(pi.decode(src))
    out = orjson.loads(orjson.dumps(pi.encode(decoded)))
    back = pi.decode(out)
    assert summary_of(back) == summary_of(decoded)
    assert [(x.role, x.compaction) for x in back] == [(x.role, x.compaction) for x in decoded]
    assert pairing_ok(out, unanswered(src))


def test_render_anthropic_style_user_results_first() -> None:
    call = m.Message(id="a", role=m.ASSISTANT, blocks=[m.Block(m.TOOL_CALL, tool_id="t1", tool_name="ls", input={})])
    user = m.Message(id="u", role=m.USER, blocks=[m.Block(m.TOOL_RESULT, text="x", tool_id="t1", is_error=True),
                                                  m.Block(m.TEXT, text="next?")])
    summary = m.Message(id="s", role=m.USER, compaction=m.COMPACTION_SUMMARY, blocks=[m.Block(m.TEXT, text="sum")])
    out = pi.encode([summary, call, user])
    assert [x["role"] for x in out] == ["compactionSummary", "assistant", "toolResult", "user"]
    assert out[2] == {"role": "toolResult", "toolCallId": "t1", "toolName": "ls",
                      "content": [{"type": "text", "text": "x"}], "isError": True, "timestamp": 0}
    assert out[3]["content"] == [{"type": "text", "text": "next?"}] and pairing_ok(out)


def test_fresh_blocks_in_existing_messages() -> None:
    msgs = pi.decode(sample())
    msgs[2].blocks.insert(0, m.Block(m.TEXT, text="<session-history/>"))
    msgs[4].blocks[0] = m.Block(m.TOOL_RESULT, text="[dropped §2§]", tool_id="call_1")
    out = pi.encode(msgs)
    assert out[2]["content"] == [{"type": "text", "text": "<session-history/>"},
                                 {"type": "text", "text": "read the parser"}]
    assert out[4]["content"] == [{"type": "image", "data": "iVBOR", "mimeType": "image/png"},
                                 {"type": "text", "text": "[dropped §2§]"}]


# -------------------------------------------------------------------------------------- bad shapes


def _with(index: int, mutate) -> list:
    src = sample()
    mutate(src[index])
    return src


@pytest.mark.parametrize(("src", "needle"), [
    ({"messages": []}, "array"),
    (_with(0, lambda x: x.pop("role")), "message 0: `role`"),
    (_with(0, lambda x: x.update(summary=None)), "message 0: `summary`"),
    (_with(2, lambda x: x.update(content=5)), "message 2: `content`"),
    (_with(3, lambda x: x.update(content="text")), "message 3: `content`"),
    (_with(3, lambda x: x["content"].append(7)), "message 3: `content[4]`"),
    (_with(3, lambda x: x["content"][1].update(text=[1])), "message 3: `content[1].text`"),
    (_with(3, lambda x: x["content"][2].pop("id")), "message 3: `content[2].id`"),
    (_with(3, lambda x: x["content"][3].update(name=None)), "message 3: `content[3].name`"),
    (_with(4, lambda x: x.pop("toolCallId")), "message 4: `toolCallId`"),
    (_with(4, lambda x: x.update(content=None)), "message 4: `content`"),
    (_with(5, lambda x: x["content"][0].update(text=None)), "message 5: `content[0].text`"),
    (_with(6, lambda x: x.update(output=3)), "message 6: `output`"),
    ([*sample(), "x"], "message 12: `message`"),
])
def test_bad_shapes_name_the_index(src, needle: str) -> None:
    with pytest.raises(BadInput) as err:
        pi.decode(src)
    assert needle in err.value.one_line() and "\n" not in err.value.one_line()


def test_harness_constant() -> None:
    assert pi.HARNESS == m.PI


def _one(message: dict) -> list:
    return [message]


@pytest.mark.parametrize(("src", "message"), [
    ({"messages": []}, "pi input must be an array of AgentMessage objects (got dict)"),
    (["x"], "pi message 0: `message` must be an object (got str)"),
    (_one({"role": 3}), "pi message 0: `role` must be a string (got int)"),
    (_one({"role": "user", "content": 5}), "pi message 0: `content` must be a string or an array (got int)"),
    (_one({"role": "assistant", "content": "text"}), "pi message 0: `content` must be an array (got str)"),
    (_one({"role": "compactionSummary", "summary": None}), "pi message 0: `summary` must be a string (got NoneType)"),
    (_one({"role": "user", "content": [{"type": "text", "text": "a"}, 7]}),
     "pi message 0: `content[1]` must be an object (got int)"),
    (_one({"role": "user", "content": [{"type": "text", "text": [1]}]}),
     "pi message 0: `content[0].text` must be a string (got list)"),
    (_one({"role": "assistant", "content": [{"type": "toolCall", "name": "x"}]}),
     "pi message 0: `content[0].id` must be a string (got NoneType)"),
    (_one({"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": 1.5}]}),
     "pi message 0: `content[0].name` must be a string (got float)"),
    (_one({"role": "toolResult", "content": []}), "pi message 0: `toolCallId` must be a string (got NoneType)"),
    (_one({"role": "toolResult", "toolCallId": "c", "content": None}),
     "pi message 0: `content` must be an array (got NoneType)"),
    (_one({"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": False}]}),
     "pi message 0: `content[0].text` must be a string (got bool)"),
    (_one({"role": "bashExecution", "output": 3}), "pi message 0: `output` must be a string (got int)"),
    # non-None odd values, so the message names the value's own type (not NoneType)
    (_one({"role": "branchSummary", "summary": 5}), "pi message 0: `summary` must be a string (got int)"),
    (_one({"role": "assistant", "content": [{"type": "toolCall", "id": 3, "name": "x"}]}),
     "pi message 0: `content[0].id` must be a string (got int)"),
    (_one({"role": "toolResult", "toolCallId": 1, "content": []}),
     "pi message 0: `toolCallId` must be a string (got int)"),
    (_one({"role": "toolResult", "toolCallId": "c", "content": 5}),
     "pi message 0: `content` must be an array (got int)"),
    ([{"role": "user", "content": "hi"}, {"role": "toolResult", "toolCallId": "c", "content": [7]}],
     "pi message 1: `content[0]` must be an object (got int)"),
])
def test_bad_shapes_say_exactly_what_was_found(src: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        pi.decode(src)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_render_fresh_messages_exactly() -> None:
    """Every fresh form: assistant fields and stop reason, signatures, call arguments, media, tool and summary turns."""
    b = m.Block
    assistant = m.Message("a", m.ASSISTANT, [
        b(m.REASONING, text="r1", meta={"thinkingSignature": "tsig", "signature": "other"}),
        b(m.REASONING, text="r2", meta={"signature": 5, "anthropic": {"signature": "nested"}, "redacted": True}),
        b(m.REASONING, text="r3", meta=None),
        b(m.REASONING, text="r4", meta={"signature": "asig", "anthropic": {"signature": "nested"}}),
        b(m.TEXT, text="hello"),
        b(m.TOOL_CALL, tool_id="c1", tool_name="read", input={"p": 1}),
        b(m.TOOL_CALL, tool_id=None, tool_name=None, input=None),
        b(m.TOOL_CALL, tool_id="c3", tool_name="x", input="raw args"),
        b(m.OPAQUE),
    ], created_at=42, provider="anthropic", model="claude", usage=m.Usage(10, 5, 100, 7))
    plain = m.Message("b", m.ASSISTANT, [b(m.TEXT, text="done")])
    tool = m.Message("t", m.TOOL, [b(m.TOOL_RESULT, text="out", tool_id="c1"), b(m.TEXT, text="extra")],
                     created_at=43)
    tool_text = m.Message("t2", m.TOOL, [b(m.TEXT, text="note")])
    tool_nothing = m.Message("t3", m.TOOL, [b(m.OPAQUE)])
    media = m.Message("u", m.USER, [
        b(m.MEDIA, media_type="image/png", meta={"data": "AA", "url": "https://x"}),
        b(m.MEDIA, media_type=None, meta={"url": "data:image/gif;base64,R0"}),
        b(m.MEDIA, media_type="image/jpeg", meta={"url": "data:image/png;base64,QQ"}),
        b(m.MEDIA, media_type=None, meta={"url": "https://x/a.pdf"}),
        b(m.MEDIA, media_type="application/pdf", meta={"filename": "a.pdf", "url": "https://y"}),
        b(m.MEDIA, media_type=None, meta=None),
        b(m.MEDIA, media_type="image/png", meta={"url": "data:image/png,QQ"}),
        b(m.MEDIA, media_type="image/png", meta={"url": "xdata:image/png;base64,QQ"}),
    ], created_at=44)
    branch = m.Message("s", m.USER, [b(m.TEXT, text="b1"), b(m.TEXT, text="b2")], compaction=m.BRANCH_SUMMARY,
                       created_at=45)
    compacted_result = m.Message("s2", m.USER, [b(m.TOOL_RESULT, text="r", tool_id="c3", tool_name="named",
                                                  is_error=True)], compaction=m.COMPACTION_SUMMARY)
    usage = {"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 7, "totalTokens": 122,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    no_usage = {**usage, "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    assert pi.encode([assistant, plain, tool, tool_text, tool_nothing, media, branch, compacted_result]) == [
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "r1", "thinkingSignature": "tsig"},
            {"type": "thinking", "thinking": "r2", "thinkingSignature": "nested", "redacted": True},
            {"type": "thinking", "thinking": "r3"},
            {"type": "thinking", "thinking": "r4", "thinkingSignature": "asig"},
            {"type": "text", "text": "hello"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}},
            {"type": "toolCall", "id": "", "name": "unknown", "arguments": {}},
            {"type": "toolCall", "id": "c3", "name": "x", "arguments": {"input": "raw args"}}],
         "provider": "anthropic", "model": "claude", "usage": usage, "stopReason": "toolUse", "timestamp": 42},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}], "usage": no_usage, "stopReason": "stop",
         "timestamp": 0},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "read",  # the name of the call it answers
         "content": [{"type": "text", "text": "out"}, {"type": "text", "text": "extra"}], "isError": False,
         "timestamp": 43},
        {"role": "user", "content": [{"type": "text", "text": "note"}], "timestamp": 0},
        {"role": "user", "content": [
            {"type": "image", "data": "AA", "mimeType": "image/png"},
            {"type": "image", "data": "R0", "mimeType": "image/gif"},
            {"type": "image", "data": "QQ", "mimeType": "image/jpeg"},
            {"type": "text", "text": "[attachment: https://x/a.pdf]"},
            {"type": "text", "text": "[attachment: a.pdf]"},
            {"type": "text", "text": "[attachment: application/octet-stream]"},
            {"type": "text", "text": "[attachment: data:image/png,QQ]"},
            {"type": "text", "text": "[attachment: xdata:image/png;base64,QQ]"}], "timestamp": 44},
        {"role": "branchSummary", "summary": "b1\nb2", "fromId": "", "timestamp": 45},
        {"role": "toolResult", "toolCallId": "c3", "toolName": "named", "content": [{"type": "text", "text": "r"}],
         "isError": True, "timestamp": 0},
    ]


def test_a_result_without_text_parts_gets_its_new_text_first() -> None:
    image = {"type": "image", "data": "AA", "mimeType": "image/png"}
    msgs = pi.decode([{"role": "toolResult", "toolCallId": "c", "toolName": "shot", "content": [image],
                       "isError": False, "timestamp": 1}])
    msgs[0].blocks[0].text = "[dropped §4§]"
    assert pi.encode(msgs)[0]["content"] == [{"type": "text", "text": "[dropped §4§]"}, image]


def test_render_summary_unnamed_result_and_malformed_data_url() -> None:
    b = m.Block
    summary = m.Message("s", m.USER, [b(m.TEXT, text="goal"), b(m.TEXT, text="state")], compaction=m.COMPACTION_SUMMARY,
                        created_at=9)
    unnamed = m.Message("t", m.TOOL, [b(m.TOOL_RESULT, text="x", tool_id=None)])
    twice = {"url": "data:image/png;base64,QQ;base64,Qg"}
    media = m.Message("u", m.USER, [b(m.MEDIA, media_type="image/png", meta=twice)])
    assert pi.encode([summary, unnamed, media]) == [
        {"role": "compactionSummary", "summary": "goal\nstate", "tokensBefore": 0, "timestamp": 9},
        {"role": "toolResult", "toolCallId": "", "toolName": "", "content": [{"type": "text", "text": "x"}],
         "isError": False, "timestamp": 0},
        # the payload after the first ";base64," is passed on as it is (never repaired)
        {"role": "user", "content": [{"type": "image", "data": "QQ;base64,Qg", "mimeType": "image/png"}],
         "timestamp": 0}]


def test_skim_gives_known_roles_only_id_role_and_timestamp() -> None:
    """The first `skim` messages of a known role get id, digest, role, ordinal and timestamp, no blocks; other
    roles, non-objects and later messages get the full decode (ids and digests as the full decode gives them)."""
    src = sample()
    src[8]["timestamp"] = 1.5e12
    whole = pi.decode(src)
    skimmed = pi.decode(src, skim=11)
    plain = [(x.id, x.digest, x.role, x.ordinal, x.created_at, x.raw) for x in whole]
    assert [(x.id, x.digest, x.role, x.ordinal, x.created_at, x.raw) for x in skimmed] == plain
    assert [x.blocks == [] for x in skimmed] == [False, False, True, True, True, True, False, False, True, True,
                                                 False, False]
    assert [x.blocks for x in skimmed[10:]] == [x.blocks for x in whole[10:]]
    assert (skimmed[3].usage, skimmed[3].provider, skimmed[8].synthetic) == (None, None, False)
    assert skimmed[8].created_at == 1_500_000_000_000 and skimmed[2].created_at == 1763681581550
    assert pi.encode(pi.decode(sample(), skim=2)) == sample()  # the summaries are always decoded whole
    with pytest.raises(BadInput, match="pi message 0: `message` must be an object"):
        pi.decode(["not an object"], skim=1)


def test_decode_every_field_exactly() -> None:
    """Every field of every block and message a decode gives, lenient reads included (odd types read as absent)."""
    src = [
        {"role": "user", "content": [
            {"type": "image", "mimeType": 5, "data": ["x"]}, {"type": "image", "mimeType": "image/png", "data": "AA"},
            {"type": "audio", "x": 1}]},
        {"role": "hookMessage", "content": "hook", "timestamp": True},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": 5},
            {"type": "thinking", "thinking": "t", "redacted": False, "thinkingSignature": "sig", "other": 1},
            {"type": "toolCall", "id": "c1", "name": "read", "thoughtSignature": "ts"},
            {"type": "toolCall", "id": "c2", "name": "ls", "arguments": {"a": 1}}],
         "provider": 4, "model": "mo", "usage": {"input": 1.9, "output": True, "cacheRead": "3", "cacheWrite": 4},
         "timestamp": "2025-13-45"},
        {"role": "assistant", "content": [], "provider": "p", "model": None, "usage": [1]},
        {"role": "toolResult", "toolCallId": "c1", "toolName": 7, "content": "plain", "isError": "true"},
        {"role": "toolResult", "toolCallId": "c2", "toolName": "ls", "isError": True,
         "content": [{"type": "image", "data": "BB", "mimeType": "image/gif"}, {"type": "text", "text": "a"},
                     {"type": "text", "text": "b"}]},
        {"role": "bashExecution", "command": "pwd", "exitCode": 1},
        {"role": "bashExecution", "command": "x", "output": 5, "excludeFromContext": True},
    ]
    msgs = pi.decode(src)
    assert [(x.role, x.ordinal, x.created_at, x.usage, x.provider, x.model, x.synthetic, x.compaction)
            for x in msgs] == [
        (m.USER, 0, None, None, None, None, False, None),
        (m.USER, 1, None, None, None, None, True, None),
        (m.ASSISTANT, 2, None, m.Usage(1, 0, 0, 4), None, "mo", False, None),
        (m.ASSISTANT, 3, None, None, "p", None, False, None),
        (m.TOOL, 4, None, None, None, None, False, None),
        (m.TOOL, 5, None, None, None, None, False, None),
        (m.USER, 6, None, None, None, None, False, None),
        (m.USER, 7, None, None, None, None, False, None)]
    fields = [[(b.kind, b.key, b.text, b.original, b.tool_id, b.tool_name, b.input, b.is_error, b.media_type, b.meta)
               for b in x.blocks] for x in msgs]
    assert fields == [
        [(m.MEDIA, "p0", "", None, None, None, None, False, None, None),
         (m.MEDIA, "p1", "", None, None, None, None, False, "image/png", {"data": "AA"}),
         (m.OPAQUE, "p2", "", None, None, None, None, False, None, None)],
        [(m.TEXT, "p0", "hook", "hook", None, None, None, False, None, None)],
        [(m.REASONING, "p0", "", None, None, None, None, False, None, None),
         (m.REASONING, "p1", "t", None, None, None, None, False, None, {"thinkingSignature": "sig", "redacted": False}),
         (m.TOOL_CALL, "p2", "", None, "c1", "read", None, False, None, {"thoughtSignature": "ts"}),
         (m.TOOL_CALL, "p3", "", None, "c2", "ls", {"a": 1}, False, None, None)],
        [],
        [(m.TOOL_RESULT, "out", "plain", "plain", "c1", None, None, False, None, None)],
        [(m.TOOL_RESULT, "out", "a\nb", "a\nb", "c2", "ls", None, True, None, None),
         (m.MEDIA, "p0", "", None, None, None, None, False, "image/gif", {"data": "BB"})],
        [(m.TEXT, "output", "", "", None, None, None, False, None, {"command": "pwd", "exitCode": 1})],
        [(m.OPAQUE, "output", "", None, None, None, None, False, None, None)]]
    raws = [[b.raw for b in x.blocks] for x in msgs]
    assert raws[1] == ["hook"] and raws[4] == ["plain"] and raws[5][0] is src[5]["content"]
    assert raws[5][1] is src[5]["content"][0] and raws[6] == [src[6]] and raws[7] == [src[7]]
    assert all(b.raw is part for b, part in zip(msgs[2].blocks, src[2]["content"], strict=True))


def test_a_string_result_takes_fresh_blocks_as_a_list_and_empties_when_dropped() -> None:
    """A toolResult whose content is a string: with fresh blocks it becomes a list (its text first, if kept);
    with its text dropped and nothing fresh, the empty string."""
    def result(n: int) -> dict:
        return {"role": "toolResult", "toolCallId": f"c{n}", "toolName": "shot", "content": "plain", "isError": False,
                "timestamp": n}

    msgs = pi.decode([result(1), result(2), result(3), result(4)])
    msgs[0].blocks[0].text = "§1§ plain"
    msgs[0].blocks.append(m.Block(m.MEDIA, media_type="image/png", meta={"data": "AA"}))
    msgs[1].blocks = [m.Block(m.TEXT, text="note")]
    msgs[2].blocks = []
    msgs[3].blocks[0].text = "§4§ plain"
    assert [x["content"] for x in pi.encode(msgs)] == [
        [{"type": "text", "text": "§1§ plain"}, {"type": "image", "data": "AA", "mimeType": "image/png"}],
        [{"type": "text", "text": "note"}],
        "",
        "§4§ plain"]


def test_decode_summary_unknown_role_and_text_part_blocks_exactly() -> None:
    """A summary's one TEXT block, an unknown role's one OPAQUE block "p0" carrying the whole message, a non-string
    model read as absent, and a text part kept as its own object (so its extra fields survive an edit)."""
    src = [
        {"role": "compactionSummary", "summary": "S", "timestamp": 1},
        {"role": "somethingNew", "payload": [1], "timestamp": 2},
        {"role": "assistant", "content": [{"type": "text", "text": "hi", "textSignature": "sig"}], "model": 7},
    ]
    msgs = pi.decode(src)
    summary, unknown, asst = msgs
    assert [(b.kind, b.key, b.text, b.original) for b in summary.blocks] == [(m.TEXT, "summary", "S", "S")]
    assert summary.blocks[0].raw is src[0]
    assert [(b.kind, b.key) for b in unknown.blocks] == [(m.OPAQUE, "p0")] and unknown.blocks[0].raw is src[1]
    assert asst.model is None and asst.blocks[0].raw is src[2]["content"][0]
    asst.blocks[0].text = "§1§ hi"
    assert pi.encode(msgs)[2]["content"] == [{"type": "text", "text": "§1§ hi", "textSignature": "sig"}]


def test_a_dropped_excluded_bash_keeps_its_output() -> None:
    """Dropping the block of a bashExecution Pi never sends (`excludeFromContext` true) leaves its output alone;
    one that Pi sends (the flag false) is emptied."""
    def bash(n: int, excluded: bool) -> dict:
        return {"role": "bashExecution", "command": "c", "output": f"out{n}", "excludeFromContext": excluded,
                "timestamp": n}

    msgs = pi.decode([bash(1, True), bash(2, False)])
    for x in msgs:
        x.blocks = []
    assert [x["output"] for x in pi.encode(msgs)] == ["out1", ""]
