"""Anthropic Messages codec: round trips, write-back edits, fresh rendering, bad shapes, system helpers."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import orjson
import pytest
from captured_requests import bodies
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.errors import BadInput
from magic_context.wire import anthropic
from magic_context.wire import model as m
from magic_context.wire import openai as openai_codec

# ---------------------------------------------------------------- helpers


def roundtrip(messages: list) -> list:
    return anthropic.encode(anthropic.decode(messages))


def check_valid(raw_messages: list, open_end: bool = False) -> None:
    """Provider invariants: roles, non-empty content, each tool_use answered first thing in the next user turn.

    Consecutive same-role messages are merged first, as the API does (Claude Code splits one response).
    `open_end` accepts a recorded transcript that stops right after a tool_use.
    """
    assert isinstance(raw_messages, list)
    messages: list[dict] = []
    for msg in raw_messages:
        assert msg["role"] in ("user", "assistant"), msg
        content = msg["content"]
        assert (isinstance(content, str) and content) or (isinstance(content, list) and content), msg
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if messages and messages[-1]["role"] == msg["role"]:
            messages[-1]["content"] = messages[-1]["content"] + blocks
        else:
            messages.append({"role": msg["role"], "content": blocks})
    for i, msg in enumerate(messages):
        blocks = msg["content"]
        if msg["role"] == "assistant":
            assert all(b["type"] != "tool_result" for b in blocks)
            uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if uses and not (open_end and i == len(messages) - 1):
                nxt = messages[i + 1]
                assert nxt["role"] == "user"
                lead = []
                for b in nxt["content"]:
                    if b["type"] != "tool_result":
                        break
                    lead.append(b["tool_use_id"])
                assert sorted(lead) == sorted(uses), (uses, lead)
        else:
            assert all(b["type"] != "tool_use" for b in blocks)
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            if results:
                prev = messages[i - 1]
                assert prev["role"] == "assistant"
                assert set(results) <= {b["id"] for b in prev["content"] if b["type"] == "tool_use"}
                assert [b["type"] for b in blocks[: len(results)]] == ["tool_result"] * len(results)


def claude_code_messages(path: Path) -> list:
    """The Anthropic API message objects recorded in a Claude Code transcript (extra keys included)."""
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") in ("user", "assistant") and isinstance(entry.get("message"), dict):
            out.append(entry["message"])
    return out


def sample() -> list:
    return [
        {"role": "user", "content": "Fix the bug"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Let me look.", "signature": "sig-A=="},
            {"type": "text", "text": "Reading the file."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "ls"}, "cache_control": {
                "type": "ephemeral"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)\n"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True, "content": [
                {"type": "text", "text": "ls: denied"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                {"type": "text", "text": "exit 2"},
            ]},
            {"type": "text", "text": "continue", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "opaque=="},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "Done.", "citations": None},
        ]},
        {"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                     "data": "doc"}}, {"type": "text", "text": "ok"}]},
    ]


# ---------------------------------------------------------------- decode


def test_decode_maps_blocks() -> None:
    msgs = anthropic.decode(sample())
    assert [x.role for x in msgs] == [m.USER, m.ASSISTANT, m.USER, m.ASSISTANT, m.USER]
    assert [x.ordinal for x in msgs] == [0, 1, 2, 3, 4]
    first = msgs[0].blocks[0]
    assert (first.kind, first.text, first.original, first.key) == (m.TEXT, "Fix the bug", "Fix the bug", "p0")
    think, text, call, call2 = msgs[1].blocks
    assert think.kind == m.REASONING and think.meta == {"signature": "sig-A=="} and think.original is None
    assert text.key == "p1" and call2.key == "p3"
    assert (call.kind, call.tool_id, call.tool_name, call.input) == (m.TOOL_CALL, "toolu_1", "read", {"path": "a.py"})
    r1, r2, _ = msgs[2].blocks
    assert (r1.kind, r1.tool_id, r1.tool_name, r1.text, r1.is_error) == (m.TOOL_RESULT, "toolu_1", "read", "print(1)\n",
                                                                         False)
    assert r2.text == "ls: denied\nexit 2" and r2.original == r2.text and r2.is_error and r2.tool_name == "bash"
    assert msgs[2].role == m.USER  # a user turn of tool results stays a user message
    redacted, srv, srv_result, done = msgs[3].blocks
    assert redacted.kind == m.REASONING and redacted.meta == {"redacted": "opaque=="} and redacted.text == ""
    assert srv.kind == m.OPAQUE and srv_result.kind == m.OPAQUE and done.kind == m.TEXT
    assert msgs[4].blocks[0].kind == m.MEDIA and msgs[4].blocks[0].media_type == "text/plain"
    assert all(b.raw is sample_b for b, sample_b in zip(msgs[1].blocks, msgs[1].raw["content"], strict=True))


def test_derived_ids_are_stable_and_tell_repeats_apart() -> None:
    doc = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "ok"}]
    ids = [x.id for x in anthropic.decode(doc)]
    assert len(set(ids)) == 3
    assert ids == [x.id for x in anthropic.decode(copy.deepcopy(doc))]


@pytest.mark.parametrize(("doc", "where"), [
    ({"role": "user"}, "messages"),
    ([{"role": "user", "content": "a"}, "hello"], "messages[1]"),
    ([{"role": "tool", "content": "a"}], "messages[0].role"),
    ([{"content": "a"}], "messages[0].role"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user"}], "messages[0].content"),
    ([{"role": "user", "content": ["x"]}], "messages[0].content[0]"),
    ([{"role": "user", "content": [{"type": "text", "text": None}]}], "messages[0].content[0].text"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "name": "x", "input": {}}]}], "messages[0].content[0].id"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 3}]}],
     "messages[0].content[0].content"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [7]}]}],
     "messages[0].content[0].content[0]"),
])
def test_bad_shapes_raise_with_location(doc: object, where: str) -> None:
    with pytest.raises(BadInput) as err:
        anthropic.decode(doc)  # type: ignore[arg-type]
    line = err.value.one_line()
    assert where in line and "\n" not in line


def test_unknown_block_types_pass_through() -> None:
    doc = [{"role": "user", "content": [{"type": "future_block", "x": [1, 2]}, {"no_type": True}]}]
    msgs = anthropic.decode(copy.deepcopy(doc))
    assert [b.kind for b in msgs[0].blocks] == [m.OPAQUE, m.OPAQUE]
    assert anthropic.encode(msgs) == doc


# ---------------------------------------------------------------- round trips

_text = st.text(max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | _text,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6)
_object = st.dictionaries(_text, _json, max_size=3)
_ids = st.sampled_from(["toolu_a", "toolu_b", "toolu_c"])
_cache = {"cache_control": st.just({"type": "ephemeral"})}
_text_block = st.fixed_dictionaries({"type": st.just("text"), "text": _text}, optional={**_cache, "citations": _json})
_image = st.fixed_dictionaries({"type": st.just("image"), "source": st.fixed_dictionaries(
    {"type": st.just("base64"), "media_type": st.sampled_from(["image/png", "image/jpeg"]), "data": _text})})
_blocks = st.one_of(
    _text_block,
    _image,
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": _ids, "name": st.sampled_from(["read", "bash"]),
                           "input": _object}, optional=_cache),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": _ids},
                          optional={"content": _text | st.lists(_text_block | _image, max_size=3),
                                    "is_error": st.booleans(), **_cache}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _text, "signature": _text}),
    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": _text}),
    st.fixed_dictionaries({"type": st.sampled_from(["server_tool_use", "mystery"]), "payload": _json}),
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": _text | st.lists(_blocks, max_size=5)},
    optional={"id": _text, "usage": _object},
)
_conversation = st.lists(_message, max_size=6)
_settings = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(_conversation)
def test_roundtrip_is_identity(doc: list) -> None:
    expected = orjson.dumps(doc)
    assert orjson.dumps(roundtrip(copy.deepcopy(doc))) == expected


@_settings
@given(_conversation, st.sampled_from(["§7§ ", "", "x"]))
def test_edits_read_back(doc: list, prefix: str) -> None:
    """Whatever the write-back rule does, decoding the output gives the edited text back."""
    msgs = anthropic.decode(doc)
    wanted = []
    for msg in msgs:
        for j, b in enumerate(msg.blocks):
            if b.kind in (m.TEXT, m.TOOL_RESULT):
                b.text = prefix + b.text if j % 2 == 0 else "[dropped §3§]"
            wanted.append((b.kind, b.text))
    again = anthropic.decode(anthropic.encode(msgs))
    assert [(b.kind, b.text) for x in again for b in x.blocks] == wanted
    assert orjson.dumps(anthropic.encode(anthropic.decode(copy.deepcopy(doc)))) == orjson.dumps(doc)


@pytest.mark.parametrize("name", ["bookminder-subagent-a12564cd.jsonl", "bookminder-main-prefix.jsonl",
                                  "simonw-claude-code-transcripts__sample_session.jsonl",
                                  "daaain-claude-code-log__dag_compact_after_rewind.jsonl"])
def test_roundtrip_real_claude_code_messages(sessions_dir: Path, name: str) -> None:
    doc = claude_code_messages(sessions_dir / "claude-code" / name)
    assert doc
    expected = orjson.dumps(doc)
    assert orjson.dumps(roundtrip(doc)) == expected


@pytest.mark.parametrize("path", bodies("claude-code"), ids=lambda p: p.name)
def test_claude_code_body_system_messages(path: Path) -> None:
    """Claude Code's `role: "system"` messages decode as SYSTEM, keep their bytes, and round-trip exactly."""
    data = path.read_bytes()
    body = orjson.loads(data)
    msgs = anthropic.decode(body["messages"])
    system = [x for x in msgs if x.role == m.SYSTEM]
    assert system, "the captured body has no system-role message"
    for msg in system:
        assert msg.raw["role"] == "system" and msg.blocks and all(b.kind == m.TEXT for b in msg.blocks)
    body["messages"] = anthropic.encode(msgs)
    assert orjson.dumps(body) == data


