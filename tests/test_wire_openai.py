"""OpenAI Chat Completions codec: round trips (incl. real mini-swe-agent data), edits, rendering, bad shapes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.errors import BadInput
from magic_context.wire import anthropic as anthropic_codec
from magic_context.wire import model as m
from magic_context.wire import openai

TRAJECTORIES = ["mini-swe-agent_deepseek-chat_django__django-13964.traj.json",
                "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"]

# ---------------------------------------------------------------- helpers


def check_valid(messages: list, open_end: bool = False) -> None:
    """Provider invariants: known roles, content types, every tool_calls[i] answered by a tool message in time."""
    pending: list[str] = []
    for msg in messages:
        role = msg["role"]
        assert role in ("system", "developer", "user", "assistant", "tool"), msg
        content = msg.get("content")
        assert isinstance(content, str | list) or (role == "assistant" and content is None), msg
        if role == "tool":
            assert msg["tool_call_id"] in pending, msg
            pending.remove(msg["tool_call_id"])
            continue
        assert not pending, f"unanswered tool calls {pending} before a {role} message"
        if role == "assistant":
            calls = msg.get("tool_calls") or []
            assert content is not None or calls
            for call in calls:
                assert call["type"] == "function" and isinstance(call["function"]["arguments"], str)
                pending.append(call["id"])
    assert open_end or not pending


def trajectory(sessions_dir: Path, name: str) -> list:
    """A mini-swe-agent trajectory's chat messages, minus its final `exit` record (never sent to a model)."""
    doc = json.loads((sessions_dir / name).read_text())["messages"]
    assert doc[-1]["role"] == "exit"
    return doc[:-1]


def sample() -> list:
    return [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                                     {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}},
                                     {"type": "future", "z": 1}]},
        {"role": "assistant", "content": None, "reasoning_content": "think", "reasoning": "also",
         "reasoning_details": [{"type": "reasoning.text", "text": "det"}],
         "tool_calls": [
             {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
             {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a"}},
         ], "function_call": None},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py", "extra": {"rc": 0}},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "bad"},
                                                               {"type": "text", "text": "args"}]},
        {"role": "assistant", "content": "Done.", "function_call": {"name": "old", "arguments": "{}"}},
    ]


# ---------------------------------------------------------------- decode


def test_decode_maps_messages() -> None:
    msgs = openai.decode(sample())
    assert [x.role for x in msgs] == [m.SYSTEM, m.USER, m.ASSISTANT, m.TOOL, m.TOOL, m.ASSISTANT]
    assert msgs[0].blocks[0].key == "c" and msgs[0].raw["role"] == "developer"
    text, image, audio, future = msgs[1].blocks
    assert (text.kind, text.key, text.original) == (m.TEXT, "p0", "look")
    assert (image.kind, image.media_type, audio.media_type) == (m.MEDIA, "image/png", "audio/wav")
    assert future.kind == m.OPAQUE
    r1, r2, r3, c1, c2 = msgs[2].blocks
    assert [b.key for b in msgs[2].blocks] == ["r", "r:reasoning", "r:reasoning_details", "t0", "t1"]
    assert (r1.kind, r1.text, r3.text) == (m.REASONING, "think", "det") and r2.original is None
    assert (c1.kind, c1.tool_id, c1.tool_name, c1.input) == (m.TOOL_CALL, "call_1", "bash", {"command": "ls"})
    assert c2.input == "{\"path\": \"a"  # not JSON: kept as the string
    res1, = msgs[3].blocks
    assert (res1.kind, res1.tool_id, res1.tool_name, res1.text, res1.key) == (m.TOOL_RESULT, "call_1", "bash",
                                                                               "a.py\nb.py", "c")
    assert msgs[4].blocks[0].text == "bad\nargs" and msgs[4].blocks[0].tool_name == "read"
    assert [b.kind for b in msgs[5].blocks] == [m.TEXT, m.OPAQUE] and msgs[5].blocks[1].key == "f"
    assert [x.ordinal for x in msgs] == list(range(6))


