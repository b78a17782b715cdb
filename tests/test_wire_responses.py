"""OpenAI Responses codec: captured Codex bodies, replies, round trips, edits, fresh rendering, bad shapes."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest
from captured_requests import REQUESTS, bodies
from conftest import SESSIONS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.errors import BadInput
from magic_context.wire import arcs, responses
from magic_context.wire import model as m
from magic_context.wire.importers import load_session


def roundtrip(items: list) -> list:
    return responses.encode(responses.decode(items))


def sample() -> list:
    """Every item kind the codec knows, plus kinds it only carries."""
    return [
        {"type": "message", "id": "msg_dev", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look at this"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAA", "detail": "auto"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan it."}],
         "encrypted_content": "gAAAA-opaque=="},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Reading.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
         "arguments": "{\"cmd\": \"ls\"}", "status": "completed"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "apply_patch",
         "input": "*** Begin Patch\n*** End Patch"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py\n"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": [
            {"type": "input_text", "text": "Done!"}, {"type": "input_image", "image_url": "https://x/y.png"}]},
        {"type": "computer_call_output", "call_id": "cu_1", "output": {"type": "computer_screenshot"}},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "zzz"},
        {"type": "item_reference", "id": "msg_old"},
        {"role": "user", "content": "thanks"},
    ]


# ---------------------------------------------------------------- captured Codex bodies


@pytest.mark.parametrize("path", bodies("codex"), ids=lambda p: p.name)
def test_codex_body_round_trips_byte_identically(path: Path) -> None:
    data = path.read_bytes()
    body = orjson.loads(data)
    msgs = responses.decode(body["input"])
    assert [x.role for x in msgs[:4]] == [m.SYSTEM, m.SYSTEM, m.USER, m.USER]
    assert "<environment_context>" in msgs[2].text() and "PROBE" in msgs[3].text()
    body["input"] = responses.encode(msgs)
    assert orjson.dumps(body) == data


def test_codex_tool_turn_decodes_as_a_reply_and_its_output() -> None:
    body = orjson.loads((REQUESTS / "codex-0.171.0-2.json").read_bytes())
    msgs = responses.decode(body["input"])
    reply, output = msgs[4], msgs[5]
    assert reply.role == m.ASSISTANT and isinstance(reply.raw, list) and not reply.atomic
    call = reply.blocks[0]
    assert (call.kind, call.tool_id, call.tool_name, call.input) == (m.TOOL_CALL, "call_fake1", "exec_command",
                                                                       {"cmd": "echo hi-from-tool"})
    result = output.blocks[0]
    assert output.role == m.TOOL and result.kind == m.TOOL_RESULT and result.tool_name == "exec_command"
    assert result.text.endswith("hi-from-tool\n")
    assert arcs.validate_pairing(msgs, m.OPENAI_RESPONSES) == []
    assert responses.tool_names(body["tools"])[:2] == ["exec_command", "write_stdin"]
    assert "multi_agent_v1__spawn_agent" in responses.tool_names(body["tools"])


# ---------------------------------------------------------------- decode


def test_decode_maps_items() -> None:
    msgs = responses.decode(sample())
    assert [x.role for x in msgs] == [m.SYSTEM, m.SYSTEM, m.USER, m.ASSISTANT, m.TOOL, m.TOOL, m.TOOL, m.ASSISTANT,
                                      m.USER, m.USER, m.USER]
    assert [x.ordinal for x in msgs] == list(range(11))
    reply = msgs[3]
    assert reply.atomic and [x["type"] for x in reply.raw] == ["reasoning", "message", "function_call",
                                                                "custom_tool_call", "web_search_call"]
    think, text, call, custom, search = reply.blocks
    assert think.kind == m.REASONING and think.text == "Plan it."
    assert think.meta["encrypted_content"] == "gAAAA-opaque=="
    assert (text.kind, text.text, text.key) == (m.TEXT, "Reading.", "i1.0")
    assert call.input == {"cmd": "ls"} and call.key == "i2" and call.meta is None
    assert (custom.input, custom.meta) == ("*** Begin Patch\n*** End Patch", {"type": "custom_tool_call"})
    assert search.kind == m.OPAQUE and search.raw is reply.raw[4]
    image = msgs[2].blocks[1]
    assert (image.kind, image.media_type, image.meta) == (m.MEDIA, "image/png", {"url": "data:image/png;base64,AAA"})
    assert msgs[1].blocks[0].key == "i0.c" and msgs[1].blocks[0].raw == "Be brief."
    out1, out2, other = msgs[4].blocks[0], msgs[5].blocks[0], msgs[6].blocks[0]
    assert (out1.kind, out1.tool_id, out1.tool_name) == (m.TOOL_RESULT, "call_1", "exec_command")
    assert out1.text == "a.py\nb.py\n"
    assert (out2.text, out2.tool_name, out2.meta) == ("Done!", "apply_patch", {"type": "custom_tool_call_output"})
    assert other.kind == m.OPAQUE
    assert msgs[7].blocks[0].kind == m.OPAQUE and not msgs[7].atomic  # a refusal is carried, not edited
    assert msgs[8].compaction == m.COMPACTION_SUMMARY and msgs[9].compaction is None
    assert arcs.validate_pairing(msgs, m.OPENAI_RESPONSES) == []


def test_ids_are_derived_stable_and_tell_repeats_apart() -> None:
    items = [{"role": "user", "content": "ok"}, {"type": "message", "role": "assistant", "content": "ok"},
             {"role": "user", "content": "ok"}]
    ids = [x.id for x in responses.decode(items)]
    assert len(set(ids)) == 3 and ids == [x.id for x in responses.decode(copy.deepcopy(items))]


def test_stored_replies_decode_as_one_message_each() -> None:
    """The raw store hands a reply back as its list of items: one element, one message, never merged."""
    msgs = responses.decode(sample())
    stored = [x.raw for x in msgs]
    again = responses.decode(orjson.loads(orjson.dumps(stored)))
    assert [(x.id, x.role, x.atomic) for x in again] == [(x.id, x.role, x.atomic) for x in msgs]
    two_replies = [[{"type": "function_call", "call_id": "a", "name": "n", "arguments": "{}"}],
                   [{"type": "function_call", "call_id": "b", "name": "n", "arguments": "{}"}]]
    assert len(responses.decode(two_replies)) == 2


def test_skim_keeps_ids_roles_and_decodes_system_and_compaction_whole() -> None:
    items = sample()
    whole = responses.decode(copy.deepcopy(items))
    part = responses.decode(copy.deepcopy(items), skim=len(whole))
    assert [(x.id, x.role, x.digest, x.atomic) for x in part] == [(x.id, x.role, x.digest, x.atomic) for x in whole]
    assert [bool(x.blocks) for x in part] == [x.role == m.SYSTEM or x.compaction is not None for x in whole]


@pytest.mark.parametrize(("items", "where"), [
    ({"type": "message"}, "input: expected an array"),
    (["text"], "input[0]: expected an item object"),
    ([{"content": "no role, no type"}], "input[0].type"),
    ([{"type": "message", "role": "critic", "content": "x"}], "input[0].role: unknown role 'critic'"),
    ([{"role": "user", "content": 5}], "input[0].content"),
    ([{"role": "user", "content": ["x"]}], "input[0].content[0]"),
    ([{"role": "user", "content": [{"type": "input_text", "text": None}]}], "input[0].content[0].text"),
    ([{"type": "function_call", "name": "n", "arguments": "{}"}], "input[0].call_id"),
    ([{"type": "function_call", "call_id": "c", "arguments": "{}"}], "input[0].name"),
    ([{"type": "function_call_output", "call_id": "c", "output": 3}], "input[0].output"),
    ([{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": 1}]}],
     "input[0].output[0].text"),
    ([{"type": "function_call_output", "output": "x"}], "input[0].call_id"),
    ([[{"type": "function_call", "call_id": "c", "name": "n"}, "junk"]], "input[0][1]"),
])
def test_bad_shapes_raise_with_location(items: object, where: str) -> None:
    with pytest.raises(BadInput) as err:
        responses.decode(items)  # type: ignore[arg-type]
    line = err.value.one_line()
    assert line.startswith("openai-responses ") and where in line and "\n" not in line


# ---------------------------------------------------------------- round trips

_text = st.text(max_size=10)
_json = st.recursive(st.none() | st.booleans() | st.integers(-1000, 1000) | _text,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=5)
_call_ids = st.sampled_from(["call_a", "call_b", "call_c"])
_extra = {"id": _text, "status": st.just("completed")}
_in_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("input_text"), "text": _text}),
    st.fixed_dictionaries({"type": st.just("input_image"), "image_url": _text}, optional={"detail": st.just("low")}),
    st.fixed_dictionaries({"type": st.just("input_file"), "file_data": _text, "filename": _text}),
)
_out_part = st.one_of(st.fixed_dictionaries({"type": st.just("output_text"), "text": _text},
                                            optional={"annotations": st.just([])}),
                      st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _text}))
_items = st.one_of(
    st.fixed_dictionaries({"type": st.just("message"), "role": st.sampled_from(["user", "developer", "system"]),
                           "content": _text | st.lists(_in_part, max_size=3)}, optional=_extra),
    st.fixed_dictionaries({"role": st.just("user"), "content": _text}),
    st.fixed_dictionaries({"type": st.just("message"), "role": st.just("assistant"),
                           "content": _text | st.lists(_out_part, max_size=3)}, optional=_extra),
    st.fixed_dictionaries({"type": st.just("reasoning"), "summary": st.lists(st.fixed_dictionaries(
        {"type": st.just("summary_text"), "text": _text}), max_size=2)},
        optional={"encrypted_content": _text, "id": _text}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": _call_ids, "name": st.just("exec"),
                           "arguments": st.sampled_from(["{\"cmd\": \"ls\"}", "{}", "not json", "[1, 2]"])},
                          optional=_extra),
    st.fixed_dictionaries({"type": st.just("custom_tool_call"), "call_id": _call_ids, "name": st.just("apply_patch"),
                           "input": _text}),
    st.fixed_dictionaries({"type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
                           "call_id": _call_ids, "output": _text | st.lists(_in_part, max_size=3)}, optional=_extra),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search_call", "local_shell_call_output", "mystery"]),
                           "payload": _json}),
)
_settings = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(st.lists(_items, max_size=8))
def test_roundtrip_is_identity(items: list) -> None:
    expected = orjson.dumps(items)
    assert orjson.dumps(roundtrip(copy.deepcopy(items))) == expected
    stored = [x.raw for x in responses.decode(copy.deepcopy(items))]  # the raw store's form decodes too
    assert orjson.dumps(responses.encode(responses.decode(stored))) == expected


@_settings
@given(st.lists(_items, max_size=8), st.sampled_from(["§7§ ", "", "x"]))
def test_edits_read_back_and_encoding_twice_is_stable(items: list, prefix: str) -> None:
    msgs = responses.decode(items)
    wanted = []
    for msg in msgs:
        for j, block in enumerate(msg.blocks):
            if block.kind in (m.TEXT, m.TOOL_RESULT):
                block.text = prefix + block.text if j % 2 == 0 else "[dropped §3§]"
            wanted.append((block.kind, block.text))
    once = orjson.dumps(responses.encode(msgs))
    assert orjson.dumps(responses.encode(msgs)) == once
    again = responses.decode(orjson.loads(once))
    assert [(b.kind, b.text) for x in again for b in x.blocks] == wanted


@pytest.mark.parametrize("path", sorted(p for p in SESSIONS.rglob("*") if p.suffix in (".json", ".jsonl")),
                         ids=lambda p: p.name)
def test_recorded_sessions_render_valid_responses(path: Path) -> None:
    """Every recorded session rendered fresh as Responses items pairs every call with its output (as far as the
    recording does: Pi's aborted turns leave calls unanswered, which Pi itself fills in before sending)."""
    from magic_context.transform.protocol import CODECS

    session = load_session(path)
    decoded = CODECS[session.harness].decode(orjson.loads(orjson.dumps(session.messages)))
    source_problems = arcs.validate_pairing(decoded, m.OPENAI if session.harness == m.PI else session.harness)
    for msg in decoded:
        msg.raw = None
        for block in msg.blocks:
            block.raw = None
    items = orjson.loads(orjson.dumps(responses.encode(decoded)))
    assert items
    rendered = responses.decode(items)
    assert len(arcs.validate_pairing(rendered, m.OPENAI_RESPONSES)) <= len(source_problems)
    assert all(item.get("type") != "reasoning" for item in items)  # no other provider's reasoning is replayable


# ---------------------------------------------------------------- edits


def test_prefix_text_and_outputs_in_place() -> None:
    items = sample()
    msgs = responses.decode(items)
    msgs[2].blocks[0].text = "§1§ look at this"
    msgs[3].blocks[1].text = "§2§ Reading."
    msgs[4].blocks[0].text = "§3§ a.py\nb.py\n"
    msgs[5].blocks[0].text = "§4§ Done!"
    msgs[10].blocks[0].text = "§5§ thanks"
    out = responses.encode(msgs)
    assert out[2]["content"][0] == {"type": "input_text", "text": "§1§ look at this"}
    assert out[4]["content"][0] == {"type": "output_text", "text": "§2§ Reading.", "annotations": []}
    assert out[8]["output"] == "§3§ a.py\nb.py\n"
    assert out[9]["output"][0] == {"type": "input_text", "text": "§4§ Done!"} and len(out[9]["output"]) == 2
    assert out[14] == {"role": "user", "content": "§5§ thanks"}
    assert out[3] == sample()[3]  # reasoning untouched


def test_replaced_output_becomes_a_string_and_placeholders_replace_media() -> None:
    msgs = responses.decode(sample())
    msgs[5].blocks[0].text = "[dropped §4§]"
    image = msgs[2].blocks[1]
    msgs[2].blocks[1] = m.Block(m.TEXT, text="[dropped §9§]", key=f"{image.key}:dropped", synthetic=True)
    out = responses.encode(msgs)
    assert out[9]["output"] == "[dropped §4§]"
    assert out[2]["content"] == [{"type": "input_text", "text": "look at this"},
                                 {"type": "input_text", "text": "[dropped §9§]"}]


def test_reasoning_is_never_edited() -> None:
    msgs = responses.decode(sample())
    msgs[3].blocks[0].text = "rewritten"
    assert responses.encode(msgs)[3] == sample()[3]


def test_edit_marker_input_is_written_as_json() -> None:
    msgs = responses.decode(sample())
    msgs[3].blocks[2].input = {"dropped": "[dropped §2§]"}
    msgs[3].blocks[3].input = {"dropped": "[dropped §3§]"}
    out = responses.encode(msgs)
    assert out[5]["arguments"] == "{\"dropped\":\"[dropped §2§]\"}"
    assert out[6]["input"] == "{\"dropped\":\"[dropped §3§]\"}"


def _reply_turn(with_reasoning: bool) -> list:
    head = [{"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "enc"}] if with_reasoning else []
    return [{"role": "user", "content": "go"}, *head,
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "function_call_output", "call_id": "c2", "output": "two"}]


def test_removing_one_arc_of_a_plain_reply() -> None:
    msgs = responses.decode(_reply_turn(with_reasoning=False))
    arcs.remove_arcs(msgs, ["c1"])
    assert [x.get("call_id") for x in responses.encode(msgs)] == [None, "c2", "c2"]
    assert arcs.validate_pairing(msgs, m.OPENAI_RESPONSES) == []


def test_reasoning_goes_with_the_last_of_its_reply() -> None:
    msgs = responses.decode(_reply_turn(with_reasoning=True))
    assert msgs[1].atomic
    arcs.remove_arcs(msgs, ["c1", "c2"])
    assert responses.encode(msgs) == [{"role": "user", "content": "go"}]
    kept = responses.decode(_reply_turn(with_reasoning=True))
    kept[1].blocks = [b for b in kept[1].blocks if b.kind != m.TOOL_CALL]  # even if a caller leaves it alone
    kept[2:] = []
    assert responses.encode(kept) == [{"role": "user", "content": "go"}]


def test_an_output_whose_call_was_removed_goes_too() -> None:
    msgs = responses.decode(_reply_turn(with_reasoning=False))
    msgs[2].blocks = []  # the result block went with its call; the message itself was not dropped
    assert [x.get("call_id") for x in responses.encode(msgs)] == [None, "c1", "c2", "c2"]


# ---------------------------------------------------------------- fresh rendering


def test_render_canonical_messages_fresh() -> None:
    msgs = [
        m.Message("s", m.SYSTEM, [m.Block(m.TEXT, text="sys")]),
        m.Message("u", m.USER, [m.Block(m.TEXT, text="hi"),
                                m.Block(m.MEDIA, media_type="image/png", meta={"data": "AAA"})]),
        m.Message("a", m.ASSISTANT, [
            m.Block(m.REASONING, text="t", meta={"encrypted_content": "enc", "summary": [
                {"type": "summary_text", "text": "t"}]}),
            m.Block(m.REASONING, text="other", meta={"signature": "anthropic-only"}),
            m.Block(m.TEXT, text="a"), m.Block(m.TEXT, text="b"),
            m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={"p": 1}),
            m.Block(m.TOOL_CALL, tool_id="c2", tool_name="apply_patch", input="patch",
                    meta={"type": "custom_tool_call"}),
            m.Block(m.TOOL_RESULT, text="r1", tool_id="c1")]),  # OpenCode keeps a result beside its call
        m.Message("t", m.TOOL, [m.Block(m.TOOL_RESULT, text="r2", tool_id="c2",
                                        meta={"type": "custom_tool_call_output"})]),
    ]
    out = responses.encode(msgs)
    assert out == [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sys"}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "hi"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAA", "detail": "auto"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}], "encrypted_content": "enc"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"},
                                                             {"type": "output_text", "text": "b"}]},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{\"p\":1}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "patch"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "r2"},
    ]
    again = responses.decode(copy.deepcopy(out))
    assert arcs.validate_pairing(again, m.OPENAI_RESPONSES) == []
    assert responses.encode(again) == out


