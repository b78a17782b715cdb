"""OpenCode v1 codec: exact round trips, write-back of edits, fresh rendering, bad shapes."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire import opencode, pi

SIG = {"anthropic": {"signature": "EqQBCkgIBxABGAIqQPl+sig/=="}}


def part(pid: str, ptype: str, **fields) -> dict:
    return {"id": pid, "sessionID": "ses_A", "messageID": "msg_x", "type": ptype, **fields}


def tool(pid: str, call: str, name: str, state: dict, **extra) -> dict:
    return part(pid, "tool", callID=call, tool=name, state=state, **extra)


def sample() -> list[dict]:
    """Every part type and tool state, a harness compaction (request + summary) and a tail."""
    t = {"start": 1, "end": 2}
    return [
        {"info": {"id": "msg_01", "sessionID": "ses_A", "role": "user", "time": {"created": 1000},
                  "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude"}},
         "parts": [part("prt_01", "compaction", auto=True, overflow=False)]},
        {"info": {"id": "msg_02", "sessionID": "ses_A", "role": "assistant", "parentID": "msg_01", "summary": True,
                  "mode": "compaction", "time": {"created": 1001, "completed": 1002}, "providerID": "anthropic",
                  "modelID": "claude", "cost": 0.1,
                  "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 90, "write": 7}}},
         "parts": [part("prt_02", "text", text="Goal: fix test_parse.")]},
        {"info": {"id": "msg_03", "sessionID": "ses_A", "role": "user", "time": {"created": 2000}},
         "parts": [part("prt_03", "text", text="Why does test_parse fail?"),
                   part("prt_04", "text", text="<file>tests/x.py</file>", synthetic=True),
                   part("prt_05", "text", text="hidden", ignored=True),
                   part("prt_06", "file", mime="image/png", filename="a.png", url="data:image/png;base64,iVBOR"),
                   part("prt_07", "agent", name="explore", source={"value": "@explore", "start": 0, "end": 8}),
                   part("prt_08", "subtask", prompt="look", description="d", agent="explore")]},
        {"info": {"id": "msg_04", "sessionID": "ses_A", "role": "assistant", "parentID": "msg_03",
                  "time": {"created": 3000, "completed": 3009}, "providerID": "anthropic", "modelID": "claude",
                  "tokens": {"input": 12000, "output": 300, "reasoning": 0, "cache": {"read": 11000, "write": 900}}},
         "parts": [part("prt_10", "step-start", snapshot="abc"),
                   part("prt_11", "reasoning", text="Need to read the test.", metadata=SIG, time={"start": 1}),
                   part("prt_12", "text", text="Let me read it."),
                   tool("prt_13", "toolu_1", "read", {"status": "completed", "input": {"filePath": "t.py"},
                                                      "output": "1 import pytest", "title": "t.py",
                                                      "metadata": {}, "time": t}),
                   tool("prt_14", "toolu_2", "bash", {"status": "completed", "input": {"command": "ls"},
                                                      "output": "a\nb", "title": "ls", "metadata": {},
                                                      "time": {"start": 1, "end": 2, "compacted": 5}}),
                   tool("prt_15", "toolu_3", "bash", {"status": "error", "input": {"command": "false"},
                                                      "error": "exit 1", "time": t}),
                   tool("prt_16", "toolu_4", "bash", {"status": "error", "input": {"command": "sleep"},
                                                      "error": "aborted", "time": t,
                                                      "metadata": {"interrupted": True, "output": "partial"}}),
                   tool("prt_17", "toolu_5", "edit", {"status": "running", "input": {"x": 1}, "time": {"start": 1}}),
                   tool("prt_18", "toolu_6", "edit", {"status": "pending", "input": {}, "raw": "{"},
                        metadata={"providerExecuted": False}),
                   part("prt_19", "snapshot", snapshot="def"),
                   part("prt_20", "patch", hash="h", files=["t.py"]),
                   part("prt_21", "retry", attempt=1, error={"name": "APIError"}, time={"created": 1}),
                   part("prt_22", "future-kind", whatever=[1, 2]),
                   part("prt_23", "step-finish", reason="tool-calls", cost=0, tokens={"input": 1})]},
    ]


def texts_of(msgs: list[m.Message]) -> list[tuple[str, str]]:
    return [(b.kind, b.text) for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.TOOL_RESULT)]


# ------------------------------------------------------------------------------------------ decode


def test_decode_maps_every_part_type() -> None:
    msgs = opencode.decode(sample())
    req, summary, user, asst = msgs
    assert [x.ordinal for x in msgs] == [0, 1, 2, 3]
    assert req.compaction == m.COMPACTION_REQUEST and req.blocks[0].kind == m.OPAQUE
    assert summary.compaction == m.COMPACTION_SUMMARY and summary.role == m.ASSISTANT
    assert summary.usage == m.Usage(10, 5, 90, 7)
    assert (summary.provider, summary.model, summary.created_at, summary.completed_at) == ("anthropic", "claude",
                                                                                             1001, 1002)
    assert [(b.kind, b.key, b.synthetic) for b in user.blocks] == [
        (m.TEXT, "prt_03", False), (m.TEXT, "prt_04", True), (m.OPAQUE, "prt_05", False),
        (m.MEDIA, "prt_06", False), (m.OPAQUE, "prt_07", False), (m.OPAQUE, "prt_08", False)]
    assert user.blocks[3].media_type == "image/png" and not user.synthetic
    kinds = [(b.kind, b.key) for b in asst.blocks]
    assert kinds == [
        (m.OPAQUE, "prt_10"), (m.REASONING, "prt_11"), (m.TEXT, "prt_12"),
        (m.TOOL_CALL, "prt_13"), (m.TOOL_RESULT, "prt_13:out"), (m.TOOL_CALL, "prt_14"), (m.TOOL_RESULT, "prt_14:out"),
        (m.TOOL_CALL, "prt_15"), (m.TOOL_RESULT, "prt_15:out"), (m.TOOL_CALL, "prt_16"), (m.TOOL_RESULT, "prt_16:out"),
        (m.TOOL_CALL, "prt_17"), (m.TOOL_CALL, "prt_18"),
        (m.OPAQUE, "prt_19"), (m.OPAQUE, "prt_20"), (m.OPAQUE, "prt_21"), (m.OPAQUE, "prt_22"), (m.OPAQUE, "prt_23")]
    by_key = {b.key: b for b in asst.blocks}
    assert by_key["prt_11"].meta == SIG
    assert (by_key["prt_13"].tool_id, by_key["prt_13"].tool_name, by_key["prt_13"].input) == ("toolu_1", "read",
                                                                                             {"filePath": "t.py"})
    assert by_key["prt_13:out"].text == by_key["prt_13:out"].original == "1 import pytest"
    assert by_key["prt_14:out"].text == opencode.CLEARED_OUTPUT and not by_key["prt_14:out"].changed
    assert by_key["prt_15:out"].is_error and by_key["prt_15:out"].text == "exit 1"
    assert not by_key["prt_16:out"].is_error and by_key["prt_16:out"].text == "partial"
    assert by_key["prt_18"].meta == {"providerExecuted": False}
    assert all(b.raw is asst.raw["parts"][4] for b in asst.blocks if b.key.startswith("prt_14"))


def test_synthetic_user_message() -> None:
    msg = {"info": {"id": "msg_9", "sessionID": "s", "role": "user", "time": {"created": 1}},
           "parts": [part("prt_1", "text", text="Continue if you have next steps", synthetic=True,
                          metadata={"compaction_continue": True})]}
    (decoded,) = opencode.decode([msg])
    assert decoded.synthetic and decoded.blocks[0].meta == {"compaction_continue": True}


# -------------------------------------------------------------------------------------- round trip


def test_round_trip_sample_is_byte_identical() -> None:
    src = sample()
    before = orjson.dumps(src)
    out = opencode.encode(opencode.decode(src))
    assert orjson.dumps(out) == before
    assert out[0] is src[0]  # edited in place, not copied


def test_encode_twice_is_idempotent() -> None:
    msgs = opencode.decode(sample())
    for b in msgs[2].blocks + msgs[3].blocks:
        if b.kind in (m.TEXT, m.TOOL_RESULT):
            b.text = "§9§ " + b.text
    first = orjson.dumps(opencode.encode(msgs))
    assert orjson.dumps(opencode.encode(msgs)) == first


ids = st.text("abcdef0123456789", min_size=1, max_size=6)
texts = st.text(max_size=30)
json_leaf = st.none() | st.booleans() | st.integers(-5, 10**6) | texts
json_value = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
                          max_leaves=6)
times = st.fixed_dictionaries({"start": st.integers(0, 10**13)}, optional={"end": st.integers(0, 10**13),
                                                                           "compacted": st.integers(1, 10**13)})
states = st.one_of(
    st.fixed_dictionaries({"status": st.just("pending"), "input": json_value, "raw": texts}),
    st.fixed_dictionaries({"status": st.just("running"), "input": json_value, "time": times}),
    st.fixed_dictionaries({"status": st.just("completed"), "input": json_value, "output": texts, "title": texts,
                           "metadata": st.dictionaries(texts, json_value, max_size=2), "time": times}),
    st.fixed_dictionaries({"status": st.just("error"), "input": json_value, "error": texts, "time": times},
                          optional={"metadata": st.fixed_dictionaries({"interrupted": st.booleans(),
                                                                       "output": texts})}),
)
parts = st.one_of(
    st.builds(lambda i, t, f: {"id": "prt_" + i, "type": "text", "text": t, **f}, ids, texts,
              st.fixed_dictionaries({}, optional={"synthetic": st.booleans(), "ignored": st.booleans(),
                                                  "metadata": st.dictionaries(texts, json_value, max_size=2)})),
    st.builds(lambda i, t, md: {"id": "prt_" + i, "type": "reasoning", "text": t, "metadata": md}, ids, texts,
              st.dictionaries(texts, json_value, max_size=2)),
    st.builds(lambda i, c, n, s: {"id": "prt_" + i, "type": "tool", "callID": c, "tool": n, "state": s},
              ids, ids, texts, states),
    st.builds(lambda i, mime: {"id": "prt_" + i, "type": "file", "mime": mime, "url": "file:///x"}, ids, texts),
    st.builds(lambda t, extra: {**extra, "type": t},
              st.sampled_from(["step-start", "step-finish", "snapshot", "patch", "agent", "subtask", "retry",
                               "compaction", "zzz"]), st.dictionaries(texts, json_value, max_size=3)),
)
infos = st.builds(
    lambda i, role, extra: {"id": "msg_" + i, "sessionID": "ses_h", "role": role, **extra},
    ids, st.sampled_from(["user", "assistant"]),
    st.fixed_dictionaries({}, optional={
        "time": st.fixed_dictionaries({"created": st.integers(0, 10**13)},
                                      optional={"completed": st.integers(0, 10**13)}),
        "summary": st.booleans(), "providerID": texts, "modelID": texts, "zz_unknown": json_value,
        "tokens": st.fixed_dictionaries({"input": st.integers(0, 10**6), "output": st.integers(0, 10**6),
                                         "cache": st.fixed_dictionaries({"read": st.integers(0, 9),
                                                                         "write": st.integers(0, 9)})})}))
opencode_messages = st.lists(st.builds(lambda i, p: {"info": i, "parts": p}, infos, st.lists(parts, max_size=6)),
                             max_size=6)


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(opencode_messages)
def test_round_trip_generated(src: list) -> None:
    before = orjson.dumps(src)
    assert orjson.dumps(opencode.encode(opencode.decode(src))) == before


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow])
@given(opencode_messages)
def test_prefixed_texts_read_back(src: list) -> None:
    msgs = opencode.decode(src)
    for n, b in enumerate(b for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.TOOL_RESULT)):
        b.text = f"§{n}§ {b.text}"
    expected = texts_of(msgs)
    out = orjson.loads(orjson.dumps(opencode.encode(msgs)))
    assert texts_of(opencode.decode(out)) == expected


# ------------------------------------------------------------------------------------------- edits


def test_prefix_and_placeholder_write_back() -> None:
    src = sample()
    msgs = opencode.decode(src)
    asst = msgs[3]
    by_key = {b.key: b for b in asst.blocks}
    msgs[2].blocks[0].text = "§1§ Why does test_parse fail?"
    by_key["prt_12"].text = "§2§ Let me read it."
    by_key["prt_13:out"].text = "[dropped §3§]"
    by_key["prt_15:out"].text = "§4§ exit 1"
    by_key["prt_16:out"].text = "§5§ partial"
    out = orjson.loads(orjson.dumps(opencode.encode(msgs)))
    parts = {p["id"]: p for p in out[3]["parts"]}
    assert out[2]["parts"][0]["text"] == "§1§ Why does test_parse fail?"
    assert parts["prt_12"]["text"] == "§2§ Let me read it."
    assert parts["prt_13"]["state"]["output"] == "[dropped §3§]"
    assert parts["prt_15"]["state"]["error"] == "§4§ exit 1"
    assert parts["prt_16"]["state"]["metadata"]["output"] == "§5§ partial"
    assert parts["prt_16"]["state"]["error"] == "aborted"
    # the pruned output was not changed: neither its output nor its compacted mark is touched
    assert parts["prt_14"]["state"]["output"] == "a\nb" and parts["prt_14"]["state"]["time"]["compacted"] == 5
    assert out[2]["parts"][1]["text"] == "<file>tests/x.py</file>"  # untouched synthetic part


def test_changed_pruned_output_becomes_visible() -> None:
    msgs = opencode.decode(sample())
    res = next(b for b in msgs[3].blocks if b.key == "prt_14:out")
    res.text = "§7§ " + res.text
    out = opencode.encode(msgs)
    state = next(p for p in out[3]["parts"] if p["id"] == "prt_14")["state"]
    assert state["output"] == "§7§ " + opencode.CLEARED_OUTPUT and "compacted" not in state["time"]
    assert next(b for b in opencode.decode(out)[3].blocks if b.key == "prt_14:out").text == res.text


@pytest.mark.parametrize("kind", [m.TOOL_CALL, m.TOOL_RESULT])
def test_removing_either_half_removes_the_tool_part(kind: str) -> None:
    msgs = opencode.decode(sample())
    asst = msgs[3]
    asst.blocks = [b for b in asst.blocks if not (b.key.startswith("prt_13") and b.kind == kind)]
    out = orjson.loads(orjson.dumps(opencode.encode(msgs)))
    ids_left = [p["id"] for p in out[3]["parts"]]
    assert "prt_13" not in ids_left and "prt_14" in ids_left and len(ids_left) == 13
    assert all(p["type"] != "tool" or p["callID"] != "toolu_1" for p in out[3]["parts"])


def test_removing_open_call_and_whole_message() -> None:
    msgs = opencode.decode(sample())
    msgs[3].blocks = [b for b in msgs[3].blocks if b.key != "prt_18"]
    del msgs[1]
    out = opencode.encode(msgs)
    assert [x["info"]["id"] for x in out] == ["msg_01", "msg_03", "msg_04"]
    assert "prt_18" not in [p["id"] for p in out[2]["parts"]]


def test_reasoning_survives_byte_identical_around_edits() -> None:
    src = sample()
    reasoning_before = orjson.dumps(src[3]["parts"][1])
    msgs = opencode.decode(src)
    for b in msgs[3].blocks:
        if b.kind in (m.TEXT, m.TOOL_RESULT):
            b.text = "[dropped]"
    msgs[3].blocks = [b for b in msgs[3].blocks if b.kind != m.TOOL_CALL or b.key != "prt_13"]
    out = opencode.encode(msgs)
    (reasoning,) = [p for p in out[3]["parts"] if p["type"] == "reasoning"]
    assert orjson.dumps(reasoning) == reasoning_before


def test_fresh_part_in_existing_message_is_deterministic() -> None:
    def run() -> dict:
        msgs = opencode.decode(sample())
        msgs[2].blocks.insert(0, m.Block(m.TEXT, text="<session-history/>", synthetic=True))
        return opencode.encode(msgs)[2]["parts"][0]

    first, second = run(), run()
    assert first == second
    assert first["id"].startswith("prt_mc") and first["messageID"] == "msg_03" and first["sessionID"] == "ses_A"
    assert first["type"] == "text" and first["synthetic"] is True and first["text"] == "<session-history/>"


def test_fresh_message_takes_session_from_neighbours() -> None:
    msgs = opencode.decode(sample())
    msgs.insert(0, m.Message(id="msg_000mc", role=m.USER, blocks=[m.Block(m.TEXT, text="<m0/>")], created_at=5))
    out = opencode.encode(msgs)
    assert out[0]["info"] == {"id": "msg_000mc", "sessionID": "ses_A", "role": "user", "time": {"created": 5}}
    alone = opencode.encode([m.Message(id="x", role=m.USER, blocks=[m.Block(m.TEXT, text="hi")])])
    assert alone[0]["info"]["sessionID"] == opencode.DEFAULT_SESSION


# ---------------------------------------------------------------------------------- fresh rendering


def pi_messages(path) -> list[dict]:
    return [e["message"] for e in map(orjson.loads, path.read_bytes().splitlines()) if e["type"] == "message"]


def strip_raw(msgs: list[m.Message]) -> list[m.Message]:
    for x in msgs:
        x.raw = None
        for b in x.blocks:
            b.raw = None
    return msgs


def summary_of(msgs: list[m.Message]) -> tuple[list, list, dict]:
    """Texts in order, tool calls in order, results by call id: what must survive a format change."""
    text = [b.text for x in msgs for b in x.blocks if b.kind in (m.TEXT, m.REASONING)]
    calls = [(b.tool_id, b.tool_name, b.input) for x in msgs for b in x.blocks if b.kind == m.TOOL_CALL]
    results = {b.tool_id: (b.text, b.is_error) for x in msgs for b in x.blocks if b.kind == m.TOOL_RESULT}
    return text, calls, results


@pytest.mark.parametrize("name", ["pi_large-session.jsonl", "pi_before-compaction.jsonl"])
def test_render_pi_session_into_opencode(sessions_dir, name: str) -> None:
    decoded = strip_raw(pi.decode(pi_messages(sessions_dir / name)))
    expected = summary_of(decoded)
    out = orjson.loads(orjson.dumps(opencode.encode(decoded)))
    back = opencode.decode(out)
    assert summary_of(back) == expected
    assert all(x["info"]["sessionID"] == opencode.DEFAULT_SESSION for x in out)
    reasoning = [p for x in out for p in x["parts"] if p["type"] == "reasoning"]
    assert reasoning and all("metadata" not in p for p in reasoning)  # Pi's signature shape is not OpenCode's
    assert len({p["id"] for x in out for p in x["parts"]}) == sum(len(x["parts"]) for x in out)
    usage = [x.usage for x in decoded if x.role == m.ASSISTANT]
    assert [x.usage for x in back if x.role == m.ASSISTANT] == usage
    assert orjson.dumps(opencode.encode(strip_raw(pi.decode(pi_messages(sessions_dir / name))))) == orjson.dumps(out)


def test_render_pairs_results_with_reused_call_ids() -> None:
    """OpenCode-style callID reuse across turns: each result joins the latest open call with its id."""
    def call(text: str) -> m.Message:
        return m.Message(id=text, role=m.ASSISTANT, blocks=[m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read",
                                                                    input={"f": text})])

    def result(text: str) -> m.Message:
        return m.Message(id="r" + text, role=m.TOOL, blocks=[m.Block(m.TOOL_RESULT, text=text, tool_id="c1")])

    orphan = m.Message(id="o", role=m.USER, blocks=[m.Block(m.TOOL_RESULT, text="lost", tool_id="zz")])
    out = opencode.encode([call("a"), result("A"), call("b"), result("B"), orphan, call("open")])
    assert [x["info"]["id"] for x in out] == ["a", "b", "o", "open"]
    assert [x["parts"][0]["state"].get("output") for x in (out[0], out[1])] == ["A", "B"]
    assert out[2]["parts"][0]["type"] == "text" and out[2]["parts"][0]["text"] == "lost"
    assert out[3]["parts"][0]["state"]["status"] == "pending"


def test_render_sample_into_pi() -> None:
    decoded = opencode.decode(sample())  # raws are OpenCode objects: foreign to Pi, so all is rendered fresh
    out = orjson.loads(orjson.dumps(pi.encode(decoded)))
    assert summary_of(pi.decode(out)) == summary_of(decoded)
    assert [x["role"] for x in out] == ["assistant", "user", "assistant", *["toolResult"] * 4]
    assert out[1]["content"][-1] == {"type": "image", "data": "iVBOR", "mimeType": "image/png"}
    asst = out[2]
    assert [b["type"] for b in asst["content"]] == ["thinking", "text", *["toolCall"] * 6]
    assert asst["content"][0] == {"type": "thinking", "thinking": "Need to read the test.",
                                  "thinkingSignature": SIG["anthropic"]["signature"]}
    assert asst["stopReason"] == "toolUse" and asst["usage"]["cacheRead"] == 11000
    answered = [x["toolCallId"] for x in out[3:]]
    assert answered == ["toolu_1", "toolu_2", "toolu_3", "toolu_4"]  # pending/running calls stay open
    assert [x["isError"] for x in out[3:]] == [False, False, True, False]


# -------------------------------------------------------------------------------------- bad shapes


def _with(index: int, mutate) -> list:
    src = sample()
    mutate(src[index])
    return src


@pytest.mark.parametrize(("src", "needle"), [
    ({"info": {}}, "array"),
    (_with(1, lambda x: x.clear() or x.update(info=None, parts=[])), "message 1: `info`"),
    (_with(2, lambda x: x.update(parts={})), "message 2: `parts`"),
    (_with(0, lambda x: x["info"].pop("id")), "message 0: `info.id`"),
    (_with(3, lambda x: x["info"].update(role="system")), "message 3: `info.role`"),
    (_with(2, lambda x: x["parts"].append("text")), "message 2: `parts[6]`"),
    (_with(2, lambda x: x["parts"].append({"id": "p"})), "message 2: `parts[6].type`"),
    (_with(2, lambda x: x["parts"][0].update(text=None)), "message 2: `parts[0].text`"),
    (_with(3, lambda x: x["parts"][3].pop("callID")), "message 3: `parts[3].callID`"),
    (_with(3, lambda x: x["parts"][3].update(state="done")), "message 3: `parts[3].state`"),
    (_with(3, lambda x: x["parts"][3]["state"].update(output={"a": 1})), "message 3: `parts[3].state.output`"),
])
def test_bad_shapes_name_the_index(src, needle: str) -> None:
    with pytest.raises(BadInput) as err:
        opencode.decode(src)
    assert needle in err.value.one_line() and "\n" not in err.value.one_line()


def test_harness_constant() -> None:
    assert opencode.HARNESS == m.OPENCODE


# ------------------------------------------------------------------------------ skim, fresh media and tools


def test_skim_gives_plain_messages_only_id_role_and_times() -> None:
    src = sample()
    src.append({"info": {"id": "msg_05", "sessionID": "ses_A", "role": "user", "time": "late"}, "parts": []})
    whole = opencode.decode(src)
    part = opencode.decode(src, skim=5)
    # the harness's compaction request and summary are always decoded whole, so is anything unusual
    assert [x.blocks == y.blocks for x, y in zip(part, whole, strict=True)] == [True, True, False, False, True]
    assert [(x.id, x.role, x.ordinal, x.created_at, x.completed_at, x.compaction) for x in part] == \
           [(x.id, x.role, x.ordinal, x.created_at, x.completed_at, x.compaction) for x in whole]
    assert (part[2].blocks, part[3].blocks, part[3].usage) == ([], [], None) and part[2].raw is src[2]
    assert (part[3].role, part[3].created_at, part[3].completed_at) == (m.ASSISTANT, 3000, 3009)
    assert (part[4].role, part[4].created_at) == (m.USER, None)
    assert opencode.encode(opencode.decode(sample(), skim=1)) == sample()


@pytest.mark.parametrize("item", [
    "not an object", {"info": None, "parts": []}, {"info": {"id": "m", "role": "user"}},
    {"info": {"id": 5, "role": "user"}, "parts": []}, {"info": {"id": "m", "role": "system"}, "parts": []},
])
def test_skim_leaves_unusual_messages_to_the_full_decode(item: object) -> None:
    with pytest.raises(BadInput, match="opencode message 0"):
        opencode.decode([item], skim=1)


def test_skim_decodes_a_summary_or_a_compaction_request_whole() -> None:
    summary = {"info": {"id": "s", "role": "assistant", "summary": True}, "parts": [part("p", "text", text="S")]}
    request = {"info": {"id": "r", "role": "user"}, "parts": [part("q", "text", text="T"), part("c", "compaction")]}
    # a skimmed message's parts are only looked through for a compaction part, never checked
    plain = {"info": {"id": "u", "role": "user", "summary": False}, "parts": ["not a part", part("t", "text")]}
    out = opencode.decode([summary, request, plain], skim=3)
    assert [len(x.blocks) for x in out] == [1, 2, 0]
    assert [x.compaction for x in out] == [m.COMPACTION_SUMMARY, m.COMPACTION_REQUEST, None]


def test_render_file_parts_from_media() -> None:
    blocks = [m.Block(m.MEDIA, media_type="image/png", meta={"url": "https://x/a.png", "filename": "a.png"}),
              m.Block(m.MEDIA, media_type="image/gif", meta={"data": "R0lG"}),
              m.Block(m.MEDIA, media_type=None, meta={"filename": 5}),
              m.Block(m.MEDIA, media_type="application/pdf", meta={"url": 7, "data": "JVBE"})]
    parts = opencode.encode([m.Message("u", m.USER, blocks)])[0]["parts"]
    assert [{k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")} for p in parts] == [
        {"type": "file", "mime": "image/png", "url": "https://x/a.png", "filename": "a.png"},
        {"type": "file", "mime": "image/gif", "url": "data:image/gif;base64,R0lG"},
        {"type": "file", "mime": "application/octet-stream", "url": ""},
        {"type": "file", "mime": "application/pdf", "url": "data:application/pdf;base64,JVBE"}]
    assert [p["messageID"] for p in parts] == ["u"] * 4


def test_render_tool_states() -> None:
    call = m.Block(m.TOOL_CALL, tool_id="c1", tool_name="bash", input=None)
    failed = m.Block(m.TOOL_CALL, tool_id="c2", tool_name="bash", input={"command": "false"})
    error = m.Block(m.TOOL_RESULT, text="exit 1", tool_id="c2", is_error=True)
    out = opencode.encode([m.Message("a", m.ASSISTANT, [call, failed], created_at=77),
                           m.Message("t", m.TOOL, [error])])
    assert [p["state"] for p in out[0]["parts"]] == [
        {"status": "pending", "input": {}, "raw": ""},
        {"status": "error", "input": {"command": "false"}, "error": "exit 1", "time": {"start": 77, "end": 77}}]
    undated = opencode.encode([m.Message("a", m.ASSISTANT, [failed]), m.Message("t", m.TOOL, [error])])
    assert undated[0]["parts"][0]["state"]["time"] == {"start": 0, "end": 0}
    done = m.Block(m.TOOL_RESULT, text="ok", tool_id="c2")
    completed = opencode.encode([m.Message("a", m.ASSISTANT, [failed], created_at=5), m.Message("t", m.TOOL, [done])])
    assert completed[0]["parts"][0]["state"] == {"status": "completed", "input": {"command": "false"}, "output": "ok",
                                                 "title": "", "metadata": {}, "time": {"start": 5, "end": 5}}


@pytest.mark.parametrize(("src", "message"), [
    ({"info": {}}, "opencode input must be an array of {info, parts} (got dict)"),
    ([None], "opencode message 0: `message` must be an object with info and parts (got NoneType)"),
    ([[]], "opencode message 0: `message` must be an object with info and parts (got list)"),
    ([{"info": [], "parts": []}], "opencode message 0: `info` must be an object (got list)"),
    ([{"info": {"id": "m", "role": "user"}, "parts": "x"}], "opencode message 0: `parts` must be an array (got str)"),
    ([{"info": {"id": 3, "role": "user"}, "parts": []}], "opencode message 0: `info.id` must be a string (got int)"),
    ([{"info": {"id": "m", "role": "system"}, "parts": []}],
     "opencode message 0: `info.role` must be \"user\" or \"assistant\" (got 'system')"),
    ([{"info": {"id": "m", "role": "user"}, "parts": [part("p", "text", text="a"), 4.5]}],
     "opencode message 0: `parts[1]` must be an object (got float)"),
    ([{"info": {"id": "m", "role": "user"}, "parts": [{"type": 1}]}],
     "opencode message 0: `parts[0].type` must be a string (got int)"),
    ([{"info": {"id": "m", "role": "user"}, "parts": [part("p", "text", text=["a"])]}],
     "opencode message 0: `parts[0].text` must be a string (got list)"),
    ([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", None, "bash", {})]}],
     "opencode message 0: `parts[0].callID` must be a string (got NoneType)"),
    ([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", "c", 5, {})]}],
     "opencode message 0: `parts[0].tool` must be a string (got int)"),
    ([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", "c", "bash", [])]}],
     "opencode message 0: `parts[0].state` must be an object (got list)"),
    ([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", "c", "bash", {"status": 2})]}],
     "opencode message 0: `parts[0].state.status` must be a string (got int)"),
    ([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", "c", "bash", {"status": "error", "error": 1})]}],
     "opencode message 0: `parts[0].state.error` must be a string (got int)"),
])
def test_bad_shapes_say_exactly_what_was_found(src: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        opencode.decode(src)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_render_fresh_messages_exactly() -> None:
    """Every field of fresh messages and parts: times, provider, tokens, summary mark, reasoning, tool names."""
    b = m.Block
    summary = m.Message("s", m.ASSISTANT, [
        b(m.REASONING, text="r1", meta={"anthropic": {"signature": "sig"}}),  # OpenCode's provider-keyed shape
        b(m.REASONING, text="r2", meta={"signature": "flat"}),  # another format's: not sent as metadata
        b(m.TEXT, text="sum"),
    ], created_at=10, completed_at=20, provider="anthropic", model="claude", usage=m.Usage(1, 2, 3, 4),
        compaction=m.COMPACTION_SUMMARY)
    asst = m.Message("a", m.ASSISTANT, [
        b(m.REASONING, text="r3"),
        b(m.TOOL_CALL, tool_id=None, tool_name=None, input={"x": 1}),  # named by its result, no id
        b(m.TOOL_CALL, tool_id="c2", tool_name=None),  # unnamed and unanswered
    ])
    tool = m.Message("t", m.TOOL, [b(m.TOOL_RESULT, text="out", tool_id=None, tool_name="read"),
                                   b(m.TEXT, text="note")])
    user = m.Message("u", m.USER, [b(m.TEXT, text="plain"), b(m.TOOL_RESULT, text="lost", tool_id="zz"),
                                   b(m.TEXT, text="hook", synthetic=True)])
    out = opencode.encode([summary, asst, tool, user])
    ses = {"sessionID": opencode.DEFAULT_SESSION}
    assert out == [
        {"info": {"id": "s", **ses, "role": "assistant", "time": {"created": 10, "completed": 20},
                  "providerID": "anthropic", "modelID": "claude",
                  "tokens": {"input": 1, "output": 2, "reasoning": 0, "cache": {"read": 3, "write": 4}},
                  "summary": True},
         "parts": [
             {"id": "prt_mc19a289a031430000", **ses, "messageID": "s", "type": "reasoning", "text": "r1",
              "time": {"start": 10}, "metadata": {"anthropic": {"signature": "sig"}}},
             {"id": "prt_mc19a289a031430001", **ses, "messageID": "s", "type": "reasoning", "text": "r2",
              "time": {"start": 10}},
             {"id": "prt_mc19a289a031430002", **ses, "messageID": "s", "type": "text", "text": "sum"}]},
        {"info": {"id": "a", **ses, "role": "assistant", "time": {"created": 0}},
         "parts": [
             {"id": "prt_mccfe4e5ecd1b90000", **ses, "messageID": "a", "type": "reasoning", "text": "r3",
              "time": {"start": 0}},
             {"id": "prt_mccfe4e5ecd1b90001", **ses, "messageID": "a", "type": "tool", "callID": "", "tool": "read",
              "state": {"status": "completed", "input": {"x": 1}, "output": "out", "title": "", "metadata": {},
                        "time": {"start": 0, "end": 0}}},
             {"id": "prt_mccfe4e5ecd1b90002", **ses, "messageID": "a", "type": "tool", "callID": "c2",
              "tool": "unknown", "state": {"status": "pending", "input": {}, "raw": ""}}]},
        {"info": {"id": "t", **ses, "role": "user", "time": {"created": 0}},  # its result went into the call
         "parts": [{"id": "prt_mcb4ec0dc38c4a0000", **ses, "messageID": "t", "type": "text", "text": "note"}]},
        {"info": {"id": "u", **ses, "role": "user", "time": {"created": 0}},
         "parts": [
             {"id": "prt_mc4f1c57432fcf0000", **ses, "messageID": "u", "type": "text", "text": "plain"},
             {"id": "prt_mc4f1c57432fcf0001", **ses, "messageID": "u", "type": "text", "text": "lost",
              "synthetic": True},
             {"id": "prt_mc4f1c57432fcf0002", **ses, "messageID": "u", "type": "text", "text": "hook",
              "synthetic": True}]},
    ]


def test_fresh_blocks_in_an_existing_message_render_in_place() -> None:
    """Fresh blocks among a message's own parts: rendered where they stand, under the message's wire id and session
    (the default when the message names none); a fresh result answering a fresh call goes into the call's part."""
    own = {"info": {"id": "msg_w", "role": "assistant"},
           "parts": [part("prt_1", "text", text="old"), part("prt_2", "text", text="kept", state={"x": 1})]}
    (msg,) = opencode.decode([own])
    first, second = msg.blocks
    second.text = "§1§ kept"  # a text part that happens to carry a `state` object is still written back as text
    msg.id = "renamed"  # the parts name the message the harness knows
    msg.blocks = [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={}),
                  m.Block(m.TOOL_RESULT, text="done", tool_id="c1"), first, m.Block(m.TEXT, text="tail"), second]
    (out,) = opencode.encode([msg])
    wire = {"sessionID": opencode.DEFAULT_SESSION, "messageID": "msg_w"}
    prefix = "prt_mc13c7ce8a4204"
    assert out["parts"] == [
        {"id": prefix + "0000", **wire, "type": "tool", "callID": "c1", "tool": "read",
         "state": {"status": "completed", "input": {}, "output": "done", "title": "", "metadata": {},
                   "time": {"start": 0, "end": 0}}},
        part("prt_1", "text", text="old"),
        {"id": prefix + "0002", **wire, "type": "text", "text": "tail"},
        part("prt_2", "text", text="§1§ kept", state={"x": 1})]