@pytest.mark.parametrize(("doc", "where"), [
    ("nope", "messages"),
    ([{"role": "user", "content": "a"}, 3], "messages[1]"),
    ([{"role": "exit", "content": "diff"}], "messages[0].role"),
    ([{"content": "a"}], "messages[0].role"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user", "content": [None]}], "messages[0].content[0]"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}], "messages[0].content[0].text"),
    ([{"role": "assistant", "content": None, "tool_calls": {"id": "x"}}], "messages[0].tool_calls"),
    ([{"role": "assistant", "content": None, "tool_calls": ["x"]}], "messages[0].tool_calls[0]"),
    ([{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a"}}]}],
     "messages[0].tool_calls[0].id"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": "bash"}]}], "messages[0].tool_calls[0].function"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}], "messages[0].tool_calls[0].function.name"),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
    ([{"role": "tool", "tool_call_id": "c", "content": {"a": 1}}], "messages[0].content"),
])
def test_bad_shapes_raise_with_location(doc: object, where: str) -> None:
    with pytest.raises(BadInput) as err:
        openai.decode(doc)  # type: ignore[arg-type]
    assert where in err.value.one_line()


def test_exit_record_of_a_real_trajectory_is_rejected(sessions_dir: Path) -> None:
    doc = json.loads((sessions_dir / TRAJECTORIES[0]).read_text())["messages"]
    with pytest.raises(BadInput, match=rf"messages\[{len(doc) - 1}\]\.role: unknown role 'exit'"):
        openai.decode(doc)


# ---------------------------------------------------------------- round trips

_text = st.text(max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6)
_extra = {"extra": _json, "name": _text}
_text_part = st.fixed_dictionaries({"type": st.just("text"), "text": _text})
_parts = st.lists(st.one_of(
    _text_part,
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.fixed_dictionaries(
        {"url": st.sampled_from(["https://x/y.png", "data:image/jpeg;base64,AA", "data:,"])})}),
    st.fixed_dictionaries({"type": st.sampled_from(["input_audio", "file", "refusal", "weird"]), "v": _json}),
), max_size=4)
_arguments = st.one_of(
    st.dictionaries(_text, _json, max_size=3).map(json.dumps),
    st.dictionaries(_text, _json, max_size=3).map(lambda v: json.dumps(v, indent=1, ensure_ascii=False)),
    _text,  # mostly not JSON
)
_call = st.fixed_dictionaries(
    {"id": st.sampled_from(["call_a", "call_b"]), "type": st.just("function"),
     "function": st.fixed_dictionaries({"name": st.sampled_from(["bash", "read"]), "arguments": _arguments})},
    optional={"index": st.integers(0, 3)})
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer"]),
                           "content": _text | st.lists(_text_part, max_size=2)}, optional=_extra),
    st.fixed_dictionaries({"role": st.just("user"), "content": _text | _parts}, optional=_extra),
    st.fixed_dictionaries({"role": st.just("assistant"),
                           "content": st.none() | _text | st.lists(_text_part, max_size=2)},
                          optional={"tool_calls": st.none() | st.lists(_call, max_size=3),
                                    "function_call": st.none() | _json, "reasoning_content": st.none() | _text,
                                    "reasoning": _text, "reasoning_details": st.lists(_json, max_size=2),
                                    "provider_specific_fields": _json, **_extra}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": st.sampled_from(["call_a", "call_b"]),
                           "content": _text | st.lists(_text_part | _parts.map(lambda p: p[0] if p else {}),
                                                       max_size=3)}, optional=_extra),
)
_conversation = st.lists(_message, max_size=6)
_settings = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(_conversation)
def test_roundtrip_is_identity(doc: list) -> None:
    expected = orjson.dumps(doc)
    assert orjson.dumps(openai.encode(openai.decode(copy.deepcopy(doc)))) == expected