def test_render_anthropic_style_user_turn_of_results() -> None:
    msgs = [m.Message("a", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="t1", tool_name="bash", input={})]),
            m.Message("u", m.USER, [m.Block(m.TOOL_RESULT, text="ok", tool_id="t1"), m.Block(m.TEXT, text="next")])]
    assert responses.encode(msgs) == [
        {"type": "function_call", "call_id": "t1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "t1", "output": "ok"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]}]


def test_render_fresh_calls_without_name_or_id_and_reasoning_without_summary() -> None:
    """A fresh call with no name is sent as "unknown", no id as "", a custom call's parsed input as JSON."""
    msgs = [m.Message("a", m.ASSISTANT, [
        m.Block(m.REASONING, text="", meta={"encrypted_content": "enc"}),
        m.Block(m.REASONING, text="", meta={"encrypted_content": "enc2", "summary": "not a list"}),
        m.Block(m.TOOL_CALL, tool_id=None, tool_name=None, input={"patch": "x"}, meta={"type": "custom_tool_call"}),
        m.Block(m.TOOL_CALL, tool_id="c2", tool_name="apply_patch", input=None, meta={"type": "custom_tool_call"}),
        m.Block(m.TOOL_CALL, tool_id=None, tool_name=None, input={})])]
    assert responses.encode(msgs) == [
        {"type": "reasoning", "summary": [], "encrypted_content": "enc"},
        {"type": "reasoning", "summary": [], "encrypted_content": "enc2"},
        {"type": "custom_tool_call", "call_id": "", "name": "unknown", "input": "{\"patch\":\"x\"}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "{}"},
        {"type": "function_call", "call_id": "", "name": "unknown", "arguments": "{}"}]


# ---------------------------------------------------------------- system, tools


def test_system_texts_and_apply_system() -> None:
    items = sample()
    assert responses.system_texts(items) == ["You are Codex.", "Be brief."]
    responses.apply_system(items, ["You are Codex.\n\nGUIDE", "Be brief."])
    assert items[0]["content"] == [{"type": "input_text", "text": "You are Codex.\n\nGUIDE"}]
    assert items[1]["content"] == "Be brief."
    responses.apply_system(items, ["You are Codex.\n\nGUIDE", "Be brief.", "more"])
    assert items[1]["content"] == "Be brief.\n\nmore"
    bare: list = [{"role": "user", "content": "hi"}]
    responses.apply_system(bare, ["guide"])
    assert bare[0] == {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "guide"}]}
    with pytest.raises(BadInput, match=r"input\[0\].content"):
        responses.system_texts([{"role": "developer", "content": 3}])


def test_tool_names() -> None:
    tools = [{"type": "function", "name": "exec_command"}, {"type": "web_search"}, "junk",
             {"type": "namespace", "name": "mcp__magic-context", "tools": [{"type": "function", "name": "ctx_reduce"}]},
             {"type": "custom", "name": "apply_patch"}]
    assert responses.tool_names(tools) == ["exec_command", "mcp__magic-context__ctx_reduce", "apply_patch"]
    assert responses.tool_names(None) == []


@pytest.mark.parametrize(("items", "message"), [
    ("x", "openai-responses input: expected an array of items, got string"),
    ([{"type": "message", "role": "developer", "content": 5}],
     "openai-responses input[0].content: expected a string or an array of parts, got number"),
    ([{"type": "message", "role": "system", "content": [{"type": "input_text", "text": 1}]}],
     "openai-responses input[0].content[0].text: expected a string, got number"),
])
def test_system_texts_bad_shapes_say_exactly_what_was_found(items: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        responses.system_texts(items)
    assert str(err.value) == message


def test_system_texts_empty_content_and_tool_names_of_a_non_namespace_with_tools() -> None:
    assert responses.system_texts([{"type": "message", "role": "developer", "content": None},
                                   {"type": "message", "role": "system", "content": ""}]) == ["", ""]
    tools = [{"type": "function", "name": "f", "tools": [{"name": "x"}]},
             {"type": "namespace", "name": "ns", "tools": [{"name": "a"}, "junk", {"name": 3}]}]
    assert responses.tool_names(tools) == ["f", "ns__a"]


# ---------------------------------------------------------------- media, exactly (mutation survivors of #16)


def test_decode_media_parts_exactly() -> None:
    """Each media part kind keeps its type, payload pointers and key; nothing else is invented."""
    items = [{"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": "https://x.test/a.png"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf",
         "file_url": "https://x.test/a.pdf"},
        {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
        {"type": "input_file", "file_id": "file_1"}]}]
    image, doc, audio, bare = responses.decode(items)[0].blocks
    got = [(b.kind, b.media_type, b.meta, b.key, b.raw) for b in (image, doc, audio, bare)]
    parts = items[0]["content"]
    assert got == [
        (m.MEDIA, None, {"url": "https://x.test/a.png"}, "i0.0", parts[0]),
        (m.MEDIA, "application/pdf", {"filename": "a.pdf", "file_url": "https://x.test/a.pdf"}, "i0.1", parts[1]),
        (m.MEDIA, "audio/wav", None, "i0.2", parts[2]),
        (m.MEDIA, None, None, "i0.3", parts[3])]


def test_render_fresh_media_parts_exactly() -> None:
    """Images by http(s) or data URL, or base64 data, go as input_image; anything else, and any image outside a
    user turn, as a placeholder naming its type."""
    def media(media_type: str | None, **meta: str) -> m.Block:
        return m.Block(m.MEDIA, media_type=media_type, meta=meta or None)

    user = m.Message("u", m.USER, [
        media("image/png", url="https://x.test/a.png"), media("image/png", url="http://x.test/b.png"),
        media(None, url="data:image/gif;base64,R0lG"), media("image/jpeg", data="/9j/"),
        media("image/png", url="ftp://x.test/c.png"), media("application/pdf", data="JVBER"),
        media(None), media("audio/wav", url="https://x.test/d.wav")])
    system = m.Message("s", m.SYSTEM, [m.Block(m.TEXT, text="sys"), media("image/png", url="https://x.test/a.png")])

    def image(url: str) -> dict:
        return {"type": "input_image", "image_url": url, "detail": "auto"}

    def omitted(what: str) -> dict:
        return {"type": "input_text", "text": f"[{what} attachment omitted]"}

    assert responses.encode([system, user]) == [
        {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "sys"}, omitted("image/png")]},
        {"type": "message", "role": "user", "content": [
            image("https://x.test/a.png"), image("http://x.test/b.png"), image("data:image/gif;base64,R0lG"),
            image("data:image/jpeg;base64,/9j/"), omitted("image/png"), omitted("application/pdf"),
            omitted("media"), omitted("audio/wav")]}]