def test_a_fresh_result_never_joins_an_existing_open_tool_part() -> None:
    """Only fresh calls take fresh results: an existing part keeps its own state, so a fresh result answering its
    call id travels as text in its own message (were it paired, the part would not show it and it would be lost)."""
    own = {"info": {"id": "msg_a", "sessionID": "ses_A", "role": "assistant"},
           "parts": [tool("prt_1", "c1", "bash", {"status": "pending", "input": {}, "raw": ""})]}
    msgs = [*opencode.decode([own]), m.Message("t", m.TOOL, [m.Block(m.TOOL_RESULT, text="late", tool_id="c1")])]
    out = opencode.encode(msgs)
    assert [x["info"]["id"] for x in out] == ["msg_a", "t"]
    assert out[0]["parts"] == [tool("prt_1", "c1", "bash", {"status": "pending", "input": {}, "raw": ""})]
    assert [(p["type"], p["text"], p["synthetic"]) for p in out[1]["parts"]] == [("text", "late", True)]


def test_another_formats_blocks_pair_like_fresh_ones() -> None:
    """Blocks decoded from another format keep that format's objects as raw: they are still fresh here, so a
    result joins its call's tool part."""
    src = [{"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}}],
            "timestamp": 5},
           {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "ok"}],
            "isError": False, "timestamp": 6}]
    out = opencode.encode(pi.decode(src))
    assert len(out) == 1 and [(p["type"], p["callID"], p["state"]["status"], p["state"]["output"])
                              for p in out[0]["parts"]] == [("tool", "c1", "completed", "ok")]


