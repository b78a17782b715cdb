"""`mc search` / `mc expand` contract: the real CLI in a subprocess, --json envelopes, bad input, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from search_helpers import add_memory, db_digest, session_with_history

from magic_context import paths
from magic_context.store.db import open_db


@pytest.fixture
def stored() -> str:
    conn = open_db()
    session_with_history(conn, session_id="ses-cli")
    add_memory(conn, "zebra stripes are counted from the header")
    conn.close()
    return "ses-cli"


def test_search_json_results_carry_ranges_that_expand_accepts(mc, stored) -> None:
    result = mc("search", "ZebraStripeError", "--session", stored, "--json")
    assert result.returncode == 0, result.stderr.decode()
    envelope = json.loads(result.stdout)
    assert envelope["command"] == "search" and envelope["errors"] == []
    hits = envelope["data"]["results"]
    assert hits, envelope
    for hit in hits:
        assert {"source", "id", "score", "match", "snippet"} <= set(hit)
    message = next(h for h in hits if h["source"] == "message")
    assert message["session_id"] == stored
    assert message["ordinal"] == 2 and (message["ordinal_start"], message["ordinal_end"]) == (0, 5)
    expanded = mc("expand", "--session", stored, "--range", f"{message['ordinal_start']}-{message['ordinal_end']}",
                  "--json")
    assert expanded.returncode == 0, expanded.stderr.decode()
    data = json.loads(expanded.stdout)["data"]
    assert data["kind"] == "range" and [m["ordinal"] for m in data["messages"]] == [0, 1, 2, 3, 4, 5]
    assert "ZebraStripeError" in data["text"]


def test_search_text_output_is_the_agent_result_text(mc, stored) -> None:
    result = mc("search", "walrus", "--session", stored, "--source", "message")
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert out.startswith('Found ') and 'result(s) for "walrus":' in out.splitlines()[0]
    assert "[1] [message] score=" in out
    assert out.rstrip().endswith("to read the full conversation context.")


def test_search_finds_nothing_in_the_live_tail(mc, stored) -> None:
    result = mc("search", "penguin", "--session", stored)
    assert result.returncode == 0
    assert result.stdout.decode().startswith('No results found for "penguin"')


def test_search_by_project_directory(mc, tmp_path) -> None:
    from magic_context import project

    conn = open_db()
    session_with_history(conn, session_id="ses-proj", project_id=project.identity(tmp_path))
    conn.close()
    result = mc("search", "walrus", "--project", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["data"]["results"]


@pytest.mark.parametrize(("args", "needle"), [
    (("",), "'query' is required"),
    (("x" * 20_000,), "the limit is 16384"),
    (("zebra", "--source", "bogus"), "unknown source 'bogus'"),
    (("zebra", "--limit", "0"), "--limit 0 is out of range"),
    (("zebra", "--from", "yesterday"), "is not YYYY-MM-DD"),
    (("zebra", "--from", "2026-03-02", "--to", "2026-03-01"), "--from 2026-03-02 is after --to 2026-03-01"),
])
def test_search_bad_input_is_one_line_exit_2_and_writes_nothing(mc, stored, args, needle) -> None:
    before = db_digest()
    result = mc("search", *args, "--session", stored)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert result.stdout == b""
    assert db_digest() == before


@pytest.mark.parametrize("query", ['"*^():-', "a:b", "(x", "zebra*", "-", "^"])
def test_search_fts_syntax_is_an_empty_or_normal_result(mc, stored, query) -> None:
    result = mc("search", query, "--session", stored, "--json")
    assert result.returncode == 0, result.stderr.decode()
    assert isinstance(json.loads(result.stdout)["data"]["results"], list)


def test_unknown_session_is_a_clean_error(mc, stored) -> None:
    for args in (("search", "zebra", "--session", "nope"), ("expand", "--session", "nope", "--message", "1")):
        result = mc(*args)
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert "no session 'nope'" in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "needle"), [
    (("--range", "5-2"), "start <= end"),
    (("--range", "abc"), "is not A-B"),
    (("--message", "1", "--range", "1-2"), "exactly one of"),
    ((), "exactly one of"),
    (("--tag", "99"), "no tag 99"),
])
def test_expand_bad_input(mc, stored, args, needle) -> None:
    result = mc("expand", "--session", stored, *args)
    err = result.stderr.decode()
    assert result.returncode != 0 and needle in err and "Traceback" not in err


def test_expand_live_tail_and_message(mc, stored) -> None:
    tail = mc("expand", "--session", stored, "--range", "11-13")
    assert tail.returncode == 0
    assert tail.stdout.decode().startswith("Range 11-13 is entirely within the live tail (after the last compacted "
                                           "message 9)")
    whole = mc("expand", "--session", stored, "--message", "2", "--json")
    data = json.loads(whole.stdout)["data"]
    assert data["kind"] == "message" and "stripe count mismatch" in data["text"]


def test_transform_pass_imports_no_search_module() -> None:
    open_db().close()
    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    env = {**os.environ, paths.STORAGE_ENV: os.environ[paths.STORAGE_ENV]}
    env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "magic_context", "transform"],
                          input=payload.encode(), capture_output=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "magic_context.transform.hook" in imported
    assert not {m for m in imported if m.startswith(("magic_context.search", "numpy", "wordllama",
                                                     "magic_context.tools.expand", "magic_context.store.search"))}


def test_status_shows_the_search_index(mc, stored) -> None:
    assert mc("search", "walrus", "--session", stored).returncode == 0  # brings the index up to date
    result = mc("status", "--session", stored, "--json")
    assert result.returncode == 0, result.stderr.decode()
    search = json.loads(result.stdout)["data"]["search"]
    assert search["indexed_messages"] == 10 and search["searchable_through"] == 9
    assert search["last_embedding_failure"] is None
    human = mc("status", "--session", stored).stdout.decode()
    assert "search   10 messages indexed (through ordinal 9)" in human