def test_fresh_blocks_added_to_decoded_items_are_rendered_exactly() -> None:
    """Blocks without raw JSON land in their item (keyed) or after the reply (unkeyed or keyed past its end),
    as parts of the item's own kind; an image goes as an image only in a user's input."""
    items = [{"type": "message", "role": "user", "content": "hi"},
             {"type": "message", "role": "user", "content": "solo"},
             {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
             {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}]
    user, solo, reply = responses.decode(copy.deepcopy(items))[:3]
    png = m.Block(m.MEDIA, media_type="image/png", meta={"url": "https://x.test/a.png"})
    user.blocks.append(png)
    solo.blocks[:] = [png]
    reply.blocks.insert(2, m.Block(m.TEXT, text="more", key="i1.1"))
    reply.blocks.insert(3, m.Block(m.MEDIA, media_type="image/png", meta={"url": "https://x.test/a.png"},
                                   key="i1.2"))
    reply.blocks += [m.Block(m.TEXT, text="late", key="i3"), m.Block(m.TEXT, text="tail")]
    image = {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"}
    assert responses.encode([user, solo, reply]) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}, image]},
        {"type": "message", "role": "user", "content": [image]},
        items[2],
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "ok"}, {"type": "output_text", "text": "more"},
            {"type": "output_text", "text": "[image/png attachment omitted]"}]},
        items[4],
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "late"}, {"type": "output_text", "text": "tail"}]}]


