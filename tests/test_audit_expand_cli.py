"""Audit (#12 item 6): `mc expand` through the real CLI — the 15 000-token budget with the footer naming the
`mc expand` call that continues it (and `next_range` in --json, which the next call accepts), `--tag` shown
whole, and bad input leaving the database as it was."""

from __future__ import annotations

import json

from historian_helpers import PiBuilder, store_pi
from search_helpers import db_digest, fold, session_with_history

from magic_context.store.db import open_db


def test_a_range_over_the_budget_ends_with_the_call_that_continues_it(mc) -> None:
    conn = open_db()
    b = PiBuilder()
    for i in range(60):
        b.user(f"question {i} " + "lorem ipsum dolor sit amet " * 60)  # ~500 tokens each: ~30 000 in all
    pk = store_pi(conn, b.messages, session_id="ses-long")
    fold(conn, pk, 0, 59, "long")
    conn.close()

    first = mc("expand", "--session", "ses-long", "--range", "0-59")
    assert first.returncode == 0, first.stderr.decode()
    last_line = first.stdout.decode().rstrip("\n").splitlines()[-1]
    assert last_line.startswith("Truncated at message ") and "(budget: ~15000 tokens)" in last_line
    x = int(last_line.split()[3])
    assert 0 < x < 59
    assert last_line.endswith(f"Call again with mc expand --session ses-long --range {x + 1}-59 for more.")

    named = mc("expand", "--session", "ses-long", "--harness", "pi", "--range", "0-59").stdout.decode()
    assert named.rstrip().endswith(f"Call again with mc expand --session ses-long --harness pi --range {x + 1}-59 "
                                   "for more.")  # the continuing call names the session as this one did
    data = json.loads(mc("expand", "--session", "ses-long", "--range", "0-59", "--json").stdout)["data"]
    assert data["truncated_at"] == x and data["next_range"] == f"{x + 1}-59"
    assert 14_000 < data["tokens"] <= 15_000
    rest = json.loads(mc("expand", "--session", "ses-long", "--range", data["next_range"], "--json").stdout)["data"]
    assert rest["messages"][0]["ordinal"] == x + 1 and rest["messages"][-1]["ordinal"] == 59
    assert rest["truncated_at"] is None and rest["next_range"] is None


def test_tag_shows_its_message_whole(mc) -> None:
    conn = open_db()
    pk = session_with_history(conn, session_id="ses-tag")
    message_id = conn.execute("SELECT message_id FROM raw_messages WHERE session_pk = ? AND ordinal = 2",
                              (pk,)).fetchone()[0]
    conn.execute("INSERT INTO tags (session_pk, tag_number, part_key, kind, message_id, created_at) "
                 "VALUES (?, 42, 'p', 'text', ?, 0)", (pk, message_id))
    conn.commit()
    conn.close()
    result = mc("expand", "--session", "ses-tag", "--tag", "42", "--json")
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(result.stdout)["data"]
    assert data["kind"] == "message" and data["start"] == 2 and "ZebraStripeError" in data["text"]


def test_bad_expand_input_writes_nothing(mc) -> None:
    conn = open_db()
    session_with_history(conn, session_id="ses-bad")
    conn.close()
    before = db_digest()
    for args in (("--range", "9-1"), ("--range", "x"), ("--tag", "77"), ("--message", "-3"), (),
                 ("--message", "1", "--tag", "1")):
        result = mc("expand", "--session", "ses-bad", *args)
        err = result.stderr.decode()
        assert result.returncode == 2 and err.startswith("mc: error: ") and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and result.stdout == b""
    assert db_digest() == before
