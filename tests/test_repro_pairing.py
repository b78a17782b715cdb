"""Issue #14 item 4 through the real CLI: the orphan/unanswered reproducers are repaired as the provider
accepts (never served invalid with exit 0), the orphan is never tagged, and the repair is stable."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, run_mc

from magic_context.transform import protocol
from magic_context.wire import arcs

REPRO = REPO.parent / "shared" / "data" / "repro"


def _served_pairing(stdout: bytes) -> list[str]:
    inp = protocol.read_input(json.loads(stdout), {})
    return arcs.validate_pairing(protocol.CODECS[inp.harness].decode(inp.messages_json), inp.harness)


@pytest.mark.parametrize("name", ["orphan_tool_result.json", "unanswered_tool_use.json"])
def test_the_repro_is_served_valid_and_the_same_every_pass(name, tmp_path):
    data = (REPRO / name).read_bytes()
    source = json.loads(data)
    inp = protocol.read_input(json.loads(data), {})
    assert arcs.validate_pairing(protocol.CODECS[inp.harness].decode(inp.messages_json), inp.harness)  # broken
    first = run_mc("transform", "--report", stdin=data, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert _served_pairing(first.stdout) == []
    report = json.loads(first.stderr.decode().strip().splitlines()[-1])
    assert any("repaired the input's tool pairing" in w for w in report["warnings"])
    again = run_mc("transform", stdin=data, cwd=tmp_path)
    assert again.stdout == first.stdout  # the same input is repaired the same way
    assert json.loads(data) == source


def test_the_orphan_result_is_removed_and_never_tagged(tmp_path):
    proc = run_mc("transform", stdin=(REPRO / "orphan_tool_result.json").read_bytes(), cwd=tmp_path)
    out = json.loads(proc.stdout)
    text = json.dumps(out)
    assert "toolu_missing" not in text and "a.txt" not in text
    assert [m["content"] for m in out["messages"] if m["role"] == "user"][-1] == "§3§ continue"


def test_the_unanswered_call_is_answered_like_the_harnesses_do(tmp_path):
    proc = run_mc("transform", stdin=(REPRO / "unanswered_tool_use.json").read_bytes(), cwd=tmp_path)
    out = json.loads(proc.stdout)["messages"]
    call = next(i for i, m in enumerate(out) if m.get("tool_calls"))
    assert out[call + 1] == {"role": "tool", "tool_call_id": "call_1", "content": "[Tool execution was interrupted]"}
    assert out[call + 2]["role"] == "user"


def test_anthropic_results_after_text_are_moved_first_and_unanswered_calls_answered(tmp_path):
    doc = {"harness": "anthropic", "session_id": "s", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}},
                                          {"type": "tool_use", "id": "t2", "name": "bash", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "here:"},
                                     {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        {"role": "assistant", "content": "done"}]}
    proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _served_pairing(proc.stdout) == []
    third = [m for m in json.loads(proc.stdout)["messages"] if m["role"] == "user"][-1]["content"]
    assert [b["type"] for b in third] == ["tool_result", "tool_result", "text"]
    synthetic = next(b for b in third if b.get("tool_use_id") == "t2")
    assert synthetic["is_error"] is True and synthetic["content"].endswith("[Tool execution was interrupted]")