@_settings
@given(_conversation, st.sampled_from(["§7§ ", "", "x"]))
def test_edits_read_back(doc: list, prefix: str) -> None:
    """Decoding the output gives the edited texts back, and reasoning is untouched."""
    msgs = openai.decode(doc)
    wanted = []
    for msg in msgs:
        for j, b in enumerate(msg.blocks):
            if b.kind in (m.TEXT, m.TOOL_RESULT):
                b.text = prefix + b.text if j % 2 == 0 else "[dropped §3§]"
            wanted.append((b.kind, b.text))
    again = openai.decode(openai.encode(msgs))
    assert [(b.kind, b.text) for x in again for b in x.blocks if b.text] == [w for w in wanted if w[1]]


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_roundtrip_real_trajectory(sessions_dir: Path, name: str) -> None:
    doc = trajectory(sessions_dir, name)
    expected = orjson.dumps(doc)
    msgs = openai.decode(doc)
    assert sum(b.kind == m.TOOL_CALL for x in msgs for b in x.blocks) > 100
    out = openai.encode(msgs)
    assert orjson.dumps(out) == expected
    check_valid(out, open_end=True)  # the trajectory ends with the submit call


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_tagging_edits_on_real_trajectory(sessions_dir: Path, name: str) -> None:
    doc = trajectory(sessions_dir, name)
    pristine = copy.deepcopy(doc)
    msgs = openai.decode(doc)
    for n, b in enumerate(b for x in msgs for b in x.blocks):
        if b.kind in (m.TEXT, m.TOOL_RESULT):
            b.text = f"§{n}§ {b.text}"
    msgs[1].blocks[0].text = "[dropped §3§]"
    # drop the second tool exchange: its call (the assistant keeps its text) and its result message
    asst = next(x for x in msgs[3:] if x.role == m.ASSISTANT)
    call_id = next(b.tool_id for b in asst.blocks if b.kind == m.TOOL_CALL)
    asst.blocks = [b for b in asst.blocks if b.kind != m.TOOL_CALL]
    msgs = [x for x in msgs if not (x.role == m.TOOL and x.blocks[0].tool_id == call_id)]
    out = openai.encode(msgs)
    check_valid(out, open_end=True)
    assert out[1]["content"] == "[dropped §3§]"
    assert len(out) == len(pristine) - 1
    kept = [p for p in pristine if p.get("tool_call_id") != call_id]
    for before, after in zip(kept, out, strict=True):
        assert after.get("extra") == before.get("extra")  # unknown fields survive
        assert after.get("reasoning_content") == before.get("reasoning_content")  # reasoning never edited
        if before["role"] == "tool":
            assert after["content"].endswith(before["content"]) and after["content"].startswith("§")
        elif before.get("tool_calls") and after.get("tool_calls"):
            assert after["tool_calls"] == before["tool_calls"]  # arguments stay the original strings
    assert any(x is asst.raw for x in out) and "tool_calls" not in asst.raw


# ---------------------------------------------------------------- targeted edits


def test_arguments_written_back_only_when_input_changes() -> None:
    doc = sample()
    msgs = openai.decode(doc)
    out = openai.encode(msgs)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == "{\"command\": \"ls\"}"  # original spacing
    msgs[2].blocks[3].input = {"command": "pwd"}
    msgs[2].blocks[4].input = {"path": "a"}  # a repaired malformed call
    out = openai.encode(msgs)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == "{\"command\":\"pwd\"}"
    assert out[2]["tool_calls"][1]["function"]["arguments"] == "{\"path\":\"a\"}"


def test_tool_result_list_prefix_and_replace() -> None:
    msgs = openai.decode(sample())
    msgs[4].blocks[0].text = "§9§ bad\nargs"
    out = openai.encode(msgs)
    assert out[4]["content"] == [{"type": "text", "text": "§9§ bad"}, {"type": "text", "text": "args"}]
    assert openai.encode(msgs)[4] == out[4]  # idempotent
    msgs[4].blocks[0].text = "[dropped §9§]"
    assert openai.encode(msgs)[4] == {"role": "tool", "tool_call_id": "call_2", "content": "[dropped §9§]"}


def test_removing_blocks_removes_fields() -> None:
    msgs = openai.decode(sample())
    msgs[2].blocks = [b for b in msgs[2].blocks if b.key not in ("r:reasoning", "t1")]
    msgs[5].blocks = [b for b in msgs[5].blocks if b.kind != m.OPAQUE]
    msgs = [x for x in msgs if not (x.role == m.TOOL and x.blocks[0].tool_id == "call_2")]
    out = openai.encode(msgs)
    check_valid(out)
    assert "reasoning" not in out[2] and out[2]["reasoning_content"] == "think"
    assert [c["id"] for c in out[2]["tool_calls"]] == ["call_1"]
    assert out[4] == {"role": "assistant", "content": "Done."}
    msgs[2].blocks = [b for b in msgs[2].blocks if b.kind != m.TOOL_CALL]
    assert "tool_calls" not in openai.encode(msgs)[2]