def test_system_messages_are_never_skimmed_and_keep_their_place() -> None:
    doc = [{"role": "user", "content": "hi"}, {"role": "system", "content": [{"type": "text", "text": "env"}]},
           {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    whole = anthropic.decode(copy.deepcopy(doc))
    part = anthropic.decode(copy.deepcopy(doc), skim=3)
    assert [x.role for x in part] == [m.USER, m.SYSTEM, m.ASSISTANT, m.USER]
    assert [len(x.blocks) for x in part] == [0, 1, 0, 1]
    assert [(x.id, x.digest) for x in part] == [(x.id, x.digest) for x in whole]
    assert part[1].blocks[0].text == "env"
    assert anthropic.encode(whole) == doc


def test_ids_ignore_moving_cache_control() -> None:
    """Claude Code marks the newest blocks each request and sends the same message as blocks or as a string."""
    first = [{"role": "user", "content": "hi"},
             {"role": "system", "content": [{"type": "text", "text": "env", "cache_control": {"type": "ephemeral"}}]}]
    second = [{"role": "user", "content": "hi"}, {"role": "system", "content": "env"},
              {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok",
                                            "cache_control": {"type": "ephemeral"}}]}]
    third = [*copy.deepcopy(second[:3]), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]
    a, b, c = (anthropic.decode(copy.deepcopy(x)) for x in (first, second, third))
    assert [(x.id, x.digest) for x in a] == [(x.id, x.digest) for x in b[:2]]
    assert [(x.id, x.digest) for x in b] == [(x.id, x.digest) for x in c]
    assert anthropic.encode(b) == second  # the marks themselves are served as sent
    edited = anthropic.decode([{"role": "system", "content": "env2"}])
    assert edited[0].id != a[1].id
    plain = anthropic.decode([{"role": "user", "content": [{"type": "text", "text": "x", "citations": None}]}])
    assert plain[0].id != anthropic.decode([{"role": "user", "content": "x"}])[0].id


