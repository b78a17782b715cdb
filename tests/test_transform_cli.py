"""`mc transform` through the real CLI: input shapes, flags, reports, failure contract, session modes."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from magic_context.store import db

NOW = 1_764_000_000_000


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def envelope(messages, **extra):
    return {"messages": messages, "session_id": "s1", "project_dir": "/tmp", "now": NOW, **extra}


ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Be brief.", "metadata": {"user_id": "u"},
    "messages": [
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "SIG"},
                                          {"type": "text", "text": "Reading."},
                                          {"type": "tool_use", "id": "tu1", "name": "read",
                                           "input": {"path": "a.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "x = 1"}]},
    ],
}
OPENAI_BODY = {
    "model": "gpt-4o", "temperature": 0,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    ],
}
OPENCODE_ARRAY = [
    {"info": {"id": "msg_a1", "sessionID": "ses_X", "role": "user", "time": {"created": NOW - 60_000}},
     "parts": [{"id": "prt_1", "sessionID": "ses_X", "messageID": "msg_a1", "type": "text", "text": "hello"}]},
    {"info": {"id": "msg_a2", "sessionID": "ses_X", "role": "assistant", "time": {"created": NOW - 59_000,
                                                                                  "completed": NOW - 58_000}},
     "parts": [{"id": "prt_2", "type": "step-start"},
               {"id": "prt_3", "type": "tool", "callID": "call_1", "tool": "read",
                "state": {"status": "completed", "input": {"filePath": "a.py"}, "output": "x = 1", "title": "a.py",
                          "metadata": {}, "time": {"start": 1, "end": 2}}},
               {"id": "prt_4", "type": "step-finish", "reason": "tool-calls"}]},
]
PI_ARRAY = [
    {"role": "user", "content": "hello", "timestamp": NOW - 60_000},
    {"role": "assistant", "content": [{"type": "text", "text": "Hi"}, {"type": "toolCall", "id": "tc1", "name": "read",
                                                                      "arguments": {"path": "a.py"}}],
     "api": "anthropic-messages", "provider": "anthropic", "model": "claude", "stopReason": "toolUse",
     "timestamp": NOW - 59_000},
    {"role": "toolResult", "toolCallId": "tc1", "toolName": "read", "content": [{"type": "text", "text": "x = 1"}],
     "isError": False, "timestamp": NOW - 58_000},
]


def run(mc, document, *args):
    result = mc("transform", *args, stdin=json.dumps(document))
    return result, (json.loads(result.stdout) if result.returncode == 0 and result.stdout else None)




def table_counts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                             "'%fts%' AND name NOT LIKE 'sqlite_%'")]
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        conn.close()


def test_anthropic_body_keeps_its_shape_and_unknown_fields(mc) -> None:
    result, out = run(mc, ANTHROPIC_BODY, "--project", "/tmp")
    assert result.returncode == 0, result.stderr
    assert set(out) == set(ANTHROPIC_BODY)
    assert out["metadata"] == {"user_id": "u"} and out["model"] == "claude-sonnet-4-5"
    assert out["system"].startswith("Be brief.\n\n## Magic Context") and "Today's date: 20" in out["system"]
    texts = dumps(out["messages"])
    assert "<session-history>" in texts and "§1§ fix the bug" in texts and "§3§ x = 1" in texts
    thinking = out["messages"][3]["content"][0]
    assert thinking == {"type": "thinking", "thinking": "hmm", "signature": "SIG"}


def test_openai_body_guidance_in_first_system_message(mc) -> None:
    result, out = run(mc, OPENAI_BODY, "--project", "/tmp")
    assert result.returncode == 0, result.stderr
    assert out["temperature"] == 0 and out["messages"][0]["role"] == "system"
    assert out["messages"][0]["content"].startswith("Be brief.\n\n## Magic Context")
    assert out["messages"][1]["content"].startswith("<session-history>")  # m[0] after the system message
    assert [m["role"] for m in out["messages"]].count("system") == 1
    assert out["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "§2§ a.py\nb.py"}


@pytest.mark.parametrize("array", [OPENCODE_ARRAY, PI_ARRAY], ids=["opencode", "pi"])
def test_bare_arrays(mc, array) -> None:
    result, out = run(mc, array, "--project", "/tmp")
    assert result.returncode == 0, result.stderr
    assert isinstance(out, list) and len(out) == len(array) + 2
    served = dumps(out[2:])  # after the two head messages: the input, each part tagged in order
    expected = ["§1§ hello", "§2§ x = 1"] if array is OPENCODE_ARRAY else ["§1§ hello", "§2§ Hi", "§3§ x = 1"]
    assert re.findall(r"§\d+§ [^\"]*", served) == expected
    assert json.loads(re.sub(r"§\d+§ ", "", served)) == array  # nothing else changed


def test_envelope_and_report_line(mc, isolated_dirs) -> None:
    doc = envelope(PI_ARRAY, harness="pi", extra_field={"keep": True})
    result, out = run(mc, doc, "--report")
    assert result.returncode == 0
    assert out["extra_field"] == {"keep": True} and out["session_id"] == "s1"
    report = json.loads(result.stderr.decode().strip().splitlines()[-1])
    for key in ("pass", "bust", "reason", "tokens_before", "tokens_after", "tags", "dropped", "pending_drops",
                "historian", "ms", "warnings"):
        assert key in report
    assert report["pass"] == "fold" and report["bust"] is True
    again, out_again = run(mc, doc, "--report")
    assert json.loads(again.stderr.decode().strip().splitlines()[-1])["pass"] == "defer"
    assert out_again == out  # the same input twice gives the same bytes
    assert again.stdout == result.stdout


def test_dry_run_persists_nothing(mc, isolated_dirs) -> None:
    db.open_db().close()
    path = isolated_dirs["data"] / "context.db"
    before = table_counts(path)
    result, out = run(mc, envelope(PI_ARRAY, harness="pi"), "--dry-run")
    assert result.returncode == 0 and out is not None
    assert table_counts(path) == before


def test_now_overrides_the_clock(mc) -> None:
    later = NOW + 86_400_000 * 40
    for now, day in ((NOW, "2025-11-24"), (later, "2026-01-03")):
        doc = envelope(ANTHROPIC_BODY["messages"], harness="anthropic", system="S", now=now, session_id=f"s{now}")
        result, out = run(mc, doc)
        assert result.returncode == 0, result.stderr
        dates = [line for line in out["system"].splitlines() if line.startswith("Today's date:")]
        assert dates == [f"Today's date: {day}"], dates


MALFORMED = {
    "empty": b"",
    "whitespace": b"   \n",
    "truncated": b'{"messages": [{"role": "user", "content": "hi"',
    "not json": b"hello world",
    "number": b"42",
    "string": b'"text"',
    "messages not a list": b'{"messages": {"role": "user"}}',
    "no messages": b'{"model": "x"}',
    "unknown shape": b'[{"foo": 1}]',
    "bad role": b'{"messages": [{"role": "wizard", "content": "hi"}], "harness": "openai"}',
    "bad harness": b'{"messages": [], "harness": "cursor"}',
    "invalid utf-8": b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
    "deep nesting": b'{"messages": [{"role": "user", "content": ' + b"[" * 5000 + b"]" * 5000 + b"}]}",
    "bad usage": b'{"messages": [{"role": "user", "content": "hi"}], "usage": {"input_tokens": -1}}',
    "bad now": b'{"messages": [{"role": "user", "content": "hi"}], "now": "yesterday"}',
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_input_exits_2_and_writes_nothing(mc, isolated_dirs, name) -> None:
    db.open_db().close()
    path = isolated_dirs["data"] / "context.db"
    run(mc, envelope(PI_ARRAY, harness="pi"))
    before = table_counts(path)
    result = mc("transform", stdin=MALFORMED[name])
    assert result.returncode == 2, (name, result.stderr)
    assert result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mc: error:"), lines
    assert table_counts(path) == before


def test_bad_flags_exit_2(mc) -> None:
    for args in (("--context-limit", "lots"), ("--harness", "cursor"), ("--frobnicate",), ("--session",)):
        result = mc("transform", *args, stdin=json.dumps(PI_ARRAY))
        assert result.returncode == 2 and result.stdout == b"", args


def test_large_valid_message_is_served(mc) -> None:
    big = "line of tool output\n" * 2_600_000  # ~50 MB
    doc = envelope([{"role": "user", "content": "dump it"}, {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": big}], harness="openai")
    result = mc("transform", stdin=json.dumps(doc), timeout=300)
    assert result.returncode == 0, result.stderr[-500:]
    # Far over the window: served as a bounded preview carrying its tag (issue #14 item 2), not whole.
    last = json.loads(result.stdout)["messages"][-1]["content"]
    assert last.startswith("[preview §") and len(result.stdout) < 100_000


def test_busy_database_serves_last_known_good(mc, isolated_dirs) -> None:
    doc = envelope(PI_ARRAY, harness="pi")
    first, served = run(mc, doc)
    assert first.returncode == 0
    grown = envelope([*PI_ARRAY, {"role": "user", "content": "next question", "timestamp": NOW}], harness="pi")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None);"
         "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(30)",
         str(isolated_dirs["data"] / "context.db")],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        result, out = run(mc, grown)
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started >= 4.5  # waited for the busy timeout first
        assert "last known good" in result.stderr.decode()
        assert out["messages"][: len(served["messages"])] == served["messages"]  # the previous output...
        assert out["messages"][-1] == grown["messages"][-1]  # ...plus the new raw tail, untouched
    finally:
        holder.kill()
        holder.wait()


def test_storage_unavailable_exits_3(mc, isolated_dirs) -> None:
    isolated_dirs["data"].parent.mkdir(parents=True, exist_ok=True)
    isolated_dirs["data"].write_text("not a directory")
    result = mc("transform", stdin=json.dumps(envelope(PI_ARRAY, harness="pi")))
    assert result.returncode == 3 and result.stdout == b""


def test_schema_too_new_exits_3(mc, isolated_dirs) -> None:
    db.open_db().close()
    conn = sqlite3.connect(isolated_dirs["data"] / "context.db")
    conn.execute("PRAGMA user_version=99")
    conn.close()
    result = mc("transform", stdin=json.dumps(envelope(PI_ARRAY, harness="pi")))
    assert result.returncode == 3 and b"99" in result.stderr


def test_context_emergency_exits_4(mc) -> None:
    doc = envelope([{"role": "user", "content": "hi " * 50}, {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "again"}], harness="openai",
                   model={"provider": "openai", "id": "gpt-4o", "context_limit": 2000},
                   usage={"input_tokens": 1990, "output_tokens": 5})
    result = mc("transform", stdin=json.dumps(doc))
    assert result.returncode == 4 and result.stdout == b""
    assert "a larger window" in result.stderr.decode()  # what fills it is not history (test_exit4_advice)


def test_reduce_queues_and_the_next_bust_applies(mc) -> None:
    messages = [{"role": "user", "content": f"question {i}"} if i % 2 == 0 else
                {"role": "assistant", "content": f"answer {i} " + "words " * 30} for i in range(50)]
    doc = envelope(messages, harness="openai")
    first, _ = run(mc, doc)
    assert first.returncode == 0
    bad = mc("reduce", "--session", "s1", "999")
    assert bad.returncode == 2 and b"unknown tags 999" in bad.stderr
    protected = mc("reduce", "--session", "s1", "45")
    assert protected.returncode == 2 and b"protected" in protected.stderr
    ok = mc("reduce", "--session", "s1", "2-4", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["data"]["queued"] == [2, 3, 4]
    _defer, out = run(mc, doc, "--report")
    assert "[dropped §2§]" not in dumps(out)  # a defer pass never applies a drop
    busting = dict(doc, now=NOW + 3_600_000)  # cache TTL expired: this pass busts anyway
    _bust, out = run(mc, busting, "--report")
    text = dumps(out)
    assert "[dropped §2§]" in text and "[truncated §3§]" in text and "[dropped §4§]" in text
    again = mc("reduce", "--session", "s1", "2")
    assert again.returncode == 2 and b"already dropped" in again.stderr


def test_ctx_reduce_unavailable_means_no_tags(mc) -> None:
    doc = envelope(PI_ARRAY, harness="pi", tools=[{"name": "read"}, {"name": "bash"}], system="Base.")
    _, out = run(mc, doc)
    assert "§" not in dumps(out["messages"])
    assert "ctx_reduce tool" not in out["system"]
    doc = envelope(PI_ARRAY, harness="pi", tools=[{"name": "mcp__magic-context__ctx_reduce"}], session_id="s2")
    _result, out = run(mc, doc)
    assert "§1§" in dumps(out["messages"])


def test_subagent_gets_tags_but_no_head(mc) -> None:
    _result, out = run(mc, envelope(PI_ARRAY, harness="pi", agent="subagent"))
    text = dumps(out["messages"])
    assert "§1§" in text and "<session-history>" not in text


def test_compaction_off_keeps_knowledge_only(mc, isolated_dirs) -> None:
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[compaction]\nenabled = false\n")
    _result, out = run(mc, envelope(PI_ARRAY, harness="pi"))
    text = dumps(out["messages"])
    assert "§" not in text and "<session-history>" not in text


def test_a_compaction_flip_mid_session_folds_once_says_why_and_never_shows_history_twice(mc, isolated_dirs) -> None:
    # Turned off after history was folded: the next pass re-renders the head without the <session-history>
    # and serves the array whole (the stored head replayed over the whole array showed the history twice).
    done = {"role": "assistant", "content": [{"type": "text", "text": "Done"}], "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude", "stopReason": "stop", "timestamp": NOW - 57_000}
    messages = [*PI_ARRAY, done, {"role": "user", "content": "thanks", "timestamp": NOW - 56_000}]

    def served(seconds: int, model: str = "claude-opus-5") -> tuple[dict, dict]:
        result, out = run(mc, envelope(messages, harness="pi", now=NOW + seconds * 1000,
                                       model={"provider": "anthropic", "id": model}), "--report")
        assert result.returncode == 0, result.stderr
        return out, json.loads(result.stderr.decode().strip().splitlines()[-1])

    served(0, "claude-sonnet-4-5")
    assert mc("wrapup", "--session", "s1", "--keep", "2").returncode == 0
    folded, report = served(1)
    assert report["reason"] == "model changed"
    assert dumps(folded["messages"]).count("hello") == 1 and "<session-history>" in dumps(folded["messages"][0])
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[compaction]\nenabled = false\n")
    off, report = served(2)
    assert (report["pass"], report["reason"]) == ("fold", "config changed (compaction.enabled = false)")
    assert "<session-history>\n" not in dumps(off["messages"]) and dumps(off["messages"]).count("hello") == 1
    again, report = served(3)
    assert (report["pass"], again["messages"]) == ("defer", off["messages"])
    status = json.loads(mc("status", "--session", "s1", "--json").stdout)["data"]
    assert [p["reason"] for p in status["passes"][-2:]] == ["config changed (compaction.enabled = false)",
                                                            "defer: within threshold, cache warm"]
    (config / "config.toml").write_text("[memory]\nenabled = false\n")  # both at once: both named, in full
    on, report = served(4)
    reason = "config changed (compaction.enabled = true, memory.enabled = false)"
    assert report["reason"] == reason and on["messages"][2:] == folded["messages"][2:]
    human = mc("status", "--session", "s1", env={"COLUMNS": "160"})
    assert human.returncode == 0 and reason in human.stdout.decode()


def test_status_after_passes(mc) -> None:
    run(mc, envelope(PI_ARRAY, harness="pi"))
    result = mc("status", "--json")
    data = json.loads(result.stdout)["data"]
    assert data["session"]["session_id"] == "s1" and data["tags"]["active"] == 3
    assert data["passes"][-1]["pass"] == "fold" and "database" in data["paths"]
    human = mc("status", "--latest")
    assert human.returncode == 0 and b"tags" in human.stdout


def test_project_docs_in_m0_unless_disabled(mc, tmp_path, isolated_dirs) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "ARCHITECTURE.md").write_text("The spine holds.")
    _, out = run(mc, envelope(PI_ARRAY, harness="pi", project_dir=str(project)))
    assert '<file name="ARCHITECTURE.md">\nThe spine holds.\n</file>' in out["messages"][0]["content"][0]["text"]
    config = isolated_dirs["config"]
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[dreamer]\ninject_docs = false\n")
    _, out = run(mc, envelope(PI_ARRAY, harness="pi", project_dir=str(project), session_id="s-nodocs"))
    assert "ARCHITECTURE.md" not in dumps(out["messages"])


def test_rewritten_tool_result_keeps_its_tag(mc) -> None:
    # Pi messages carry no ids: a harness editing a tool output (pruning it) gives that message a new
    # derived id, but the tool tag is keyed by the call, so its number must survive the rewrite.
    first = [dict(m) for m in PI_ARRAY]
    _, out = run(mc, envelope(first, harness="pi", session_id="rewrite"))
    assert "§3§ x = 1" in dumps(out)
    pruned = [*first[:2], {**first[2], "content": [{"type": "text", "text": "[output pruned]"}]},
              {"role": "user", "content": "and now?", "timestamp": NOW - 1_000}]
    _, out = run(mc, envelope(pruned, harness="pi", session_id="rewrite", now=NOW + 3_600_000))
    text = dumps(out)
    assert "§3§ [output pruned]" in text and "§4§ and now?" in text


def test_other_agents_pass_through_but_malformed_input_still_fails(mc) -> None:
    # A harness's own agents (title, compaction) are served unchanged, without state; bad input is still exit 2.
    result, out = run(mc, envelope(PI_ARRAY, harness="pi", agent="title"))
    assert result.returncode == 0 and out["messages"] == PI_ARRAY
    bad = [*PI_ARRAY, {"role": "assistant", "content": "not an array"}]
    result, out = run(mc, envelope(bad, harness="pi", agent="title"))
    assert result.returncode == 2 and out is None and b"content" in result.stderr


RESPONSES_ITEMS = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA=="},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
     "arguments": "{\"cmd\": \"ls\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
]
RESPONSES_BODY = {"model": "gpt-5-codex", "instructions": "Be brief.", "input": RESPONSES_ITEMS[1:],
                  "store": False, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-1"}


def test_responses_body_instructions_get_the_guidance(mc) -> None:
    result, out = run(mc, RESPONSES_BODY, "--project", "/tmp")
    assert result.returncode == 0, result.stderr
    assert set(out) == set(RESPONSES_BODY) and out["include"] == ["reasoning.encrypted_content"]
    assert out["instructions"].startswith("Be brief.\n\n## Magic Context") and "Today's date: 20" in out["instructions"]
    items = out["input"]
    assert items[0]["content"][0]["text"].startswith("<session-history>")  # m[0] at the head
    assert items[2]["content"][0]["text"] == "§1§ list files"
    assert items[3:5] == RESPONSES_ITEMS[2:4]  # reasoning and its call, ids and all
    assert items[5] == {"type": "function_call_output", "call_id": "call_1", "output": "§2§ a.py\nb.py"}


@pytest.mark.parametrize("key", ["input", "messages"])
def test_responses_envelopes(mc, key) -> None:
    doc = {key: RESPONSES_ITEMS, "harness": "openai-responses", "session_id": "r1", "project_dir": "/tmp", "now": NOW}
    result, out = run(mc, doc)
    assert result.returncode == 0, result.stderr
    assert set(out) == set(doc)
    items = out[key]
    assert items[0]["content"][0]["text"].startswith("You are Codex.\n\n## Magic Context")  # no instructions
    assert items[1]["content"][0]["text"].startswith("<session-history>")
    assert items[-1]["output"] == "§2§ a.py\nb.py"


def test_responses_harness_flag_and_string_input(mc) -> None:
    flagged, out = run(mc, {"messages": RESPONSES_ITEMS, "session_id": "r2", "now": NOW},
                       "--harness", "openai-responses")
    assert flagged.returncode == 0, flagged.stderr
    assert out["messages"][-1]["output"] == "§2§ a.py\nb.py"
    plain, out = run(mc, {"model": "gpt-5", "input": "hello"}, "--project", "/tmp")
    assert plain.returncode == 0, plain.stderr
    assert out["input"][-1] == {"role": "user", "content": "§1§ hello"}
    assert "<session-history>" in out["input"][0]["content"][0]["text"]


@pytest.mark.parametrize(("doc", "where"), [
    ({"model": "gpt-5", "instructions": ["x"], "input": []}, "instructions must be a string"),
    ({"model": "gpt-5", "input": [{"type": "function_call", "name": "x"}]}, "openai-responses input[0].call_id"),
    ({"model": "gpt-5", "input": 5}, "must carry a `messages` array"),
])
def test_responses_bad_input_exits_2(mc, doc, where) -> None:
    result, _ = run(mc, doc)
    assert result.returncode == 2 and result.stdout == b""
    assert where in result.stderr.decode()


def test_dropped_outputs_keep_the_calls_of_reasoning_replies(mc) -> None:
    """Responses ties a reply's calls to its reasoning: a drop blanks such a call's output and keeps the call,
    where a reply without reasoning loses the whole arc."""
    from magic_context.wire import arcs, responses

    items = [RESPONSES_ITEMS[0]]
    for i in range(30):
        reasoning = [{"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": f"enc{i}"}]
        items += [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {i}"}]},
                  *(reasoning if i % 2 == 0 else []),
                  {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "exec_command",
                   "arguments": "{\"cmd\": \"cat\"}"},
                  {"type": "function_call_output", "call_id": f"call_{i}", "output": f"output {i} " + "x " * 40}]
    doc = {"input": items, "harness": "openai-responses", "session_id": "r3", "project_dir": "/tmp", "now": NOW}
    result, out = run(mc, doc)  # the first pass busts anyway: old tool outputs go by age
    assert result.returncode == 0, result.stderr
    served = out["input"]
    calls = {x["call_id"]: i for i, x in enumerate(served) if x.get("type") == "function_call"}
    outputs = {x["call_id"]: x["output"] for x in served if x.get("type") == "function_call_output"}
    assert "[dropped §2§]" == outputs["call_0"]
    for i in range(0, 30, 2):  # every reasoning reply is served whole, right behind its reasoning
        assert served[calls[f"call_{i}"] - 1] == {"type": "reasoning", "id": f"rs_{i}", "summary": [],
                                                  "encrypted_content": f"enc{i}"}
    removed = [i for i in range(1, 30, 2) if f"call_{i}" not in calls]
    assert removed and all(f"call_{i}" not in outputs for i in removed)
    assert arcs.validate_pairing(responses.decode(served), "openai-responses") == []


@pytest.mark.parametrize(("doc", "limit", "expected"), [
    (envelope(PI_ARRAY, harness="pi"), "200000", 40.0),
    (envelope(OPENCODE_ARRAY, harness="opencode"), "200000", 40.0),
    (ANTHROPIC_BODY, "200000", 40.0),
    (OPENAI_BODY, "128000", 40.0),
    (envelope(PI_ARRAY, harness="pi"), "10000", 65.0),  # a small window: mostly fixed parts
    # Chat Completions callers are mostly autonomous scaffolds (scheduler.autonomous): the request may reach
    # 6 500 tokens before a bust, whatever the window
    (OPENAI_BODY, "13000", 50.0),
])
def test_execute_threshold_default_depends_on_the_workload(mc, isolated_dirs, doc, limit, expected) -> None:
    result, _out = run(mc, doc, "--report", "--context-limit", limit)
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"] == expected


def test_a_small_window_gets_a_raised_default_on_every_harness(mc, isolated_dirs) -> None:
    """A request may reach 10 000 tokens before the default threshold busts (at most 65%): under that, 40% of
    the window is mostly fixed parts, so mc would bust on most passes (scheduler.INTERACTIVE_MIN_TRIGGER_TOKENS);
    a configured threshold still applies as set."""
    for limit, expected in (("14400", 65.0), ("20000", 50.0), ("25000", 40.0)):
        result, _out = run(mc, envelope(PI_ARRAY, harness="pi"), "--report", "--context-limit", limit)
        assert result.returncode == 0, result.stderr.decode()
        assert json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"] == expected
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 40\n", encoding="utf-8")
    result, _out = run(mc, envelope(PI_ARRAY, harness="pi"), "--report", "--context-limit", "20000")
    assert json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"] == 40.0


def test_a_project_file_cannot_lower_the_harness_default_threshold(mc, isolated_dirs, tmp_path) -> None:
    """The project tier is raise-only for the threshold: 45 raises Pi's default (40) but may not lower the 50
    an OpenAI Chat caller gets in a 13 000-token window when the user's config sets none (it compared against
    40 before)."""
    project = tmp_path / "untrusted-project"
    project.mkdir()
    (project / ".magic-context.toml").write_text("execute_threshold_percentage = 45\n", encoding="utf-8")
    for doc, limit, expected in ((OPENAI_BODY, "13000", 50.0),
                                 (envelope(PI_ARRAY, harness="pi", project_dir=str(project)), "200000", 45.0)):
        result, _out = run(mc, doc, "--report", "--project", str(project), "--context-limit", limit)
        assert result.returncode == 0, result.stderr.decode()
        assert json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"] == expected


def test_a_user_map_naming_other_models_keeps_the_harness_default_for_the_rest(mc, isolated_dirs,
                                                                                 tmp_path) -> None:
    """A user map without "default" sets only the models it names: an OpenAI Chat caller on another model
    keeps its 50 in a 13 000-token window (the map's absence of a default gave 40 before), and a project file
    may raise that, never lower it, while the model the user named keeps the user's value."""
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text(
        '[execute_threshold_percentage]\n"gpt-4o-mini" = 30\n', encoding="utf-8")
    project = tmp_path / "untrusted-project"
    project.mkdir()

    def threshold(doc: dict, project_text: str | None = None) -> float:
        if project_text is not None:
            (project / ".magic-context.toml").write_text(project_text, encoding="utf-8")
        result, _out = run(mc, doc, "--report", "--project", str(project), "--context-limit", "13000")
        assert result.returncode == 0, result.stderr.decode()
        return json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"]

    assert threshold(OPENAI_BODY) == 50.0
    assert threshold(OPENAI_BODY, "execute_threshold_percentage = 45\n") == 50.0
    assert threshold(OPENAI_BODY, "execute_threshold_percentage = 70\n") == 70.0
    assert threshold({**OPENAI_BODY, "model": "gpt-4o-mini"}, "") == 30.0
    assert threshold(envelope(PI_ARRAY, harness="pi", project_dir=str(project)), "") == 65.0  # a small window


def _openai_arcs(count: int) -> dict:
    messages: list[dict] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "fix the bug"}]
    for i in range(count):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{i}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} " + "word " * 300})
    return {"model": "gpt-4o", "messages": messages}


