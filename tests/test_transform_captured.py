"""Every captured real request body (../shared/data/requests) through the real `mc transform` CLI.

Each body (and each hook input that is a message array) must: exit 0, keep its shape and every field mc
does not own, be valid for its provider (tool calls paired, reasoning untouched), be filed under its
true harness, and serve byte-identical output when the same request comes again. A client's next
request, which extends the previous one, must keep the previously served prefix.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest
from captured_requests import REQUESTS, TRUE_FORMAT
from conftest import run_mc
from session_replay import reasoning_blocks

from magic_context import paths
from magic_context.transform.protocol import CODECS
from magic_context.wire import arcs
from magic_context.wire import model as m

OWNED = {"messages", "input", "system", "instructions"}  # what mc may rewrite in a body


def messages_of(doc: object) -> list:
    if isinstance(doc, list):
        return doc
    assert isinstance(doc, dict)
    return doc["messages"] if "messages" in doc else doc["input"]


def transform(data: bytes, *args: str) -> bytes:
    proc = run_mc("transform", *args, stdin=data)
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    assert b"Traceback" not in proc.stderr and b"warning" not in proc.stderr, proc.stderr.decode()[-500:]
    return proc.stdout


def stored_harnesses() -> set[str]:
    """The harnesses of the sessions in this test's own database."""
    conn = sqlite3.connect(paths.db_path())
    try:
        return {row[0] for row in conn.execute("SELECT harness FROM sessions")}
    finally:
        conn.close()


@pytest.mark.parametrize("flag", [False, True], ids=["detected", "named"])
@pytest.mark.parametrize("name", sorted(TRUE_FORMAT))
def test_captured_body_passes_mc_transform(name: str, flag: bool, tmp_path: Path) -> None:
    harness = TRUE_FORMAT[name]
    data = (REQUESTS / name).read_bytes()
    given = orjson.loads(data)
    session = f"{name}:{flag}"
    args = ["--session", session, "--project", str(tmp_path), *(["--harness", harness] if flag else [])]
    first = transform(data, *args)
    served = orjson.loads(first)

    assert type(served) is type(given)
    if isinstance(given, dict):  # same shape; every field mc does not own passes through unchanged
        assert served.keys() == given.keys()
        assert {k: v for k, v in served.items() if k not in OWNED} == {k: v for k, v in given.items()
                                                                         if k not in OWNED}
    codec = CODECS[harness]
    decoded = codec.decode(orjson.loads(orjson.dumps(messages_of(served))))
    assert arcs.validate_pairing(decoded, harness) == []
    if harness == m.ANTHROPIC:
        assert decoded[0].role == m.USER
    assert set(reasoning_blocks(harness, messages_of(served))) <= set(reasoning_blocks(harness, messages_of(given)))
    assert len(decoded) > len(codec.decode(messages_of(given)))  # mc's head reached the request
    assert stored_harnesses() == {harness}

    assert transform(data, *args) == first  # the same request again: the same bytes


def test_claude_code_guidance_skips_the_billing_header(tmp_path: Path) -> None:
    data = (REQUESTS / "claude-code-2.1.332-2.json").read_bytes()
    given = orjson.loads(data)
    served = orjson.loads(transform(data, "--session", "cc", "--project", str(tmp_path)))
    assert served["system"][0] == given["system"][0]  # x-anthropic-billing-header: … stays as sent
    assert served["system"][1]["text"].startswith(given["system"][1]["text"].rstrip() + "\n\n## Magic Context")
    assert served["system"][1]["cache_control"] == given["system"][1]["cache_control"]
    roles = [x["role"] for x in served["messages"]]
    assert roles == ["user", "user", "user", "system", "assistant", "user"]  # m[0], m[1], then the request
    assert served["messages"][3] == given["messages"][1]  # the system-role message is served as sent


def test_codex_guidance_goes_into_its_first_developer_item(tmp_path: Path) -> None:
    data = (REQUESTS / "codex-0.171.0-2.json").read_bytes()
    given = orjson.loads(data)
    served = orjson.loads(transform(data, "--session", "cx", "--project", str(tmp_path)))
    assert "instructions" not in served
    first = served["input"][0]["content"][0]["text"]
    assert first.startswith(given["input"][0]["content"][0]["text"].rstrip() + "\n\n## Magic Context")
    assert served["input"][1] == given["input"][1]
    assert [x.get("role") for x in served["input"][2:4]] == ["user", "user"]  # m[0], m[1] after the prompt
    assert "<session-history>" in served["input"][2]["content"][0]["text"]
    assert served["input"][-2:] == given["input"][-2:]  # the tool call and its output, ids and all


@pytest.mark.parametrize(("first", "second"), [("codex-0.171.0-1.json", "codex-0.171.0-2.json"),
                                               ("claude-code-2.1.332-1.json", "claude-code-2.1.332-2.json")])
def test_a_clients_next_request_defers_and_keeps_the_served_prefix(first: str, second: str, tmp_path: Path) -> None:
    args = ["--session", "seq", "--project", str(tmp_path), "--report"]
    one = run_mc("transform", *args, stdin=(REQUESTS / first).read_bytes())
    two = run_mc("transform", *args, stdin=(REQUESTS / second).read_bytes())
    assert one.returncode == 0 and two.returncode == 0, two.stderr.decode()[-300:]
    report = json.loads(two.stderr.decode().strip().splitlines()[-1])
    assert report["pass"] == "defer", report
    before, after = messages_of(orjson.loads(one.stdout)), messages_of(orjson.loads(two.stdout))
    given = messages_of(orjson.loads((REQUESTS / first).read_bytes()))
    # Claude Code moves its cache_control mark off the previous last message: that one changes, nothing of mc's does.
    moved = 1 if first.startswith("claude-code") else 0
    stable = len(before) - moved
    assert [orjson.dumps(x) for x in after[:stable]] == [orjson.dumps(x) for x in before[:stable]]
    assert len(given) + 2 == len(before)  # m[0] and m[1] were added, nothing else