@pytest.mark.parametrize(("key", "index"), [
    ("i3", 3), ("i3.1", 3), ("i3:dropped", 3), ("i3.1:dropped", 3), ("i3.1.2", 3), ("i3:a:b", 3),
    ("item_7", None), ("i", None), ("p3", None), ("", None)])
def test_item_index_reads_the_item_number_of_a_key(key: str, index: int | None) -> None:
    assert responses._item_index(key) == index


def test_decode_reasoning_reads_summary_and_content_texts_exactly() -> None:
    item = {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc",
            "summary": [{"type": "summary_text", "text": "a"}, "junk", {"type": "summary_text"}],
            "content": [{"type": "reasoning_text", "text": "b"}]}
    reply = responses.decode([item, {"type": "message", "role": "assistant", "content": "x"}])[0]
    think = reply.blocks[0]
    assert (think.kind, think.text, think.key, think.meta) == (
        m.REASONING, "a\nb", "i0", {"encrypted_content": "enc", "summary": item["summary"]})
    assert think.raw is item


def test_a_reply_message_loses_its_item_with_its_last_block_but_an_empty_one_stays() -> None:
    items = [{"type": "message", "role": "assistant", "content": []},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "gone"}]},
             {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}]
    reply = responses.decode(copy.deepcopy(items))[0]
    reply.blocks[:] = [b for b in reply.blocks if b.kind != m.TEXT]
    assert responses.encode([reply]) == [items[0], items[2]]