def _kept_outputs(out: dict) -> list[int]:
    return [int(m["tool_call_id"][1:]) for m in out["messages"]
            if m.get("role") == "tool" and "word word" in str(m["content"])]


def test_protected_tags_default_depends_on_the_workload(mc, isolated_dirs) -> None:
    """An OpenAI Chat caller (an autonomous scaffold: one tag per step) spares the newest 5 tags when the
    config sets none, so a reclaim at 80% of the window may drop outputs among the newest 20; with
    `protected_tags = 20` configured none of those goes."""
    body = _openai_arcs(30)
    result, out = run(mc, body, "--context-limit", "12000", "--report")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stderr.decode().strip().splitlines()[-1])["pass"] != "defer"
    kept = _kept_outputs(out)
    assert set(range(25, 30)) <= set(kept) and not set(range(10, 25)) <= set(kept), kept
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("protected_tags = 20\n", encoding="utf-8")
    body["messages"][1]["content"] = "fix the other bug"  # a new session for the same tool history
    result, out = run(mc, body, "--context-limit", "12000")
    assert result.returncode == 0, result.stderr.decode()
    assert set(range(11, 30)) <= set(_kept_outputs(out))


def test_a_configured_execute_threshold_applies_to_every_harness(mc, isolated_dirs) -> None:
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 55\n", encoding="utf-8")
    for doc in (OPENAI_BODY, envelope(PI_ARRAY, harness="pi")):
        result, _out = run(mc, doc, "--report")
        assert json.loads(result.stderr.decode().strip().splitlines()[-1])["threshold_percent"] == 55
