"""Format detection on small hand-made samples of each harness format and on the real recorded sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from captured_requests import METADATA_HOOKS, REQUESTS, TRUE_FORMAT

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.detect import detect_harness

OPENCODE = [
    {"info": {"id": "msg_aa05f0223001gyiDLm66AVtTbS", "sessionID": "ses_55fa0fe18ffeEw7d7T3j1Yrw3r", "role": "user",
              "time": {"created": 1763681581544}, "agent": "build",
              "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}},
     "parts": [{"id": "prt_aa05f087a001f5VGIIXsOEv5xS", "sessionID": "ses_55fa0fe18ffeEw7d7T3j1Yrw3r",
                "messageID": "msg_aa05f0223001gyiDLm66AVtTbS", "type": "text", "text": "fix it"}]},
    {"info": {"id": "msg_aa05f0223002", "sessionID": "ses_55fa0fe18ffeEw7d7T3j1Yrw3r", "role": "assistant",
              "time": {"created": 1763681581600}, "parentID": "msg_aa05f0223001gyiDLm66AVtTbS",
              "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "cost": 0,
              "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}},
     "parts": [{"id": "prt_1", "type": "step-start"},
               {"id": "prt_2", "type": "tool", "callID": "toolu_1", "tool": "read",
                "state": {"status": "completed", "input": {"filePath": "a.py"}, "output": "x", "title": "a.py",
                          "metadata": {}, "time": {"start": 1, "end": 2}}},
               {"id": "prt_3", "type": "step-finish", "reason": "tool-calls"}]},
]

PI = [
    {"role": "user", "content": [{"type": "text", "text": "read a.py"}], "timestamp": 1763681630791},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "reading", "thinkingSignature": "sig"},
        {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "a.py"}}],
     "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
     "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
     "stopReason": "toolUse", "timestamp": 1763681631000},
    {"role": "toolResult", "toolCallId": "toolu_1", "toolName": "read", "content": [{"type": "text", "text": "x"}],
     "isError": False, "timestamp": 1763681632000},
]

ANTHROPIC = [
    {"role": "user", "content": "read a.py"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": "a"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]},
]

OPENAI = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "read a.py"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"p\": \"a\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "x"},
]

PLAIN = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize(("doc", "harness"), [
    (OPENCODE, m.OPENCODE),
    (PI, m.PI),
    (ANTHROPIC, m.ANTHROPIC),
    (OPENAI, m.OPENAI),
    ({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": ANTHROPIC}, m.ANTHROPIC),
    ({"model": "gpt-5", "messages": OPENAI, "tools": []}, m.OPENAI),
    ({"messages": PI, "session_id": "s"}, m.PI),
])
def test_each_format(doc: object, harness: str) -> None:
    assert detect_harness(doc) == harness


@pytest.mark.parametrize(("doc", "harness"), [
    ([{"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0}], m.PI),
    ([{"role": "compactionSummary", "summary": "s", "tokensBefore": 1}], m.PI),
    ([{"role": "assistant", "content": [{"type": "toolCall", "id": "t", "name": "n", "arguments": {}}]}], m.PI),
    ([{"role": "assistant", "content": [{"type": "thinking", "thinking": "no signature"}]}], m.PI),
    ([{"role": "user", "content": [{"type": "image", "data": "AA", "mimeType": "image/png"}]}], m.PI),
    ([{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]}], m.ANTHROPIC),
    ([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}], m.ANTHROPIC),
    ([{"role": "developer", "content": "x"}], m.OPENAI),
    ([{"role": "assistant", "content": "x", "reasoning_content": "r"}], m.OPENAI),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}], m.OPENAI),
    ([*PLAIN, {"role": "tool", "tool_call_id": "c", "content": "x"}], m.OPENAI),  # a later mark decides
])
def test_single_marks(doc: list, harness: str) -> None:
    assert detect_harness(doc) == harness


def test_plain_conversation_uses_body_hints() -> None:
    assert detect_harness(PLAIN) == m.OPENAI
    assert detect_harness({"messages": PLAIN, "model": "gpt-5"}) == m.OPENAI
    assert detect_harness({"messages": PLAIN, "system": "be brief"}) == m.ANTHROPIC
    assert detect_harness({"messages": PLAIN, "max_tokens": 100}) == m.ANTHROPIC
    assert detect_harness({"messages": [], "system": [{"type": "text", "text": "x"}]}) == m.ANTHROPIC
    assert detect_harness([]) == m.OPENAI


def test_envelope_harness_wins() -> None:
    assert detect_harness({"harness": "pi", "messages": PLAIN}) == m.PI
    with pytest.raises(BadInput, match="unknown harness"):
        detect_harness({"harness": "codex", "messages": PLAIN})


@pytest.mark.parametrize(("doc", "where"), [
    (5, "expected an array"),
    ("[]", "expected an array"),
    ({"model": "x"}, "no `messages` array"),
    ({"messages": {"role": "user"}}, "no `messages` array"),
    ([{"content": "no role"}], "messages[0] has no role"),
    ([*PLAIN, "text"], "messages[2] is not an object"),
    ([*PLAIN, {"role": "exit", "content": "diff"}], "messages[2] has role 'exit'"),
])
def test_unknown_shapes(doc: object, where: str) -> None:
    with pytest.raises(BadInput) as err:
        detect_harness(doc)
    line = err.value.one_line()
    assert line.startswith("unknown message shape") and where in line


def test_real_sessions(sessions_dir: Path) -> None:
    for name in ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json",
                 "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"):
        messages = json.loads((sessions_dir / name).read_text())["messages"]
        assert detect_harness(messages) == m.OPENAI  # the trailing `exit` record does not matter
    for name in ("pi_large-session.jsonl", "pi_before-compaction.jsonl"):
        entries = [json.loads(line) for line in (sessions_dir / name).read_text().splitlines()]
        messages = [e["message"] for e in entries if e.get("type") == "message"]
        assert detect_harness(messages) == m.PI
    transcript = (sessions_dir / "claude-code" / "bookminder-subagent-a12564cd.jsonl").read_text().splitlines()
    messages = [e["message"] for e in map(json.loads, transcript) if e.get("type") in ("user", "assistant")]
    assert detect_harness({"model": "claude-haiku-4-5", "max_tokens": 8192, "messages": messages}) == m.ANTHROPIC


def test_every_captured_file_is_classified_here() -> None:
    on_disk = {p.name for p in REQUESTS.glob("*.json")}
    assert on_disk == set(TRUE_FORMAT) | set(METADATA_HOOKS)


@pytest.mark.parametrize("name", sorted(TRUE_FORMAT))
def test_captured_bodies_are_detected_as_their_true_format(name: str) -> None:
    assert detect_harness(json.loads((REQUESTS / name).read_text())) == TRUE_FORMAT[name]


@pytest.mark.parametrize("name", METADATA_HOOKS)
def test_metadata_hook_inputs_are_no_message_shape(name: str) -> None:
    with pytest.raises(BadInput, match="unknown message shape"):
        detect_harness(json.loads((REQUESTS / name).read_text()))


CLAUDE_CODE_LIKE = [
    {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                 {"type": "text", "text": "run echo"}]},
    {"role": "system", "content": [{"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}}]},
]


@pytest.mark.parametrize(("doc", "harness"), [
    # A system-role message with an Anthropic-only top-level key is Anthropic (Claude Code)...
    ({"model": "claude-opus-5-5", "system": [{"type": "text", "text": "x"}], "max_tokens": 64000,
      "messages": CLAUDE_CODE_LIKE}, m.ANTHROPIC),
    ({"model": "c", "max_tokens": 8, "context_management": {"edits": []}, "messages": CLAUDE_CODE_LIKE}, m.ANTHROPIC),
    ({"model": "c", "output_config": {"effort": "high"}, "messages": CLAUDE_CODE_LIKE}, m.ANTHROPIC),
    # ... also when the system message comes first; a later Anthropic block decides on its own.
    ({"model": "c", "system": "s", "messages": [CLAUDE_CODE_LIKE[1], CLAUDE_CODE_LIKE[0]]}, m.ANTHROPIC),
    ([CLAUDE_CODE_LIKE[1], *ANTHROPIC], m.ANTHROPIC),
    # OpenAI Chat bodies with max_tokens (OpenCode's openai-compatible requests) stay OpenAI.
    ({"model": "gpt", "max_tokens": 32000, "messages": [{"role": "system", "content": "s"}, *PLAIN]}, m.OPENAI),
    ({"model": "gpt", "max_tokens": 32000, "messages": OPENAI}, m.OPENAI),
    ({"model": "gpt", "system": "s", "messages": OPENAI}, m.OPENAI),  # a strong mark beats body keys
    ([{"role": "system", "content": "s"}, *PLAIN, {"role": "exit", "content": ""}], m.OPENAI),
])
def test_system_role_messages(doc: object, harness: str) -> None:
    assert detect_harness(doc) == harness


@pytest.mark.parametrize(("doc", "harness"), [
    ({"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": "hi"}]}, m.OPENAI_RESPONSES),
    ({"model": "gpt-5", "input": "hi", "instructions": "be brief"}, m.OPENAI_RESPONSES),
    ({"input": [], "session_id": "s"}, m.OPENAI_RESPONSES),
    ([{"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}], m.OPENAI_RESPONSES),
    ([{"role": "user", "content": "x"}, {"type": "reasoning", "summary": []}], m.OPENAI_RESPONSES),
    ([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}], m.OPENAI_RESPONSES),
    ({"messages": [{"role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]}, m.OPENAI_RESPONSES),
    # An Anthropic response object also says type "message": its blocks decide.
    ([{"type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}],
       "stop_reason": "end_turn"}], m.OPENAI),
    ({"messages": PLAIN, "input": [{"role": "user", "content": "x"}]}, m.OPENAI),  # `messages` wins
])
def test_responses_shapes(doc: object, harness: str) -> None:
    assert detect_harness(doc) == harness