def test_content_edits_keep_shape() -> None:
    msgs = openai.decode(sample())
    msgs[1].blocks[0].text = "§1§ look"
    msgs[5].blocks = [msgs[5].blocks[1]]  # assistant text removed, function_call kept
    out = openai.encode(msgs)
    assert out[1]["content"][0] == {"type": "text", "text": "§1§ look"} and len(out[1]["content"]) == 4
    assert out[5]["content"] is None and out[5]["function_call"] == {"name": "old", "arguments": "{}"}
    msgs[0].blocks.append(m.Block(m.TEXT, text="guidance"))
    assert openai.encode(msgs)[0]["content"] == [{"type": "text", "text": "Be brief."},
                                                 {"type": "text", "text": "guidance"}]


# ---------------------------------------------------------------- rendering from canonical


def _clear(msgs: list[m.Message]) -> list[m.Message]:
    for x in msgs:
        x.raw = None
        for b in x.blocks:
            b.raw = None
    return msgs


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_render_own_messages_fresh(sessions_dir: Path, name: str) -> None:
    doc = trajectory(sessions_dir, name)
    out = openai.encode(_clear(openai.decode(copy.deepcopy(doc))))
    check_valid(out, open_end=True)
    again = openai.decode(out)
    assert [(b.kind, b.text, b.tool_id, b.input) for x in again for b in x.blocks] == \
           [(b.kind, b.text, b.tool_id, b.input) for x in openai.decode(doc) for b in x.blocks]
    assert [x.get("reasoning_content") for x in out] == [x.get("reasoning_content") for x in doc]


def test_render_from_anthropic_canonical() -> None:
    doc = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Running two tools."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "A"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B", "is_error": True},
            {"type": "text", "text": "and now?"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "AA"}}, {"type": "text", "text": "see"}]},
    ]
    out = openai.encode(_clear(anthropic_codec.decode(doc)))
    check_valid(out)
    assert out == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Running two tools.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
            {"id": "toolu_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "A"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "B"},
        {"role": "user", "content": "and now?"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                     {"type": "text", "text": "see"}]},
    ]


def test_render_media_from_meta_payloads() -> None:
    image = m.Block(m.MEDIA, media_type="image/png", meta={"data": "AA"})  # Pi-style payload
    linked = m.Block(m.MEDIA, media_type=None, meta={"url": "https://x/y.png"})  # no type: not known as an image
    pdf = m.Block(m.MEDIA, media_type="application/pdf")
    out = openai.encode([m.Message("u", m.USER, [image, linked, pdf]), m.Message("a", m.ASSISTANT, [image])])
    assert out[0]["content"] == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                 {"type": "text", "text": "[media attachment omitted]"},
                                 {"type": "text", "text": "[application/pdf attachment omitted]"}]
    assert out[1]["content"] == "[image/png attachment omitted]"  # assistants cannot send images


def test_render_mixes_fresh_and_kept_messages() -> None:
    msgs = openai.decode(sample())
    head = m.Message("m0", m.USER, [m.Block(m.TEXT, text="<session-history/>")], synthetic=True)
    out = openai.encode([msgs[0], head, *msgs[1:]])
    assert out[1] == {"role": "user", "content": "<session-history/>"}
    assert out[0] is msgs[0].raw and out[2] is msgs[1].raw
    check_valid(out)


# ---------------------------------------------------------------- system and tools


def test_system_texts_and_apply_string() -> None:
    doc = sample()
    assert openai.system_texts(doc) == ["Be brief."]
    assert openai.apply_system(doc, ["Be brief.\n\nguidance"]) is doc
    assert doc[0] == {"role": "developer", "content": "Be brief.\n\nguidance"}
    openai.apply_system(doc, ["A", "B"])  # more texts than system messages: joined onto the last one
    assert doc[0]["content"] == "A\n\nB"


def test_apply_system_list_content_prefix_suffix_replace() -> None:
    doc = [{"role": "system", "content": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
                                          {"type": "text", "text": "two"}]},
           {"role": "user", "content": "hi"},
           {"role": "system", "content": "late"}]
    assert openai.system_texts(doc) == ["one\ntwo", "late"]
    openai.apply_system(doc, ["one\ntwo\n\nguide"])
    assert doc[0]["content"][1] == {"type": "text", "text": "two\n\nguide"} and doc[2]["content"] == "late"
    openai.apply_system(doc, ["P: one\ntwo\n\nguide", "late2"])
    assert doc[0]["content"][0] == {"type": "text", "text": "P: one", "cache_control": {"type": "ephemeral"}}
    assert doc[2]["content"] == "late2"
    openai.apply_system(doc, ["new"])
    assert doc[0]["content"] == [{"type": "text", "text": "new", "cache_control": {"type": "ephemeral"}}]
    assert openai.system_texts(doc) == ["new", "late2"]