def test_decode_tool_parts_exactly() -> None:
    """Every field of a tool part's two blocks: the result carries the call's name, a pruned output its
    `compacted` time (and nothing else does); an ended state without its field reads as ""; metadata only if an
    object."""
    t = {"start": 1, "end": 2}
    msg = {"info": {"id": "m", "role": "assistant"}, "parts": [
        tool("p1", "c1", "read", {"status": "completed", "input": {"f": 1}, "output": "ok", "time": t}),
        tool("p2", "c2", "bash", {"status": "completed", "output": "long", "time": {**t, "compacted": 9}}),
        tool("p3", "c3", "bash", {"status": "error", "time": t}, metadata="not an object"),
        tool("p4", "c4", "edit", {"status": "completed"}, metadata={"k": 1}),
    ]}
    (decoded,) = opencode.decode([msg])
    fields = [(b.kind, b.key, b.tool_id, b.tool_name, b.input, b.text, b.original, b.is_error, b.meta)
              for b in decoded.blocks]
    cleared = opencode.CLEARED_OUTPUT
    assert fields == [
        (m.TOOL_CALL, "p1", "c1", "read", {"f": 1}, "", None, False, None),
        (m.TOOL_RESULT, "p1:out", "c1", "read", None, "ok", "ok", False, None),
        (m.TOOL_CALL, "p2", "c2", "bash", None, "", None, False, None),
        (m.TOOL_RESULT, "p2:out", "c2", "bash", None, cleared, cleared, False, {"compacted": 9}),
        (m.TOOL_CALL, "p3", "c3", "bash", None, "", None, False, None),
        (m.TOOL_RESULT, "p3:out", "c3", "bash", None, "", "", True, None),
        (m.TOOL_CALL, "p4", "c4", "edit", None, "", None, False, {"k": 1}),
        (m.TOOL_RESULT, "p4:out", "c4", "edit", None, "", "", False, None)]
    with pytest.raises(BadInput, match=r"`parts\[0\].callID` must be a string \(got int\)$"):
        opencode.decode([{"info": {"id": "m", "role": "assistant"}, "parts": [tool("p", 5, "bash", {})]}])