def test_prompt_index_skips_the_billing_header() -> None:
    header = "x-anthropic-billing-header: cc_version=2.1.332.414; cc_entrypoint=sdk-cli;"
    assert anthropic.prompt_index([header, "You are a Claude agent.", "main"]) == 1
    assert anthropic.prompt_index(["plain", header]) == 0
    assert anthropic.prompt_index([header]) == 1
    assert anthropic.prompt_index([]) == 0


def test_thinking_blocks_stay_byte_identical_through_edits(sessions_dir: Path) -> None:
    doc = claude_code_messages(sessions_dir / "claude-code" / "bookminder-subagent-a12564cd.jsonl")
    before = [orjson.dumps(b) for x in doc if isinstance(x["content"], list) for b in x["content"]
              if b["type"] == "thinking"]
    assert before
    msgs = anthropic.decode(doc)
    for n, b in enumerate(b for x in msgs for b in x.blocks):
        if b.kind in (m.TEXT, m.TOOL_RESULT):
            b.text = f"§{n}§ {b.text}"
    out = anthropic.encode(msgs)
    after = [orjson.dumps(b) for x in out if isinstance(x["content"], list) for b in x["content"]
             if b["type"] == "thinking"]
    assert after == before
    # (a Claude Code transcript interleaves parallel calls and results, so it is not itself a valid request)
    tagged = [b.text for x in anthropic.decode(out) for b in x.blocks if b.kind in (m.TEXT, m.TOOL_RESULT)]
    assert tagged and all(t.startswith("§") for t in tagged)