def test_apply_system_without_system_message_inserts_one() -> None:
    doc = [{"role": "user", "content": "hi"}]
    assert openai.system_texts(doc) == []
    openai.apply_system(doc, [])
    assert len(doc) == 1
    openai.apply_system(doc, ["guide"])
    assert doc[0] == {"role": "system", "content": "guide"}
    with pytest.raises(BadInput):
        openai.system_texts({"messages": []})
    with pytest.raises(BadInput, match=r"messages\[1\]\.content"):
        openai.system_texts([{"role": "user", "content": 1}, {"role": "system", "content": 2}])


def test_tool_names_skip_junk() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}, {"type": "function"},
             {"type": "function", "function": {"name": None}}, 7, {"type": "function", "name": "flat"},
             {"type": "function", "function": {"name": "mcp__magic-context__ctx_reduce"}}]
    assert openai.tool_names(tools) == ["bash", "flat", "mcp__magic-context__ctx_reduce"]
    assert openai.tool_names("x") == []


@pytest.mark.parametrize(("doc", "message"), [
    ("nope", "openai messages: expected an array, got string"),
    ([{"role": "user", "content": "a"}, 3], "openai messages[1]: expected a message object, got number"),
    ([{"role": "exit", "content": "diff"}], "openai messages[0].role: unknown role 'exit' (expected system, developer, "
                                             "user, assistant or tool)"),
    ([{"role": "y" * 45}], f"openai messages[0].role: unknown role '{'y' * 40}' (expected system, developer, user, "
                           "assistant or tool)"),
    ([{"content": "a"}], "openai messages[0].role: unknown role null (expected system, developer, user, assistant or "
                         "tool)"),
    ([{"role": 5}], "openai messages[0].role: unknown role number (expected system, developer, user, assistant or "
                    "tool)"),
    ([{"role": {"user": 1}}], "openai messages[0].role: unknown role object (expected system, developer, user, "
                              "assistant or tool)"),  # unhashable: never looked up in the role table
    ([{"role": "user", "content": [3]}], "openai messages[0].content[0]: expected an object, got number"),
    ([{"role": "assistant", "content": 5}], "openai messages[0].content: expected a string, an array of parts or "
                                            "null, got number"),
    ([{"role": "assistant", "tool_calls": [{"id": "c"}]}],
     "openai messages[0].tool_calls[0].function: expected an object, got null"),
    ([{"role": "tool", "content": "x", "tool_call_id": 7}],
     "openai messages[0].tool_call_id: expected a string, got number"),
    ([{"role": "user", "content": 5}], "openai messages[0].content: expected a string, an array of parts or null, got "
                                       "number"),
    ([{"role": "user", "content": [{"type": "text", "text": "a"}, None]}],
     "openai messages[0].content[1]: expected an object, got null"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}],
     "openai messages[0].content[0].text: expected a string, got number"),
    ([{"role": "assistant", "content": None, "tool_calls": {"id": "x"}}],
     "openai messages[0].tool_calls: expected an array, got object"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "a"}}, "x"]}],
     "openai messages[0].tool_calls[1]: expected a tool call object, got string"),
    ([{"role": "assistant", "tool_calls": [{"type": "function", "id": 4, "function": {"name": "a"}}]}],
     "openai messages[0].tool_calls[0].id: expected a string, got number"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": "bash"}]}],
     "openai messages[0].tool_calls[0].function: expected an object, got string"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "custom": ["x"]}]}],
     "openai messages[0].tool_calls[0].custom: expected an object, got array"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": True}}]}],
     "openai messages[0].tool_calls[0].function.name: expected a string, got boolean"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "custom": {}}]}],
     "openai messages[0].tool_calls[0].custom.name: expected a string, got null"),
    ([{"role": "tool", "content": "x", "tool_call_id": None}],
     "openai messages[0].tool_call_id: expected a string, got null"),
    ([{"role": "tool", "tool_call_id": "c", "content": {"a": 1}}],
     "openai messages[0].content: expected a string or an array of blocks, got object"),
])
def test_bad_shapes_say_exactly_what_was_found(doc: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        openai.decode(doc)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_changed_arguments_are_compact_unescaped_json() -> None:
    msgs = openai.decode(sample())
    msgs[2].blocks[3].input = {"command": "ls", "note": "café"}
    assert openai.encode(msgs)[2]["tool_calls"][0]["function"]["arguments"] == '{"command":"ls","note":"café"}'


@pytest.mark.parametrize(("meta", "url"), [
    ({"url": "https://x/y.png"}, "https://x/y.png"),
    ({"url": "http://x/y.png", "data": "AA"}, "http://x/y.png"),  # a URL wins over base64 data
    ({"url": "data:image/gif;base64,R0"}, "data:image/gif;base64,R0"),
    ({"url": "ftp://x/y.png", "data": "AA"}, "data:image/png;base64,AA"),  # not a URL a provider fetches
])
def test_render_image_part_from_a_url(meta: dict, url: str) -> None:
    block = m.Block(m.MEDIA, media_type="image/png", meta=meta)
    assert openai.encode([m.Message("u", m.USER, [block])]) == [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]


def test_render_image_part_typed_only_by_its_data_url() -> None:
    block = m.Block(m.MEDIA, media_type=None, meta={"url": "data:image/webp;base64,UklG"})
    assert openai.encode([m.Message("u", m.USER, [block])])[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/webp;base64,UklG"}}]
    other = m.Block(m.MEDIA, media_type=None, meta={"url": "data:text/plain;base64,aGk="})
    assert openai.encode([m.Message("u", m.USER, [other])])[0]["content"] == "[media attachment omitted]"


def test_render_fresh_message_shapes() -> None:
    def fresh(role: str, *blocks: m.Block) -> list:
        return openai.encode([m.Message("x", role, list(blocks))])

    call = m.Block(m.TOOL_CALL, tool_id="c1", tool_name="bash", input=None)
    text_call = m.Block(m.TOOL_CALL, tool_id="c2", tool_name="bash", input="ls -la")
    assert fresh(m.ASSISTANT, call, text_call) == [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "ls -la"}}]}]
    assert fresh(m.ASSISTANT, m.Block(m.TEXT, text="a"), m.Block(m.TEXT, text="b")) == [
        {"role": "assistant", "content": "a\nb"}]
    assert fresh(m.USER, m.Block(m.TEXT, text="a"), m.Block(m.TEXT, text="b")) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert fresh(m.USER, m.Block(m.TEXT, text="a")) == [{"role": "user", "content": "a"}]
    assert fresh(m.SYSTEM) == [{"role": "system", "content": ""}]
    # only an assistant carries tool_calls; a user turn of tool results alone is just the tool messages
    assert fresh(m.USER, m.Block(m.TEXT, text="hi"), call) == [{"role": "user", "content": "hi"}]
    result = m.Block(m.TOOL_RESULT, text="out", tool_id="c1")
    assert fresh(m.USER, result) == [{"role": "tool", "tool_call_id": "c1", "content": "out"}]
    # reasoning fields of this format come back from their value, else from the block's text
    reasoning = [m.Block(m.REASONING, text="shown", meta={"field": "reasoning_content"}),
                 m.Block(m.REASONING, text="shown", meta={"field": "reasoning_details", "value": [{"text": "d"}]}),
                 m.Block(m.REASONING, text="signed", meta={"signature": "s"})]
    assert fresh(m.ASSISTANT, *reasoning) == [{"role": "assistant", "content": "", "reasoning_content": "shown",
                                               "reasoning_details": [{"text": "d"}]}]


