"""`mc expand` engine (§7.2): ranges within the 15 000-token budget and the footer that continues them, one
message whole (dropped outputs included), tags, the live tail."""

from __future__ import annotations

import pytest
from historian_helpers import PiBuilder, store_pi
from search_helpers import fold, session_with_history

from magic_context.errors import BadInput, NotFound
from magic_context.tools import expand


def test_range_lines_hold_prose_tool_inputs_and_output_heads(conn) -> None:
    pk = session_with_history(conn)
    result = expand.expand_range(conn, pk, 0, 3)
    lines = result.text.split("\n")
    assert lines[0].startswith("Messages 0-3 (4 messages, ~") and lines[0].endswith(" tokens):")
    assert lines[1] == "[0] U: Please fix the flaky zebra parser in the importer"
    assert lines[2] == "[1] A: bash pytest tests/test_zebra.py -x"
    assert lines[3].startswith("[2] T: FAILED tests/test_zebra.py::test_stripes")
    assert result.truncated_at is None and result.next_range is None


def test_range_is_clipped_to_the_folded_history(conn) -> None:
    pk = session_with_history(conn, fold_through=9)
    result = expand.expand_range(conn, pk, 8, 13)
    assert [m["ordinal"] for m in result.messages] == [8, 9]
    tail = expand.expand_range(conn, pk, 10, 13)
    assert tail.kind == "live_tail"
    assert tail.text == ("Range 10-13 is entirely within the live tail (after the last compacted message 9); those "
                         "messages are already visible in context.")
    nothing = session_with_history(conn, session_id="none", fold_through=None)
    assert expand.expand_range(conn, nothing, 0, 3).kind == "live_tail"


def test_budget_truncates_with_a_footer_naming_the_next_call(conn) -> None:
    b = PiBuilder()
    for i in range(40):
        b.user(f"question {i} " + "lorem ipsum dolor sit amet " * 60)
    pk = store_pi(conn, b.messages)
    fold(conn, pk, 0, 39, "long")
    result = expand.expand_range(conn, pk, 0, 39, budget=2000)
    assert result.truncated_at is not None and result.truncated_at < 39
    x = result.truncated_at
    assert result.text.endswith(f"Truncated at message {x} (budget: ~2000 tokens). Call again with start={x + 1} "
                                "end=39 for more.")
    assert result.tokens <= 2000
    cli = expand.expand_range(conn, pk, 0, 39, budget=2000, cli=True, session_id="syn")
    assert cli.text.endswith(f"Call again with mc expand --session syn --range {x + 1}-39 for more.")
    rest = expand.expand_range(conn, pk, x + 1, 39, budget=2000)
    assert rest.messages[0]["ordinal"] == x + 1
    assert expand.BUDGET_TOKENS == 15_000


def test_message_shows_the_full_tool_output(conn) -> None:
    b = PiBuilder().user("run it").call("bash", {"command": "make test"}, "line\n" * 2000 + "FINAL LINE")
    pk = store_pi(conn, b.messages)
    whole = expand.expand_message(conn, pk, 2)
    assert whole.kind == "message" and whole.text.endswith("FINAL LINE")
    call = expand.expand_message(conn, pk, 1)
    assert 'TC: bash({"command": "make test"})' in call.text
    assert expand.expand_message(conn, pk, 99).kind == "empty"


def test_tags_and_parse_range(conn) -> None:
    pk = session_with_history(conn)
    message_id = conn.execute("SELECT message_id FROM raw_messages WHERE session_pk = ? AND ordinal = 3",
                              (pk,)).fetchone()[0]
    conn.execute("INSERT INTO tags (session_pk, tag_number, part_key, kind, message_id, created_at) "
                 "VALUES (?, 7, 'p', 'text', ?, 0)", (pk, message_id))
    assert expand.tag_ordinal(conn, pk, 7) == 3
    with pytest.raises(NotFound, match="no tag 8"):
        expand.tag_ordinal(conn, pk, 8)
    assert expand.parse_range("3-9") == (3, 9) and expand.parse_range("4") == (4, 4)
    for bad in ("9-3", "a-b", "1-2-3", "-1-4", ""):
        with pytest.raises(BadInput):
            expand.parse_range(bad)