# ---------------------------------------------------------------- tagging-style edits


def test_prefix_tool_results_and_texts() -> None:
    doc = sample()
    msgs = anthropic.decode(doc)
    r1, r2, cont = msgs[2].blocks
    r1.text = "§1§ " + r1.text
    r2.text = "§2§ " + r2.text
    cont.text = "§3§ " + cont.text
    msgs[0].blocks[0].text = "§0§ Fix the bug"
    out = anthropic.encode(msgs)
    assert out[0]["content"] == "§0§ Fix the bug"
    results = out[2]["content"]
    assert results[0]["content"] == "§1§ print(1)\n"
    assert [p.get("text") for p in results[1]["content"]] == ["§2§ ls: denied", None, "exit 2"]  # image kept
    assert results[2] == {"type": "text", "text": "§3§ continue", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    assert anthropic.encode(msgs) == out  # idempotent: the prefix is not inserted twice
    check_valid(out)


def test_replace_text_and_result() -> None:
    msgs = anthropic.decode(sample())
    msgs[1].blocks[1].text = "[dropped §3§]"
    msgs[2].blocks[1].text = "[dropped §5§]"
    out = anthropic.encode(msgs)
    assert out[1]["content"][1]["text"] == "[dropped §3§]"
    assert out[1]["content"][0] == sample()[1]["content"][0]  # thinking untouched
    assert out[2]["content"][1] == {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
                                    "content": "[dropped §5§]"}
    check_valid(out)


def test_remove_tool_call_and_result_pair() -> None:
    msgs = anthropic.decode(sample())
    msgs[1].blocks = [b for b in msgs[1].blocks if b.tool_id != "toolu_2"]
    msgs[2].blocks = [b for b in msgs[2].blocks if b.tool_id != "toolu_2"]
    out = anthropic.encode(msgs)
    check_valid(out)
    assert [b["type"] for b in out[1]["content"]] == ["thinking", "text", "tool_use"]
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "text"]
    # dropping a whole tool turn: the assistant tool_use block and the user message of results
    msgs = anthropic.decode(sample())
    msgs[1].blocks = [b for b in msgs[1].blocks if b.kind != m.TOOL_CALL]
    msgs[2].blocks = [b for b in msgs[2].blocks if b.kind != m.TOOL_RESULT]
    check_valid(anthropic.encode(msgs))


def test_string_content_gaining_a_block_becomes_a_list() -> None:
    msgs = anthropic.decode([{"role": "user", "content": "hi", "extra": 1}])
    msgs[0].blocks.insert(0, m.Block(m.TEXT, text="<session-history/>"))
    assert anthropic.encode(msgs) == [{"role": "user", "content": [
        {"type": "text", "text": "<session-history/>"}, {"type": "text", "text": "hi"}], "extra": 1}]


def test_tool_input_replaced_when_assigned() -> None:
    msgs = anthropic.decode(sample())
    msgs[1].blocks[2].input = {"path": "b.py"}
    assert anthropic.encode(msgs)[1]["content"][2]["input"] == {"path": "b.py"}


# ---------------------------------------------------------------- rendering from canonical


def _clear(msgs: list[m.Message]) -> list[m.Message]:
    for x in msgs:
        x.raw = None
        for b in x.blocks:
            b.raw = None
    return msgs


def test_render_own_messages_fresh() -> None:
    out = anthropic.encode(_clear(anthropic.decode(sample())))
    check_valid(out)
    again = anthropic.decode(out)
    assert again[2].blocks[1].text == "ls: denied\nexit 2"
    assert again[1].blocks[0].raw == sample()[1]["content"][0]  # signed thinking re-rendered exactly
    assert again[3].blocks[0].raw == {"type": "redacted_thinking", "data": "opaque=="}