def test_system_helpers_name_a_non_array() -> None:
    with pytest.raises(BadInput) as err:
        openai.system_texts("x")
    assert str(err.value) == "openai messages: expected an array, got string"


def test_custom_tool_call_input_is_written_back_raw() -> None:
    doc = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}]}]
    msgs = openai.decode(copy.deepcopy(doc))
    assert msgs[0].blocks[0].input == "*** Begin Patch"  # free-form input: never parsed as JSON
    assert openai.encode(msgs) == doc
    msgs[0].blocks[0].input = "*** Edited"
    assert openai.encode(msgs)[0]["tool_calls"] == [
        {"id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Edited"}}]


def test_content_keeps_or_becomes_a_string_when_one_text_is_left() -> None:
    # an assistant that only called tools (content null) given a text block: the text is the content string
    msgs = openai.decode([{"role": "assistant", "content": None, "tool_calls": []}])
    msgs[0].blocks.append(m.Block(m.TEXT, text="note"))
    assert openai.encode(msgs)[0]["content"] == "note"
    # string content that gained a sibling (a list) and lost it again is a string again
    msgs = openai.decode([{"role": "user", "content": "hi"}])
    msgs[0].blocks.append(m.Block(m.TEXT, text="more"))
    assert openai.encode(msgs)[0]["content"] == [{"type": "text", "text": "hi"}, {"type": "text", "text": "more"}]
    msgs[0].blocks.pop()
    assert openai.encode(msgs)[0]["content"] == "hi"
    # every part removed: a user message keeps an empty string, an assistant null
    msgs = openai.decode([{"role": "user", "content": [{"type": "text", "text": "x"}]},
                          {"role": "assistant", "content": "y"}])
    msgs[0].blocks, msgs[1].blocks = [], []
    assert [x["content"] for x in openai.encode(msgs)] == ["", None]