def test_decode_parts_and_message_fields_exactly() -> None:
    """Every field of the other parts' blocks (keys, synthetic marks, metadata only if an object, file media) and
    of the messages (times, usage, provider, compaction and synthetic marks only where OpenCode sets them)."""
    user = {"info": {"id": "u", "role": "user", "time": {"created": 7, "completed": 8}, "summary": True,
                     "providerID": 3, "tokens": {"input": 1}},
            "parts": [
                {"type": "text", "text": "t0", "metadata": "x", "synthetic": "yes"},  # no id: keyed by position
                part("p1", "text", text="t1", synthetic=True, ignored=False, metadata={"a": 1}),
                part("p2", "reasoning", text=5, metadata=["x"]),
                part("p3", "thinking", text="th", metadata={"b": 2}),
                part("p4", "file", mime=9, url="https://u", filename=4),
                part("p5", "file", mime="image/png", filename="f.png"),
                part("p6", "file"),
                {"id": 6, "type": "text", "text": "t7", "ignored": True},
                part("p8", "compaction")]}
    helper = {"info": {"id": "h", "role": "user", "summary": True},
              "parts": [part("q", "text", text="s", synthetic=True), part("r", "patch")]}
    textless = {"info": {"id": "e", "role": "user"}, "parts": [part("r", "patch")]}
    asst = {"info": {"id": "a", "role": "assistant", "summary": "true", "providerID": "p", "modelID": "mo",
                     "time": {"created": "x"}, "tokens": {"input": 1, "output": 2, "cache": {"read": 3, "write": 4}}},
            "parts": [part("z", "text", text="all synthetic", synthetic=True), part("zz", "compaction")]}
    bare = {"info": {"id": "b", "role": "assistant", "modelID": ["m"], "tokens": {"cache": 5}}, "parts": []}
    u, h, a, b, e = opencode.decode([user, helper, asst, bare, textless])
    fields = [(x.kind, x.key, x.text, x.original, x.synthetic, x.meta, x.media_type) for x in u.blocks]
    assert fields == [
        (m.TEXT, "p0", "t0", "t0", False, None, None),
        (m.TEXT, "p1", "t1", "t1", True, {"a": 1}, None),
        (m.REASONING, "p2", "", None, False, None, None),
        (m.REASONING, "p3", "th", None, False, {"b": 2}, None),
        (m.MEDIA, "p4", "", None, False, {"url": "https://u"}, None),
        (m.MEDIA, "p5", "", None, False, {"filename": "f.png"}, "image/png"),
        (m.MEDIA, "p6", "", None, False, None, None),
        (m.OPAQUE, "p7", "", None, False, None, None),
        (m.OPAQUE, "p8", "", None, False, None, None)]
    assert [x.raw for x in u.blocks] == user["parts"]
    messages = [(x.id, x.role, x.ordinal, x.created_at, x.completed_at, x.usage, x.provider, x.model, x.compaction,
                 x.synthetic) for x in (u, h, a, b, e)]
    assert messages == [
        ("u", m.USER, 0, 7, 8, m.Usage(1, 0, 0, 0), None, None, m.COMPACTION_REQUEST, False),
        ("h", m.USER, 1, None, None, None, None, None, None, True),
        ("a", m.ASSISTANT, 2, None, None, m.Usage(1, 2, 3, 4), "p", "mo", None, False),
        ("b", m.ASSISTANT, 3, None, None, m.Usage(0, 0, 0, 0), None, None, None, False),
        ("e", m.USER, 4, None, None, None, None, None, None, False)]