def test_render_from_openai_canonical(sessions_dir: Path) -> None:
    path = sessions_dir / "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"
    doc = [x for x in json.loads(path.read_text())["messages"] if x["role"] != "exit"]
    msgs = _clear(openai_codec.decode(doc))
    system = [x for x in msgs if x.role == m.SYSTEM]
    out = anthropic.encode([x for x in msgs if x.role != m.SYSTEM])
    check_valid(out, open_end=True)  # the trajectory ends with the submit call
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(out))  # runs of tool messages merged
    assert anthropic.apply_system(None, [s.text() for s in system]) == doc[0]["content"]
    # reasoning_content has no signature: it is not sent as Anthropic thinking
    assert not any(b["type"] == "thinking" for x in out for b in x["content"])


def test_render_pi_like_tool_messages() -> None:
    msgs = [
        m.Message("a", m.USER, [m.Block(m.TEXT, text="go")]),
        m.Message("b", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={"p": 1}),
                                      m.Block(m.TOOL_CALL, tool_id="c2", tool_name="bash", input=None)]),
        m.Message("c", m.TOOL, [m.Block(m.TOOL_RESULT, text="one", tool_id="c1")]),
        m.Message("d", m.TOOL, [m.Block(m.TOOL_RESULT, text="two", tool_id="c2", is_error=True)]),
        m.Message("e", m.USER, [m.Block(m.TEXT, text="next"), m.Block(m.MEDIA, media_type="image/png")]),
        m.Message("f", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c3", tool_name="x", input="not json")]),
        m.Message("g", m.TOOL, [m.Block(m.TOOL_RESULT, text="three", tool_id="c3")]),
    ]
    out = anthropic.encode(msgs)
    check_valid(out)
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "two", "is_error": True},
        {"type": "text", "text": "next"}, {"type": "text", "text": "[image/png attachment omitted]"}]}
    assert out[1]["content"][1]["input"] == {}
    assert out[3]["content"][0]["input"] == {"arguments": "not json"}
    assert out[4] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3", "content": "three"}]}


def test_render_media_and_reasoning_from_other_codecs() -> None:
    blocks = [
        m.Block(m.REASONING, text="pi", meta={"thinkingSignature": "sigPi"}),
        m.Block(m.REASONING, text="oc", meta={"anthropic": {"signature": "sigOC"}}),
        m.Block(m.REASONING, text="", meta={"anthropic": {"redactedData": "red"}}),
        m.Block(m.REASONING, text="deepseek", meta={"field": "reasoning_content", "value": "deepseek"}),
        m.Block(m.TEXT, text="answer"),
    ]
    user = [m.Block(m.MEDIA, media_type="image/png", meta={"url": "data:image/png;base64,QQ=="}),
            m.Block(m.MEDIA, media_type="image/jpeg", meta={"url": "https://x/y.jpg"}),
            m.Block(m.MEDIA, media_type="application/pdf", meta={"data": "UERG"}),
            m.Block(m.MEDIA, media_type="text/plain", meta={"url": "file:///a.txt"})]
    out = anthropic.encode([m.Message("u", m.USER, user), m.Message("a", m.ASSISTANT, blocks)])
    assert out[0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "UERG"}},
        {"type": "text", "text": "[text/plain attachment omitted]"}]
    assert out[1]["content"] == [
        {"type": "thinking", "thinking": "pi", "signature": "sigPi"},
        {"type": "thinking", "thinking": "oc", "signature": "sigOC"},
        {"type": "redacted_thinking", "data": "red"},
        {"type": "text", "text": "answer"}]  # unsigned reasoning is not sent


def test_render_image_roundtrip_through_openai() -> None:
    doc = [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}}]}]
    via_openai = openai_codec.encode(_clear(anthropic.decode(copy.deepcopy(doc))))
    assert anthropic.encode(_clear(openai_codec.decode(via_openai))) == doc


# ---------------------------------------------------------------- system and tools


def test_system_string_and_none() -> None:
    assert anthropic.system_texts("You are X") == ["You are X"]
    assert anthropic.system_texts(None) == []
    assert anthropic.apply_system("You are X", ["You are X\n\nguidance"]) == "You are X\n\nguidance"
    assert anthropic.apply_system("You are X", ["You are X", "more"]) == "You are X\n\nmore"
    assert anthropic.apply_system(None, []) is None
    assert anthropic.apply_system(None, ["g"]) == "g"