def test_data_url_type_reads_the_type_of_a_data_url_only() -> None:
    assert openai.data_url_type("data:image/png;base64,AAAA") == "image/png"
    assert openai.data_url_type("data:text/plain;charset=utf-8;base64,aGk=") == "text/plain"
    assert openai.data_url_type("data:text/csv,a,b") == "text/csv"
    assert openai.data_url_type("data:,hi") is None
    assert openai.data_url_type("https://x.test/a.png") is None
    assert openai.data_url_type(None) is None


def test_decode_keys_media_and_opaque_parts_and_reads_file_and_url_less_parts() -> None:
    doc = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"detail": "low"}},  # no url
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
        {"type": "input_audio", "input_audio": {"data": "x"}},  # no format
        {"type": "refusal", "refusal": "no"},
    ]}, {"role": "user", "content": "plain"}, {"role": "user", "content": ""}]
    msgs = openai.decode(doc)
    image, file, audio, other = msgs[0].blocks
    assert [b.key for b in msgs[0].blocks] == ["p0", "p1", "p2", "p3"]
    assert [(b.kind, b.media_type, b.meta) for b in (image, file, audio)] == [
        (m.MEDIA, None, None), (m.MEDIA, "application/pdf", None), (m.MEDIA, None, None)]
    assert other.kind == m.OPAQUE
    plain, = msgs[1].blocks
    assert (plain.text, plain.original, plain.changed) == ("plain", "plain", False)
    assert msgs[2].blocks == []  # empty string content: nothing to tag or drop


def test_a_call_with_both_function_and_custom_is_read_as_a_function_call() -> None:
    doc = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"},
         "custom": {"name": "g", "input": "x"}}]}]
    call, = openai.decode(doc)[0].blocks
    assert (call.tool_name, call.input) == ("f", {"a": 1})


def test_reasoning_text_reads_each_details_entry_by_text_else_summary() -> None:
    doc = [{"role": "assistant", "content": "x", "reasoning": {"effort": "high"}, "reasoning_details": [
        {"type": "reasoning.summary", "summary": "S"}, {"type": "reasoning.text", "text": "T", "summary": "no"},
        {"type": "reasoning.encrypted", "data": "E"}, "junk"]}]
    blocks = openai.decode(doc)[0].blocks
    assert [(b.key, b.text) for b in blocks] == [("r:reasoning", ""), ("r:reasoning_details", "S\nT"), ("c", "x")]