@pytest.mark.parametrize(("output", "message"), [
    (3, "openai-responses input[0].output: expected a string or an array of parts, got number"),
    (["junk"], "openai-responses input[0].output[0]: expected an object, got string"),
])
def test_bad_tool_outputs_say_exactly_what_was_found(output: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        responses.decode([{"type": "function_call_output", "call_id": "c", "output": output}])
    assert str(err.value) == message


def test_decode_a_tool_result_exactly() -> None:
    item = {"type": "custom_tool_call_output", "call_id": "c", "output": [
        {"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "https://x.test/a.png"},
        {"type": "input_text", "text": "b"}]}
    out = responses.decode([item])[0].blocks[0]
    assert (out.text, out.key, out.meta, out.tool_id) == ("a\nb", "i0", {"type": "custom_tool_call_output"}, "c")
    assert out.raw is item


def test_fresh_assistant_media_result_without_id_and_decoded_custom_call_name() -> None:
    msgs = [m.Message("a", m.ASSISTANT, [m.Block(m.MEDIA, media_type="image/png", meta={"url": "https://x.test/a.png"})]),
            m.Message("t", m.TOOL, [m.Block(m.TOOL_RESULT, text="r", tool_id=None)])]
    assert responses.encode(msgs) == [
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "[image/png attachment omitted]"}]},
        {"type": "function_call_output", "call_id": "", "output": "r"}]
    call = responses.decode([{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p"}])
    assert (call[0].blocks[0].tool_name, call[0].blocks[0].input) == ("apply_patch", "p")


def test_only_a_decoded_call_rewrites_its_item() -> None:
    """An opaque reply item with an `input` field round-trips untouched; a fresh call block keyed to a call item
    leaves the item as it was."""
    items = [{"type": "local_shell_call", "call_id": "s1", "input": "not json"},
             {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}]
    reply = responses.decode(copy.deepcopy(items))[0]
    reply.blocks[1] = m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={"x": 1}, key="i1")
    assert responses.encode([reply]) == items


_ROLE_HINT = "(expected user, assistant, system or developer)"


@pytest.mark.parametrize(("items", "message"), [
    ("x", "input: expected an array of items, got string"),
    ([3], "input[0]: expected an item object, got number"),
    ([{"type": "message", "role": []}], f"input[0].role: unknown role array {_ROLE_HINT}"),
    ([{"role": "r" * 50}], f"input[0].role: unknown role {'r' * 40!r} {_ROLE_HINT}"),
    ([{"type": 3}], "input[0].type: expected an item type (or a message `role`), got number"),
    ([{"role": "user", "content": 3}], "input[0].content: expected a string or an array of parts, got number"),
    ([{"role": "user", "content": ["junk"]}], "input[0].content[0]: expected an object, got string"),
    ([{"role": "user", "content": [{"type": "input_text", "text": 1}]}],
     "input[0].content[0].text: expected a string, got number"),
    ([{"type": "message", "role": "assistant", "content": 3}],
     "input[0].content: expected a string or an array of parts, got number"),
    ([{"type": "function_call", "call_id": 3, "name": "n"}], "input[0].call_id: expected a string, got number"),
    ([[{"type": "function_call", "call_id": "c", "name": "n"}, "junk"]],
     "input[0][1]: expected an item object, got string"),
])
def test_bad_items_say_exactly_what_was_found(items: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        responses.decode(items)  # type: ignore[arg-type]
    assert str(err.value) == f"openai-responses {message}"


def test_an_unknown_message_role_is_rejected_even_when_skimmed() -> None:
    with pytest.raises(BadInput, match="unknown role 'tool'"):
        responses.decode([{"role": "tool", "content": "x"}], skim=1)


def test_decode_each_item_kind_exactly() -> None:
    """Every block field of string and part content, odd part types, audio without a format, results and
    items the codec only carries."""
    parts = [{"type": "input_text", "text": "a"}, {"type": ["input_text"], "text": "b"},
             {"type": "input_audio", "input_audio": {"data": "AAA"}}]
    items = [{"role": "user", "content": "hi"}, {"role": "user", "content": ""},
             {"type": "message", "role": "user", "content": parts},
             {"type": "function_call_output", "call_id": "c", "output": "r"},
             {"type": "local_shell_call_output", "payload": 1}]
    msgs = responses.decode(items)
    fields = [[(b.kind, b.key, b.text, b.original, b.media_type, b.meta, b.tool_id, b.raw) for b in msg.blocks]
              for msg in msgs]
    assert fields == [
        [(m.TEXT, "i0.c", "hi", "hi", None, None, None, "hi")],
        [],
        [(m.TEXT, "i0.0", "a", "a", None, None, None, parts[0]),
         (m.OPAQUE, "i0.1", "", None, None, None, None, parts[1]),
         (m.MEDIA, "i0.2", "", None, None, None, None, parts[2])],
        [(m.TOOL_RESULT, "i0", "r", "r", None, None, "c", items[3])],
        [(m.OPAQUE, "i0", "", None, None, None, None, items[4])],
    ]
    assert [msg.role for msg in msgs] == [m.USER, m.USER, m.USER, m.TOOL, m.TOOL]


def test_skimmed_messages_keep_their_ordinal_raw_and_a_content_derived_id() -> None:
    items = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    msgs = responses.decode(items, skim=2)
    assert [(msg.ordinal, msg.raw, msg.blocks) for msg in msgs] == [(0, items[0], []), (1, items[1], [])]
    assert msgs[1].raw is items[1]
    again = responses.decode([items[1]])[0]
    assert (again.id, again.digest) != (msgs[0].id, msgs[0].digest)
    assert responses.decode([items[0]])[0].id == msgs[0].id