def test_system_blocks_keep_cache_control() -> None:
    value = [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
             {"type": "future", "x": 1}, {"type": "text", "text": "B"}]
    assert anthropic.system_texts(value) == ["A", "B"]
    out = anthropic.apply_system(value, ["A", "B2", "C"])
    assert out is value
    assert value == [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                     {"type": "future", "x": 1}, {"type": "text", "text": "B2"}, {"type": "text", "text": "C"}]
    assert anthropic.apply_system(value, ["A1"])[0]["text"] == "A1" and value[2]["text"] == "B2"


@pytest.mark.parametrize("value", [5, {"text": "x"}, [3]])
def test_system_bad_shape(value: object) -> None:
    with pytest.raises(BadInput, match="system"):
        anthropic.system_texts(value)


def test_tool_names_skip_junk() -> None:
    tools = [{"name": "read", "input_schema": {}}, {"type": "web_search_20250305", "name": "web_search"},
             "junk", {"name": 3}, {"description": "no name"}, {"name": "mcp__magic-context__ctx_reduce"}]
    assert anthropic.tool_names(tools) == ["read", "web_search", "mcp__magic-context__ctx_reduce"]
    assert anthropic.tool_names(None) == [] and anthropic.tool_names({"name": "x"}) == []


@pytest.mark.parametrize(("value", "message"), [
    (5, "anthropic system: expected a string or an array of text blocks, got number"),
    ({"text": "x"}, "anthropic system: expected a string or an array of text blocks, got object"),
    (["ok", 3], "anthropic system[1]: expected a text block, got number"),
])
def test_system_bad_shape_names_the_entry_and_what_it_got(value: object, message: str) -> None:
    with pytest.raises(BadInput) as caught:
        anthropic.system_texts(value)
    assert str(caught.value) == message


def test_system_entries_plain_strings_and_untyped_blocks_are_text() -> None:
    """A plain string and a block without `type` are text; a text block whose text is not a string, and any
    other type, are kept in place but carry no text. apply_system replaces texts in order, in the same form."""
    value = ["S", {"text": "U"}, {"type": "text", "text": 7}, {"type": "future", "text": "F"},
             {"type": "text", "text": "T"}]
    assert anthropic.system_texts(value) == ["S", "U", "T"]
    out = anthropic.apply_system(value, ["S1", "U1", "T1", "N"])
    assert out == ["S1", {"text": "U1"}, {"type": "text", "text": 7}, {"type": "future", "text": "F"},
                   {"type": "text", "text": "T1"}, {"type": "text", "text": "N"}]
    assert anthropic.apply_system(["a", "b", "c"], ["x", "y"]) == ["x", "y", "c"]  # entries beyond texts kept
    with pytest.raises(BadInput, match=r"^anthropic system\[1\]: expected a text block, got number$"):
        anthropic.apply_system([{"text": "ok"}, 3], ["x"])  # the shape is checked before any edit


# ---------------------------------------------------------------- media rendered from other formats


def _image(media_type: str, data: str) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


@pytest.mark.parametrize(("media_type", "meta", "rendered"), [
    # a data: URL names the media type when the block has none, and its own type wins when it has one
    (None, {"url": "data:image/webp;base64,UklG"}, _image("image/webp", "UklG")),
    ("image/png", {"url": "data:image/jpeg;base64,QQ=="}, _image("image/png", "QQ==")),
    (None, {"url": "data:application/pdf;base64,JVBE"},
     {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}),
    # base64 data wins over a URL; plain http URLs are sent as URL sources, for PDFs too
    ("image/gif", {"data": "R0lG", "url": "https://x/a.gif"}, _image("image/gif", "R0lG")),
    ("image/png", {"url": "http://x/a.png"}, {"type": "image", "source": {"type": "url", "url": "http://x/a.png"}}),
    ("application/pdf", {"url": "https://x/a.pdf"},
     {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}),
    # what Anthropic cannot take becomes a placeholder naming the type
    ("text/plain", {"data": "aGk="}, {"type": "text", "text": "[text/plain attachment omitted]"}),
    ("text/plain", {"url": "https://x/a.txt"}, {"type": "text", "text": "[text/plain attachment omitted]"}),
    ("image/png", {"url": "ftp://x/a.png"}, {"type": "text", "text": "[image/png attachment omitted]"}),
    ("image/png", {"url": "data:image/png,QQ=="}, {"type": "text", "text": "[image/png attachment omitted]"}),
    ("image/png", {"url": "xdata:image/png;base64,QQ=="}, {"type": "text", "text": "[image/png attachment omitted]"}),
    ("image/png", {"data": 5}, {"type": "text", "text": "[image/png attachment omitted]"}),
    (None, None, {"type": "text", "text": "[media attachment omitted]"}),
    (None, {"data": "QQ=="}, {"type": "text", "text": "[media attachment omitted]"}),
    # the payload after the first ";base64," is sent as it is (mc does not repair a malformed data: URL)
    ("image/png", {"url": "data:image/png;base64,QQ;base64,Qg"}, _image("image/png", "QQ;base64,Qg")),
])
def test_render_media_payloads(media_type: str | None, meta: dict | None, rendered: dict) -> None:
    block = m.Block(m.MEDIA, media_type=media_type, meta=meta)
    out = anthropic.encode([m.Message("u", m.USER, [block])])
    assert out == [{"role": "user", "content": [rendered]}]