def test_skimmed_messages_get_id_digest_role_index_and_original_only() -> None:
    doc = [{"role": "system", "content": "sys"}, {"role": "user", "content": "a"},
           {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    whole = openai.decode(copy.deepcopy(doc))
    msgs = openai.decode(doc, skim=3)
    assert [(x.id, x.digest, x.role, x.ordinal) for x in msgs] == [(x.id, x.digest, x.role, x.ordinal) for x in whole]
    assert all(x.digest for x in msgs)
    assert [len(x.blocks) for x in msgs] == [1, 0, 0, 1]  # system messages are always decoded whole
    assert all(x.raw is raw for x, raw in zip(msgs, doc, strict=True))


def test_fresh_blocks_in_a_kept_assistant_message_are_written_into_it() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    msgs = openai.decode([{"role": "assistant", "content": "hi", "reasoning_content": "old", "tool_calls": [call]}])
    msgs[0].blocks = [b for b in msgs[0].blocks if b.kind != m.REASONING] + [
        # a fresh block keyed like the removed one does not keep its field
        m.Block(m.REASONING, text="t", meta={"field": "reasoning", "value": {"v": 1}}, key="r"),
        m.Block(m.REASONING, text="plain", meta={"field": "reasoning_details"}),
        m.Block(m.REASONING, text="signed", meta={"signature": "s"}),  # another provider's: dropped
        m.Block(m.TOOL_CALL, tool_id="c2", tool_name="read", input={"path": "a"})]
    assert openai.encode(msgs) == [{"role": "assistant", "content": "hi", "reasoning": {"v": 1},
                                    "reasoning_details": "plain", "tool_calls": [call, {
                                        "id": "c2", "type": "function",
                                        "function": {"name": "read", "arguments": '{"path":"a"}'}}]}]


def test_function_call_goes_with_its_block_whatever_other_opaque_parts_stay() -> None:
    msgs = openai.decode([{"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                            {"type": "refusal", "refusal": "no"}],
                           "function_call": {"name": "old", "arguments": "{}"}}])
    msgs[0].blocks = [b for b in msgs[0].blocks if b.key != "f"]
    assert "function_call" not in openai.encode(msgs)[0]


def test_fresh_media_in_kept_messages_is_an_image_part_only_for_a_user() -> None:
    msgs = openai.decode([{"role": "user", "content": [{"type": "text", "text": "see"}]},
                          {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}])
    image = m.Block(m.MEDIA, media_type="image/png", meta={"url": "https://x.test/a.png"})
    msgs[0].blocks.append(image)
    msgs[1].blocks.append(image)
    user, assistant = openai.encode(msgs)
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    assert assistant["content"][1] == {"type": "text", "text": "[image/png attachment omitted]"}


def test_a_kept_tool_message_without_its_result_or_with_another_one() -> None:
    doc = [{"role": "tool", "tool_call_id": "c1", "content": "out"}]
    msgs = openai.decode(copy.deepcopy(doc))
    msgs[0].blocks = []
    assert openai.encode(msgs) == doc
    msgs = openai.decode(copy.deepcopy(doc))  # a result put in its place (e.g. by a repair) answers its own call
    msgs[0].blocks = [m.Block(m.TOOL_RESULT, text="moved", original="moved", tool_id="c9")]
    assert openai.encode(msgs) == [{"role": "tool", "tool_call_id": "c9", "content": "moved"}]
    msgs = openai.decode(copy.deepcopy(doc))
    msgs[0].blocks = [m.Block(m.TOOL_RESULT, text="anon", original="anon")]  # no id: the message keeps its own
    assert openai.encode(msgs) == [{"role": "tool", "tool_call_id": "c1", "content": "anon"}]


def test_fresh_results_in_a_kept_user_message_become_tool_messages_before_it() -> None:
    msgs = openai.decode([{"role": "user", "content": "next"}])
    msgs[0].blocks.insert(0, m.Block(m.TOOL_RESULT, text="r", tool_id="c1"))
    assert openai.encode(msgs) == [{"role": "tool", "tool_call_id": "c1", "content": "r"},
                                   {"role": "user", "content": "next"}]


def test_a_tool_message_names_its_result_by_its_call_else_by_its_own_name() -> None:
    doc = [{"role": "tool", "tool_call_id": "c0", "name": "bash", "content": "x"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "c1", "name": "other", "content": "y"},
           {"role": "tool", "tool_call_id": "c2", "name": 5, "content": "z"}]
    msgs = openai.decode(doc)
    assert [x.blocks[0].tool_name for x in (msgs[0], msgs[2], msgs[3])] == ["bash", "read", None]


def test_reasoning_fields_rendered_fresh_keep_their_decoded_value() -> None:
    details = [{"type": "reasoning.text", "text": "det", "signature": None}]
    doc = [{"role": "assistant", "content": "x", "reasoning": "r", "reasoning_details": details}]
    msgs = _clear(openai.decode(copy.deepcopy(doc)))
    assert openai.encode(msgs) == doc


def test_a_legacy_function_call_is_one_opaque_block_holding_it() -> None:
    call = {"name": "old", "arguments": "{}"}
    block = openai.decode([{"role": "assistant", "content": "x", "function_call": call}])[0].blocks[-1]
    assert (block.kind, block.key, block.raw) == (m.OPAQUE, "f", call)  # its JSON is what it costs and replays as
