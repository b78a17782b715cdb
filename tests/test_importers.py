"""Recorded-session importers: real sessions load, counts match the files, contexts follow each harness."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from magic_context.errors import BadInput
from magic_context.wire import model
from magic_context.wire.importers import (
    FORMATS,
    detect_format,
    load_claude_code,
    load_mini_swe,
    load_session,
)
from magic_context.wire.importers.opencode_export import filter_compacted

FIXTURES = Path(__file__).parent / "fixtures"
OPENCODE_FIXTURE = FIXTURES / "opencode-export-small.json"
PI_LARGE = "pi_large-session.jsonl"
PI_COMPACTION = "pi_before-compaction.jsonl"
MINI_DJANGO = "mini-swe-agent_deepseek-chat_django__django-13964.traj.json"
MINI_SQLFLUFF = "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"
CC_MAIN = "claude-code/bookminder-main-prefix.jsonl"
CC_SUBAGENT = "claude-code/bookminder-subagent-a12564cd.jsonl"
CC_SIMONW = "claude-code/simonw-claude-code-transcripts__sample_session.jsonl"
CC_DAG = "claude-code/daaain-claude-code-log__dag_compact_after_rewind.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _assert_shared_prefixes(calls: list[Any], final: list[Any]) -> None:
    """Each call's messages are the same objects as the final history's prefix (no copies)."""
    for call in calls:
        assert all(a is b for a, b in zip(call.messages, final, strict=False))


# ---------------------------------------------------------------- Pi


def _pi_counts(lines: list[dict[str, Any]]) -> tuple[Counter[str], int]:
    roles = Counter(e["message"]["role"] for e in lines if e.get("type") == "message")
    tools = sum(1 for e in lines if e.get("type") == "message" and e["message"]["role"] == "assistant"
                for b in e["message"]["content"] if b.get("type") == "toolCall")
    return roles, tools


def test_pi_large_session_counts(sessions_dir: Path) -> None:
    path = sessions_dir / PI_LARGE
    roles, tools = _pi_counts(_lines(path))
    counts = (sum(roles.values()), roles["user"], roles["assistant"], roles["toolResult"], tools)
    assert counts == (914, 88, 453, 373, 391)

    s = load_session(path)
    assert (s.format, s.harness, s.system) == ("pi", model.PI, None)
    assert s.meta["version"] == 1
    assert s.meta["roles"] == dict(roles) and s.meta["tool_calls"] == tools
    assert len(s.calls) == roles["assistant"] and len(s.messages) == sum(roles.values())
    assert sum(1 for c in s.calls for b in c.response["content"] if b["type"] == "toolCall") == tools
    # No compaction: call k sees every message before the k-th assistant message.
    assistant_at = [i for i, m in enumerate(s.messages) if m["role"] == "assistant"]
    assert [len(c.messages) for c in s.calls] == assistant_at
    assert all(c.response is s.messages[i] for c, i in zip(s.calls, assistant_at, strict=True))
    _assert_shared_prefixes(s.calls, s.messages)
    # The first turn is the aborted gpt-5.1-codex call; the rest are Sonnet.
    assert s.calls[0].model == "gpt-5.1-codex" and s.calls[0].response["stopReason"] == "aborted"
    assert {c.model for c in s.calls[1:]} == {"claude-sonnet-4-5"}
    expected = sum(e["message"]["usage"]["cacheRead"] for e in _lines(path)
                   if e.get("type") == "message" and e["message"]["role"] == "assistant")
    assert sum(c.usage["cache_read_input_tokens"] for c in s.calls) == expected
    assert all(isinstance(c.timestamp_ms, int) for c in s.calls)


def test_pi_before_compaction_follows_compactions(sessions_dir: Path) -> None:
    path = sessions_dir / PI_COMPACTION
    lines = _lines(path)  # index 0 = header, so a v1 firstKeptEntryIndex is an index into this list
    roles, tools = _pi_counts(lines)
    assert (sum(roles.values()), roles["user"], roles["assistant"], roles["toolResult"], roles["bashExecution"],
            tools) == (990, 55, 484, 448, 3, 454)
    compactions = [i for i, e in enumerate(lines) if e["type"] == "compaction"]
    assert len(compactions) == 2
    thinking = sum(1 for e in lines if e.get("type") == "message" and e["message"]["role"] == "assistant"
                   for b in e["message"]["content"] if b.get("type") == "thinking")
    assert thinking == 49

    s = load_session(path)
    assert s.meta["compactions"] == 2 and s.meta["tool_calls"] == tools and s.meta["roles"] == dict(roles)
    assert len(s.calls) == roles["assistant"]

    def is_msg(e: dict[str, Any]) -> bool:
        return e["type"] == "message"

    # Final context: summary 2 + entries from its firstKeptEntryIndex up to it + everything after it.
    c2 = compactions[1]
    keep = lines[c2]["firstKeptEntryIndex"]
    expected = [e["message"] for e in lines[keep:c2] if is_msg(e)] + [e["message"] for e in lines[c2 + 1:] if is_msg(e)]
    assert s.messages[0] == {"role": "compactionSummary", "summary": lines[c2]["summary"],
                             "tokensBefore": lines[c2]["tokensBefore"], "timestamp": s.messages[0]["timestamp"]}
    assert s.messages[1:] == expected

    # Each call sees the context Pi built just before that assistant message.
    assistants = [i for i, e in enumerate(lines) if is_msg(e) and e["message"]["role"] == "assistant"]
    for call, at in zip(s.calls, assistants, strict=True):
        last = max((c for c in compactions if c < at), default=None)
        if last is None:
            want = [e["message"] for e in lines[1:at] if is_msg(e)]
            assert call.messages == want
        else:
            first = lines[last]["firstKeptEntryIndex"]
            want = [e["message"] for e in lines[first:last] + lines[last + 1:at] if is_msg(e)]
            assert call.messages[0]["role"] == "compactionSummary"
            assert call.messages[0]["summary"] == lines[last]["summary"]
            assert call.messages[1:] == want
        assert call.response == lines[at]["message"]
    summaries = {id(c.messages[0]) for c in s.calls if c.messages and c.messages[0]["role"] == "compactionSummary"}
    assert len(summaries) == 2  # one summary object per compaction, shared by its calls


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _pi_msg(id_: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": id_, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": message}


def _asst(text: str, *tool_ids: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": t, "name": "bash", "arguments": {"command": "ls"}} for t in tool_ids]
    return {"role": "assistant", "content": content, "model": "m1", "timestamp": 5,
            "usage": {"input": 10, "output": 2, "cacheRead": 100, "cacheWrite": 7}}


def test_pi_v3_tree_branch_compaction_and_extra_entries(tmp_path: Path) -> None:
    user = {"role": "user", "content": "hi", "timestamp": 1}
    rows = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"},
        _pi_msg("a1", None, user),
        _pi_msg("a2", "a1", _asst("look", "t1")),
        _pi_msg("a3", "a2", {"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
                             "content": [{"type": "text", "text": "f"}], "isError": False}),
        _pi_msg("a4", "a3", _asst("done")),
        _pi_msg("a5", "a4", {"role": "user", "content": "try A"}),
        _pi_msg("a6", "a5", _asst("A")),  # abandoned branch: no call on the current path
        {"type": "branch_summary", "id": "b1", "parentId": "a4", "fromId": "a6", "summary": "tried A",
         "timestamp": "2026-01-01T00:01:00.000Z"},
        _pi_msg("b2", "b1", {"role": "user", "content": "try B"}),
        {"type": "custom_message", "id": "b3", "parentId": "b2", "customType": "note", "content": "ctx",
         "display": True, "timestamp": "2026-01-01T00:01:01.000Z"},
        {"type": "custom", "id": "b4", "parentId": "b3", "customType": "state", "data": {"k": 1}},
        {"type": "label", "id": "b5", "parentId": "b4", "targetId": "b2", "label": "here"},
        _pi_msg("c1", "b5", _asst("B")),
        {"type": "compaction", "id": "b6", "parentId": "c1", "summary": "S", "firstKeptEntryId": "b1",
         "tokensBefore": 1234, "timestamp": "2026-01-01T00:02:00.000Z"},
        {"type": "model_change", "id": "b7", "parentId": "b6", "provider": "p", "modelId": "m2"},
        {"type": "thinking_level_change", "id": "b8", "parentId": "b7", "thinkingLevel": "high"},
        {"type": "session_info", "id": "b9", "parentId": "b8", "name": "demo"},
        _pi_msg("c2", "b9", _asst("after")),
        _pi_msg("c3", "c2", {"role": "user", "content": "more"}),
        _pi_msg("c4", "c3", _asst("end")),
    ]
    s = load_session(_write_jsonl(tmp_path / "tree.jsonl", rows))
    assert s.format == "pi" and s.meta["off_branch_entries"] == 2

    def roles(msgs: list[dict[str, Any]]) -> list[str]:
        return [m["role"] for m in msgs]

    assert [roles(c.messages) for c in s.calls] == [
        ["user"],
        ["user", "assistant", "toolResult"],
        ["user", "assistant", "toolResult", "assistant", "branchSummary", "user", "custom"],
        ["compactionSummary", "branchSummary", "user", "custom", "assistant"],
        ["compactionSummary", "branchSummary", "user", "custom", "assistant", "assistant", "user"],
    ]
    assert roles(s.messages) == [*roles(s.calls[-1].messages), "assistant"]
    branch, custom = s.calls[2].messages[4], s.calls[2].messages[6]
    assert branch == {"role": "branchSummary", "summary": "tried A", "fromId": "a6", "timestamp": branch["timestamp"]}
    assert custom["customType"] == "note" and custom["content"] == "ctx" and custom["display"] is True
    summary = s.messages[0]
    assert (summary["summary"], summary["tokensBefore"], summary["timestamp"]) == ("S", 1234, 1767225720000)
    assert s.calls[3].messages[1] is branch  # kept entries are the same objects
    assert s.calls[0].usage == {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 100,
                                "cache_creation_input_tokens": 7}


def test_pi_v2_hook_message_reads_as_custom(tmp_path: Path) -> None:
    rows = [
        {"type": "session", "version": 2, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"},
        _pi_msg("a1", None, {"role": "user", "content": "hi"}),
        _pi_msg("a2", "a1", {"role": "hookMessage", "customType": "h", "content": "x", "display": False}),
        _pi_msg("a3", "a2", _asst("ok")),
    ]
    s = load_session(_write_jsonl(tmp_path / "v2.jsonl", rows))
    assert [m["role"] for m in s.calls[0].messages] == ["user", "custom"]
    assert s.calls[0].messages[1]["customType"] == "h"


# ---------------------------------------------------------------- mini-swe-agent


@pytest.mark.parametrize(("name", "tool_calls", "lost"), [(MINI_DJANGO, 165, 1), (MINI_SQLFLUFF, 103, 0)])
def test_mini_swe_counts(sessions_dir: Path, name: str, tool_calls: int, lost: int) -> None:
    path = sessions_dir / name
    doc = json.loads(path.read_text())
    raw = doc["messages"]
    assistants = [m for m in raw if m["role"] == "assistant"]
    file_tool_calls = sum(len(m.get("tool_calls") or []) for m in assistants)
    format_errors = sum(1 for m in raw if (m.get("extra") or {}).get("interrupt_type") == "FormatError")
    assert (file_tool_calls, format_errors) == (tool_calls, lost)

    s = load_session(path)
    assert (s.format, s.harness) == ("mini-swe", model.OPENAI)
    assert s.system == raw[0]["content"] and s.messages[0]["role"] == "system"
    assert len(s.calls) == len(assistants) + format_errors == doc["info"]["model_stats"]["api_calls"]
    assert s.meta["lost_responses"] == lost and s.meta["exit"]["status"] == "Submitted"
    assert sum(len(c.response.get("tool_calls") or []) for c in s.calls if c.response) == tool_calls
    assert len(s.messages) == len(raw) - 1 and all(m["role"] != "exit" for m in s.messages)
    assert not any("extra" in m for c in s.calls for m in c.messages)
    kept = {k for m in s.messages for k in m}
    assert {"function_call", "provider_specific_fields", "tool_call_id"} <= kept  # unknown keys survive
    _assert_shared_prefixes(s.calls, s.messages)
    prompt = sum(m["extra"]["response"]["usage"]["prompt_tokens"] for m in assistants)
    assert sum(model.Usage(**c.usage).total_input for c in s.calls if c.usage) == prompt
    largest = max(m["extra"]["response"]["usage"]["prompt_tokens"] for m in assistants)
    assert max(model.Usage(**c.usage).total_input for c in s.calls if c.usage) == largest
    assert round(largest / 1000, 1) == {MINI_DJANGO: 71.8, MINI_SQLFLUFF: 50.5}[name]  # SOURCES.md
    if lost:
        gap = next(c for c in s.calls if c.response is None)
        assert gap.usage is None and gap.messages[-1]["role"] == "tool"


def test_mini_swe_keep_extra(sessions_dir: Path) -> None:
    s = load_mini_swe(sessions_dir / MINI_SQLFLUFF, strip_extra=False)
    assert "extra" in s.messages[2] and s.meta["extra_stripped"] is False


# ---------------------------------------------------------------- Claude Code


def _cc_expected(lines: list[dict[str, Any]], sidechain: bool) -> tuple[int, int, int]:
    """(responses, tool_use blocks, tool_result blocks) of one thread, counted straight from the lines."""
    convo = [e for e in lines if e.get("type") in ("user", "assistant") and bool(e.get("isSidechain")) == sidechain
             and not e.get("isMeta")]
    ids = {e["message"]["id"] for e in convo if e["type"] == "assistant"}
    blocks = [b for e in convo if isinstance(e["message"]["content"], list) for b in e["message"]["content"]]
    return len(ids), sum(b["type"] == "tool_use" for b in blocks), sum(b["type"] == "tool_result" for b in blocks)


def _check_anthropic_pairing(messages: list[dict[str, Any]]) -> None:
    for i, m in enumerate(messages):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant")
        if m["role"] == "assistant":
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if uses:
                answered = [b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"]
                assert sorted(uses) == sorted(answered)


@pytest.mark.parametrize(("name", "subagent", "counts"), [
    (CC_MAIN, False, (6, 7, 7)),
    (CC_SUBAGENT, True, (9, 16, 16)),
])
def test_claude_code_real_transcripts(sessions_dir: Path, name: str, subagent: bool,
                                      counts: tuple[int, int, int]) -> None:
    path = sessions_dir / name
    lines = _lines(path)
    assert _cc_expected(lines, subagent) == counts
    s = load_session(path)
    assert (s.format, s.harness, s.meta["subagent"]) == ("claude-code", model.ANTHROPIC, subagent)
    responses, uses, results = counts
    assert len(s.calls) == responses
    blocks = [b for m in s.messages if isinstance(m["content"], list) for b in m["content"]]
    assert (sum(b["type"] == "tool_use" for b in blocks), sum(b["type"] == "tool_result" for b in blocks)) == (
        uses, results)
    assert all(set(m) == {"role", "content"} for m in s.messages)
    _check_anthropic_pairing(s.messages)
    _assert_shared_prefixes(s.calls, s.messages)
    assert [len(c.messages) for c in s.calls] == [i for i, m in enumerate(s.messages) if m["role"] == "assistant"]
    assert s.meta["recovered_parallel_entries"] > 0  # both files have parallel calls off the parent chain
    for call in s.calls:
        assert call.response["content"] is s.messages[len(call.messages)]["content"]
        assert call.usage is not None and call.model and call.timestamp_ms
    if subagent:
        thinking = sum(b["type"] == "thinking" for b in blocks)
        assert thinking == 9
        # The final usage of a streamed response is the largest output count among its entries.
        assert s.calls[3].usage["output_tokens"] == 209


def test_claude_code_linear_file_without_parent_links(sessions_dir: Path) -> None:
    s = load_session(sessions_dir / CC_SIMONW)
    assert len(s.calls) == 3 and s.meta["summaries"] == ["Test session for JSONL parsing"]
    _check_anthropic_pairing(s.messages)
    # A tool result followed by the next prompt: one user message, results first.
    assert [b["type"] for b in s.messages[4]["content"]] == ["tool_result", "text"]


def test_claude_code_compaction_and_rewind(sessions_dir: Path) -> None:
    path = sessions_dir / CC_DAG
    s = load_session(path)
    texts = [[b["text"] for b in m["content"]] for m in s.messages]
    assert texts[0][0].startswith("This session is being continued")  # the summary, merged with the next prompt
    assert texts[0][1:] == ["After compaction"] and texts[1] == ["Final answer"]
    assert s.meta["compact_summary"] == [0] and s.meta["compact_boundaries"] == 1
    assert len(s.calls) == 1 and s.calls[0].meta == {"compact_summary": [0]}
    _check_anthropic_pairing(s.messages)

    full = load_claude_code(path, follow_logical_parent=True)
    assert len(full.calls) == 4
    first_texts = [[m["content"][0]["text"] for m in c.messages] for c in full.calls]
    assert first_texts[:3] == [["Start"], ["Start", "Ready", "Second attempt"],
                               ["Start", "Ready", "Second attempt", "Second answer", "Keep going"]]
    assert "First attempt" not in str(first_texts)  # the rewound branch is not on the chain
    assert full.calls[3].meta == {"compact_summary": [0]} and full.messages == s.messages


def _cc(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=extra.pop("mid", f"msg_{uuid}"), model="claude-x",
                       usage={"input_tokens": 1, "output_tokens": 2})
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s",
            "timestamp": "2026-01-01T00:00:00.000Z", "message": message, **extra}


def test_claude_code_skips_meta_sidechain_and_non_messages(tmp_path: Path) -> None:
    rows = [
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        _cc("u1", None, "user", "hello"),
        _cc("m1", "u1", "user", "<local-command-caveat>", isMeta=True),
        {"type": "progress", "uuid": "p1", "parentUuid": "m1", "data": {}},
        {"type": "system", "subtype": "local_command", "uuid": "s1", "parentUuid": "p1", "content": "x"},
        _cc("side", "u1", "user", "subagent prompt", isSidechain=True),
        _cc("a1", "s1", "assistant", [{"type": "text", "text": "hi"}]),
        {"type": "summary", "summary": "t", "leafUuid": "a1"},
        _cc("side2", "side", "assistant", [{"type": "text", "text": "sub"}], isSidechain=True),
    ]
    s = load_session(_write_jsonl(tmp_path / "cc.jsonl", rows))
    assert s.format == "claude-code" and not s.meta["subagent"]
    assert s.messages == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": [{"type": "text",
                                                                                                  "text": "hi"}]}]
    assert len(s.calls) == 1 and s.calls[0].messages == [{"role": "user", "content": "hello"}]


# ---------------------------------------------------------------- OpenCode export


def test_opencode_export_fixture() -> None:
    doc = json.loads(OPENCODE_FIXTURE.read_text())
    raw = doc["messages"]
    assistants = [i for i, m in enumerate(raw) if m["info"]["role"] == "assistant"]
    tools = sum(1 for m in raw for p in m["parts"] if p["type"] == "tool")
    assert (len(raw), len(assistants), tools) == (14, 10, 8)
    summary_at = next(i for i, m in enumerate(raw) if m["info"].get("summary"))
    request_at = next(i for i, m in enumerate(raw) if any(p["type"] == "compaction" for p in m["parts"]))

    s = load_session(OPENCODE_FIXTURE)
    assert (s.format, s.harness, s.meta["session_id"]) == ("opencode-export", model.OPENCODE, doc["info"]["id"])
    assert len(s.calls) == len(assistants)
    for call, at in zip(s.calls, assistants, strict=True):
        assert call.response == raw[at]
        tokens = raw[at]["info"]["tokens"]
        assert call.usage == {"input_tokens": tokens["input"], "output_tokens": tokens["output"] + tokens["reasoning"],
                              "cache_read_input_tokens": tokens["cache"]["read"],
                              "cache_creation_input_tokens": tokens["cache"]["write"]}
        assert call.model == "claude-sonnet-4-5" and call.timestamp_ms == raw[at]["info"]["time"]["created"]
        if at <= summary_at:  # before the summary is finished, the whole history is sent
            assert call.messages == raw[:at]
        else:  # afterwards the context restarts at the compaction request
            assert call.messages == raw[request_at:at]
    assert s.messages == raw[request_at:]
    reused = [p["callID"] for m in raw for p in m["parts"] if p["type"] == "tool" and p["callID"] == "call_0"]
    assert len(reused) == 4


def test_opencode_filter_compacted_keeps_tail() -> None:
    def m(id_: str, role: str, parts: list[dict[str, Any]] | None = None, **info: Any) -> dict[str, Any]:
        return {"info": {"id": id_, "role": role, **info}, "parts": parts or []}

    msgs = [m("1", "user"), m("2", "assistant", parentID="1"), m("3", "user"), m("4", "assistant", parentID="3"),
            m("5", "user", [{"type": "compaction", "auto": True, "tail_start_id": "3"}]),
            m("6", "assistant", parentID="5", summary=True, finish="stop"), m("7", "user")]
    assert [x["info"]["id"] for x in filter_compacted(msgs)] == ["5", "6", "3", "4", "7"]
    msgs[5]["info"]["error"] = {"name": "UnknownError", "data": {"message": "x"}}  # a failed summary does not count
    assert [x["info"]["id"] for x in filter_compacted(msgs)] == ["1", "2", "3", "4", "5", "6", "7"]


# ---------------------------------------------------------------- detection and errors


@pytest.mark.parametrize(("name", "fmt"), [
    (PI_LARGE, "pi"), (PI_COMPACTION, "pi"), (MINI_DJANGO, "mini-swe"), (MINI_SQLFLUFF, "mini-swe"),
    (CC_MAIN, "claude-code"), (CC_SUBAGENT, "claude-code"), (CC_SIMONW, "claude-code"), (CC_DAG, "claude-code"),
])
def test_detect_format(sessions_dir: Path, name: str, fmt: str) -> None:
    assert detect_format(sessions_dir / name) == fmt
    assert load_session(sessions_dir / name, format=fmt).format == fmt


def test_detect_opencode_and_aliases() -> None:
    assert detect_format(OPENCODE_FIXTURE) == "opencode-export"
    assert load_session(OPENCODE_FIXTURE, format="opencode").format == "opencode-export"
    assert set(FORMATS) == {"pi", "claude-code", "mini-swe", "opencode-export"}


def _raises(path: Path, where: str, fmt: str = "auto") -> str:
    with pytest.raises(BadInput) as info:
        load_session(path, format=fmt)
    assert where in str(info.value), str(info.value)
    return str(info.value)


def test_malformed_jsonl_names_file_and_line(tmp_path: Path) -> None:
    header = json.dumps({"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/"})
    ok = json.dumps({"type": "message", "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user",
                                                                                         "content": "x"}})
    pi = tmp_path / "bad-pi.jsonl"
    pi.write_text(f"{header}\n{ok}\n\n{{not json\n")
    _raises(pi, f"{pi}:4")
    pi.write_text(f"{header}\n[1, 2]\n")
    _raises(pi, f"{pi}:2")
    pi.write_text(f"{header}\n" + json.dumps({"type": "message", "timestamp": "x", "message": "hi"}) + "\n")
    _raises(pi, f"{pi}:2")
    v3 = tmp_path / "v3.jsonl"
    v3.write_text(json.dumps({"type": "session", "version": 3, "id": "s"}) + "\n" + ok + "\n")
    _raises(v3, f"{v3}:2", fmt="pi")
    cc = tmp_path / "bad-cc.jsonl"
    good = json.dumps(_cc("u1", None, "user", "hi"))
    cc.write_text(f"{good}\n{good[:-5]}\n")
    _raises(cc, f"{cc}:2")
    cc.write_text(f"{good}\n" + json.dumps({"type": "assistant", "uuid": "a", "parentUuid": "u1"}) + "\n")
    _raises(cc, f"{cc}:2")
    headless = tmp_path / "headless.jsonl"
    headless.write_text(ok + "\n")
    _raises(headless, f"{headless}:1", fmt="pi")


def test_malformed_json_and_unknown_shapes(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "messages": [\n    {"role": "user",, "content": "x"}\n  ]\n}\n')
    _raises(broken, f"{broken}:3:")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}))
    _raises(other, f"{other}: unrecognised session format")
    v2 = tmp_path / "opencode-v2.json"
    v2.write_text(json.dumps({"info": {"id": "ses_1"}, "messages": [{"type": "user", "text": "hi"}]}))
    _raises(v2, "2.x")
    mini = tmp_path / "mini.json"
    mini.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "messages": [{"content": "no role"}]}))
    _raises(mini, "messages[0]")
    _raises(tmp_path / "missing.jsonl", "missing.jsonl")
    with pytest.raises(BadInput, match="unknown session format"):
        load_session(OPENCODE_FIXTURE, format="nope")