def test_error_flag_written_back_only_when_it_changed() -> None:
    doc = sample()
    doc[2]["content"][0]["is_error"] = False
    msgs = anthropic.decode(doc)
    r1, r2, _ = msgs[2].blocks
    r1.is_error, r2.is_error = True, False
    out = anthropic.encode(msgs)
    assert out[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)\n",
                                    "is_error": True}
    assert out[2]["content"][1]["is_error"] is False and out[2]["content"][1]["content"][0]["text"] == "ls: denied"
    # unchanged flags stay as sent: an explicit false is kept, an absent one is not added
    later = [{"role": "assistant", "content": "ok"},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x",
                                           "is_error": False}]}]
    again = anthropic.encode(anthropic.decode([*sample(), *later]))
    assert "is_error" not in again[2]["content"][0] and again[6]["content"][0]["is_error"] is False


def test_render_reasoning_needs_a_non_empty_string_signature() -> None:
    blocks = [m.Block(m.REASONING, text="empty", meta={"signature": ""}),
              m.Block(m.REASONING, text="junk first", meta={"signature": 7, "thinkingSignature": {"x": 1},
                                                             "anthropic": {"signature": "sigOC"}}),
              m.Block(m.REASONING, text="none", meta={"signature": None, "anthropic": "not an object"}),
              m.Block(m.TEXT, text="answer")]
    out = anthropic.encode([m.Message("a", m.ASSISTANT, blocks)])
    assert out[0]["content"] == [{"type": "thinking", "thinking": "junk first", "signature": "sigOC"},
                                 {"type": "text", "text": "answer"}]


def test_fresh_user_turn_puts_tool_results_first() -> None:
    """A user message from another format may hold text before its tool results: Anthropic wants results first."""
    msgs = [m.Message("a", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={}),
                                          m.Block(m.TOOL_CALL, tool_id="c2", tool_name="read", input={})]),
            m.Message("u", m.USER, [m.Block(m.TEXT, text="before"), m.Block(m.TOOL_RESULT, text="one", tool_id="c1"),
                                    m.Block(m.TEXT, text="between"),
                                    m.Block(m.TOOL_RESULT, text="two", tool_id="c2")])]
    out = anthropic.encode(msgs)
    check_valid(out)
    assert out[1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "two"},
        {"type": "text", "text": "before"}, {"type": "text", "text": "between"}]}


def _ids_of(doc: list, skim: int = 0) -> list[tuple[str, str | None]]:
    return [(x.id, x.digest) for x in anthropic.decode(copy.deepcopy(doc), skim=skim)]


def test_ids_see_a_lone_plain_text_block_as_its_string_and_ignore_marks_on_any_block() -> None:
    text_block = {"type": "text", "text": "hi"}
    assert _ids_of([{"role": "user", "content": [text_block]}]) == _ids_of([{"role": "user", "content": "hi"}])
    two = [{"role": "user", "content": [text_block, {"type": "text", "text": "there"}]}]
    marked = [{"role": "user", "content": [text_block, {"type": "text", "text": "there",
                                                         "cache_control": {"type": "ephemeral"}}]}]
    assert _ids_of(marked) == _ids_of(two)
    assert _ids_of(two) != _ids_of([{"role": "user", "content": "hi\nthere"}])
    lone_call = [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}]
    assert _ids_of(lone_call) != _ids_of([{"role": "assistant", "content": ""}])


@pytest.mark.parametrize("content", [5, [5, {"type": "text", "text": "x"}], {"k": 1}, "", [], None,
                                     [5, {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]])
def test_skimmed_messages_get_an_id_whatever_their_content(content: object) -> None:
    """A skimmed message was decoded whole on an earlier pass: its content is hashed, never read or checked."""
    doc = [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]
    (msg_id, digest), _ = _ids_of(doc, skim=1)
    assert msg_id.endswith(digest)
    assert (msg_id, digest) != _ids_of([{"role": "user", "content": "other"}], skim=1)[0]


def test_sample_round_trips_and_an_assigned_input_is_written_even_when_none() -> None:
    assert roundtrip(sample()) == sample()  # server tool blocks keep their own input
    msgs = anthropic.decode(sample())
    msgs[1].blocks[2].input = None
    assert anthropic.encode(msgs)[1]["content"][2] == {"type": "tool_use", "id": "toolu_1", "name": "read",
                                                       "input": None}


@pytest.mark.parametrize(("doc", "message"), [
    ({"role": "user"}, "anthropic messages: expected an array, got object"),
    ([{"role": "user", "content": "a"}, "hello"], "anthropic messages[1]: expected a message object, got string"),
    ([{"role": "tool", "content": "a"}],
     "anthropic messages[0].role: unknown role 'tool' (expected user, assistant or system)"),
    ([{"role": "x" * 50, "content": "a"}],
     f"anthropic messages[0].role: unknown role '{'x' * 40}' (expected user, assistant or system)"),
    ([{"content": "a"}], "anthropic messages[0].role: unknown role null (expected user, assistant or system)"),
    ([{"role": 5, "content": "a"}],
     "anthropic messages[0].role: unknown role number (expected user, assistant or system)"),
    ([{"role": ["user"], "content": "a"}],  # unhashable: never looked up in the role table
     "anthropic messages[0].role: unknown role array (expected user, assistant or system)"),
    ([{"role": "user", "content": 5}],
     "anthropic messages[0].content: expected a string or an array of blocks, got number"),
    ([{"role": "user", "content": ["x"]}],
     "anthropic messages[0].content[0]: expected a content block object, got string"),
    ([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": True}]}],
     "anthropic messages[0].content[1].text: expected a string, got boolean"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "name": "x", "input": {}}]}],
     "anthropic messages[0].content[0].id: expected a string, got null"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": 3, "input": {}}]}],
     "anthropic messages[0].content[0].name: expected a string, got number"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": ["t"]}]}],
     "anthropic messages[0].content[0].tool_use_id: expected a string, got array"),
])
def test_bad_shapes_say_exactly_what_was_found(doc: object, message: str) -> None:
    with pytest.raises(BadInput) as err:
        anthropic.decode(doc)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_decode_keys_every_block_kind_by_its_index_and_reads_loose_reasoning_and_media() -> None:
    """Keys address blocks within their message (tags, drops); unsigned thinking and URL media decode too."""
    url_image = {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png", "media_type": 5}}
    doc = [{"role": "assistant", "content": [
        {"type": "thinking"},  # no text, no signature
        {"type": "redacted_thinking", "data": "r=="},
        url_image,
        {"type": "document", "source": {"type": "file", "file_id": "f1", "url": "https://x.test/b.pdf"}},
        {"type": "mystery"},
        {"type": "tool_result", "tool_use_id": "t", "content": "out"},
    ]}]
    blocks = anthropic.decode(doc)[0].blocks
    assert [b.key for b in blocks] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    think, redacted, image, document, opaque, result = blocks
    assert (think.kind, think.text, think.meta) == (m.REASONING, "", None)
    assert (redacted.kind, redacted.meta) == (m.REASONING, {"redacted": "r=="})
    assert (image.kind, image.media_type, image.meta) == (m.MEDIA, None, {"url": "https://x.test/a.png"})
    assert (document.kind, document.meta) == (m.MEDIA, None)  # only base64 and url sources carry a payload
    assert (opaque.kind, result.kind) == (m.OPAQUE, m.TOOL_RESULT)
    odd = anthropic.decode([{"role": "assistant", "content": [{"type": "thinking", "thinking": 3}]}])
    assert odd[0].blocks[0].text == ""


def test_skimmed_messages_keep_their_index_and_original() -> None:
    doc = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    msgs = anthropic.decode(doc, skim=2)
    assert [(x.ordinal, x.raw, x.blocks) for x in msgs[:2]] == [(0, doc[0], []), (1, doc[1], [])]
    assert all(x.raw is raw for x, raw in zip(msgs, doc, strict=True))
    assert msgs[2].ordinal == 2 and msgs[2].blocks[0].text == "c"
