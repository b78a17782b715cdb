"""Unified search on real SQLite: each lane, the filters, scoring and merge, FTS triggers, the result text."""

from __future__ import annotations

import json

import pytest
from historian_helpers import NOW, PiBuilder
from search_helpers import add_memory, fold, session_with_history

from magic_context.errors import BadInput
from magic_context.search import engine, indexer, lanes
from magic_context.search import format as fmt
from magic_context.search import text as st
from magic_context.store import db, raw
from magic_context.store.db import open_db
from magic_context.wire import pi


def run(conn, query, pk, **kw):
    kw.setdefault("project_id", "dir:syn")
    return engine.search(conn, query, session_pks=[pk], now_ms=NOW, **kw)


def test_message_lane_finds_folded_prose_tool_inputs_and_output_heads(conn) -> None:
    pk = session_with_history(conn)
    hits = run(conn, "zebra parser", pk, sources=["message"]).hits
    assert hits and hits[0].source in ("message", "compartment")
    # a path that appears only in a tool call's input
    path_hits = [h for h in run(conn, "src/importer/zebra_parser.py", pk, sources=["message"]).hits
                 if h.source == "message"]
    assert {h.ordinal for h in path_hits} >= {4, 6}
    # an error name that appears only in a tool output's head
    error_hits = [h for h in run(conn, "ZebraStripeError", pk, sources=["message"]).hits if h.source == "message"]
    assert error_hits[0].ordinal == 2
    assert error_hits[0].ordinal_start == 0 and error_hits[0].ordinal_end == 5


def test_live_tail_never_comes_back(conn) -> None:
    pk = session_with_history(conn, fold_through=9)
    assert run(conn, "penguin", pk).hits == []  # ordinals 11-13 are after the last compartment end
    assert run(conn, "walrus", pk).hits  # ordinal 9 is folded
    fold(conn, pk, 10, 12, "penguin talk")
    ordinals = {h.ordinal for h in run(conn, "penguin", pk, sources=["message"]).hits if h.source == "message"}
    assert ordinals == {11, 12}  # 13 is still live


def test_no_compartment_means_no_message_hit(conn) -> None:
    pk = session_with_history(conn, fold_through=None)
    assert run(conn, "zebra", pk).hits == []
    assert conn.execute("SELECT count(*) FROM message_text").fetchone()[0] == 0


def test_index_follows_raw_edits_and_fts_triggers_follow_updates_and_deletes(conn) -> None:
    pk = session_with_history(conn)
    indexer.index_session(conn, pk)
    row_id = conn.execute("SELECT id FROM message_text WHERE session_pk = ? AND ordinal = 3", (pk,)).fetchone()[0]
    conn.execute("UPDATE message_text SET text = 'okapi replaces the old words' WHERE id = ?", (row_id,))
    assert [r[0] for r in conn.execute("SELECT rowid FROM message_fts WHERE message_fts MATCH 'okapi'")] == [row_id]
    assert conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH 'miscounts'").fetchone()[0] == 0
    conn.execute("DELETE FROM message_text WHERE id = ?", (row_id,))
    assert conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH 'okapi'").fetchone()[0] == 0
    # compartment summaries: insert, update and delete keep compartment_fts in step
    cid = fold(conn, pk, 10, 10, "capybara title")
    assert [r[0] for r in conn.execute("SELECT rowid FROM compartment_fts WHERE compartment_fts MATCH 'capybara'")] \
        == [cid]
    conn.execute("UPDATE compartments SET title = 'tapir title', content = 'tapir' WHERE id = ?", (cid,))
    gone = conn.execute("SELECT count(*) FROM compartment_fts WHERE compartment_fts MATCH 'capybara'").fetchone()[0]
    assert gone == 0
    conn.execute("DELETE FROM compartments WHERE id = ?", (cid,))
    assert conn.execute("SELECT count(*) FROM compartment_fts WHERE compartment_fts MATCH 'tapir'").fetchone()[0] == 0


def test_an_edited_raw_message_is_reindexed(conn) -> None:
    b = PiBuilder().user("first question about llamas").say("llamas answer").user("second")
    from historian_helpers import store_pi

    pk = store_pi(conn, b.messages)
    fold(conn, pk, 0, 1, "llamas")
    assert {h.ordinal for h in run(conn, "llamas", pk, sources=["message"]).hits if h.source == "message"} == {0, 1}
    edited = [dict(m) for m in b.messages]
    edited[0] = {**edited[0], "content": [{"type": "text", "text": "first question about alpacas"}]}
    raw.sync(conn, pk, pi.decode(edited), now_ms=NOW + 5)
    assert {h.ordinal for h in run(conn, "alpacas", pk, sources=["message"]).hits if h.source == "message"} == {0}
    assert {h.ordinal for h in run(conn, "llamas", pk, sources=["message"]).hits if h.source == "message"} == {1}


def test_visible_memories_are_hidden_and_expired_or_archived_are_not_found(conn) -> None:
    pk = session_with_history(conn)
    shown = add_memory(conn, "Use the zebra parser v2 for stripes")
    hidden_ok = add_memory(conn, "The zebra importer runs nightly")
    add_memory(conn, "zebra expired fact", expires_at=NOW - 1)
    archived = add_memory(conn, "zebra archived fact", status="archived")
    from magic_context.store.memories import VISIBLE_STATE_KEY

    conn.execute("INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?, ?, ?, ?)",
                 (pk, VISIBLE_STATE_KEY, json.dumps([shown]), NOW))
    ids = {h.id for h in run(conn, "zebra", pk, sources=["memory"]).hits}
    assert ids == {hidden_ok}
    # the id shortcut reads any status, in the typed order, but still hides what the head shows
    shortcut = run(conn, f"#{archived}, {hidden_ok} {shown}", pk).hits
    assert [h.id for h in shortcut] == [archived, hidden_ok]
    assert [round(h.score, 2) for h in shortcut] == [1.0, 0.99]


def test_merge_applies_source_boosts_and_lane_order() -> None:
    memory = lanes.Hit("memory", 1, 0.8, "fts", "m")
    message = lanes.Hit("message", "1:5", 0.8, "fts", "x", ordinal=5, ordinal_start=2, ordinal_end=8)
    note = lanes.Hit("note", 3, 1.0, "fts", "n")
    commit = lanes.Hit("git_commit", "a" * 40, 0.8, "fts", "c", at_ms=1)
    merged = sorted([note, message, commit, memory],
                    key=lambda h: (-h.score * engine.BOOST[h.source], engine.LANE_ORDER[h.source], engine._tie(h)))
    assert [h.source for h in merged] == ["memory", "note", "git_commit", "message"]  # 1.04, 1.0, 0.96, 0.92
    tied = [lanes.Hit("note", 9, 1.15, "fts", "n"), lanes.Hit("message", "1:2", 1.0, "fts", "x", ordinal_start=0)]
    tied.sort(key=lambda h: (-round(h.score * engine.BOOST[h.source], 6), engine.LANE_ORDER[h.source]))
    assert [h.source for h in tied] == ["message", "note"]  # equal boosted scores: lane order decides
    assert engine.BOOST == {"memory": 1.3, "message": 1.15, "compartment": 1.15, "git_commit": 1.2, "note": 1.0}


def zebra_and_walrus(conn) -> int:
    """A synthetic session folded into two indexed compartments (0-4 "Zebra parser", 5-10 "Walrus module")."""
    pk = session_with_history(conn, fold_through=None)
    fold(conn, pk, 0, 4, "Zebra parser")
    fold(conn, pk, 5, 10, "Walrus module")
    indexer.index_session(conn, pk, now_ms=NOW)
    return pk


def query(text: str) -> lanes.Query:
    return lanes.Query(text, st.probes(text), st.sanitize(text), st.any_words(text))


def test_a_compartment_holding_the_best_message_outranks_one_ranked_above_it_by_its_summary(conn) -> None:
    pk = zebra_and_walrus(conn)
    q = query("walrus renamed")

    def order(weight: float) -> list[int]:
        summary = [lanes.Hit("compartment", 1, 0.9, "fts", "s", pk, 0, 4), lanes.Hit("compartment", 2, 0.8, "fts", "s",
                                                                                  pk, 5, 10)]
        old, lanes.AGREEMENT_WEIGHT = lanes.AGREEMENT_WEIGHT, weight
        try:
            hits = lanes.messages(conn, pk, q, 10, 10, compartment_hits=summary)
        finally:
            lanes.AGREEMENT_WEIGHT = old
        return [h.id for h in hits if h.source == "compartment"]

    assert order(0.0) == [1, 2]  # the summaries' own order
    assert order(lanes.AGREEMENT_WEIGHT) == [2, 1]  # compartment 2 covers message 10, the best match for "walrus"


def test_search_limit_scores_and_retrieval_counts(conn) -> None:
    pk = session_with_history(conn)
    mid = add_memory(conn, "zebra stripes decision")
    result = run(conn, "stripes", pk, limit=3)
    assert len(result.hits) == 3
    # the best message scores 1.0 x 1.15; the best FTS-only memory 0.8 x 1.3 (§3.3, §3.4)
    assert result.hits[0].source == "message" and result.hits[0].score == pytest.approx(1.15)
    assert result.hits[1].source == "memory" and result.hits[1].score == pytest.approx(0.8 * 1.3)
    assert conn.execute("SELECT retrieval_count FROM memories WHERE id = ?", (mid,)).fetchone()[0] == 1
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("query", ['"*^():-', "AND OR NOT", "zebra*", "col:umn", '"unbalanced', "^start", "-x"])
def test_fts_syntax_characters_never_raise(conn, query) -> None:
    pk = session_with_history(conn)
    result = run(conn, query, pk)
    assert isinstance(result.hits, list)


@pytest.mark.parametrize(("query", "message"), [("", "required"), ("   ", "required"), ("a" * 20_000, "limit"),
                                                (" ".join(["w"] * 65), "terms")])
def test_bad_queries_are_refused_before_anything_is_written(conn, query, message) -> None:
    pk = session_with_history(conn)
    before = conn.total_changes
    with pytest.raises(BadInput, match=message):
        run(conn, query, pk)
    assert conn.total_changes == before


def test_unknown_source_is_refused_and_aliases_work() -> None:
    with pytest.raises(BadInput, match="unknown source 'bogus'"):
        engine.parse_sources(["bogus"])
    assert engine.parse_sources(["commits,memories", "compartment"]) == ["git_commit", "memory", "message"]
    assert engine.parse_sources([]) == []


def test_empty_source_list_searches_nothing(conn) -> None:
    pk = session_with_history(conn)
    assert run(conn, "zebra", pk, sources=[]).hits == []


def test_date_filters(conn) -> None:
    pk = session_with_history(conn)
    assert run(conn, "zebra", pk, sources=["message"], since_ms=NOW + 10 ** 9).hits == []
    assert run(conn, "zebra", pk, sources=["message"], since_ms=NOW - 1, until_ms=NOW + 10 ** 9).hits


def test_probes_sanitize_and_id_query() -> None:
    assert st.probes('look for "stripe count" in src/a/b.py near 3f9a1c2 and snake_case_name') == [
        "stripe count", "src/a/b.py", "snake_case_name", "3f9a1c2"]
    assert st.probes("deadbeef is not a sha without digits") == []
    assert st.probes("TypeError and ERR_BAD_THING") == ["TypeError", "ERR_BAD_THING"]
    assert st.sanitize('say "hi" now') == '"say" """hi""" "now"'
    assert st.any_words("what did we decide about the parser?") == '"decide" OR "parser"'
    assert st.id_query("#12, 15") == [12, 15]
    assert st.id_query("12 apples") is None
    assert st.id_query("1 2 3 4 5 6") is None


def test_note_lane_keyword_scoring(conn) -> None:
    pk = session_with_history(conn)
    for content in ("zebra parser follow-up needed", "unrelated note", "check the zebra"):
        conn.execute("INSERT INTO notes (type, status, content, session_pk, created_at, updated_at) "
                     "VALUES ('session', 'active', ?, ?, ?, ?)", (content, pk, NOW, NOW))
    conn.execute("INSERT INTO notes (type, status, content, project_id, created_at, updated_at) "
                 "VALUES ('smart', 'pending', 'zebra parser in another project', 'dir:other', ?, ?)", (NOW, NOW))
    hits = run(conn, "zebra parser", pk, sources=["note"]).hits
    assert [h.snippet for h in hits] == ["zebra parser follow-up needed", "check the zebra"]
    assert hits[0].score == 1.0 and hits[1].score == 0.5


def test_result_text_layout(conn) -> None:
    pk = session_with_history(conn)
    add_memory(conn, "zebra   stripes\n decision")
    result = run(conn, "stripes", pk, limit=2)
    text = fmt.render(result, NOW, pk)
    lines = text.split("\n")
    assert lines[0] == 'Found 2 result(s) for "stripes":'
    assert lines[1] == ""
    top = result.hits[0]
    assert lines[2] == f"[1] [message] score=1.15 ordinal={top.ordinal} range={top.ordinal_start}-{top.ordinal_end} " \
                       f"role={top.role}"
    assert lines[5] == f"[2] [memory] score=1.04 id={result.hits[1].id} category=DECISIONS match=fts"
    assert lines[6] == "zebra stripes decision"
    assert text.endswith(fmt.EXPAND_HINT)
    empty = engine.SearchResult("nothing here", [])
    assert fmt.render(empty, NOW) == ('No results found for "nothing here" across notes, memories, primers, git '
                                      "commits, or message history.")
    assert st.preview("x" * 300) == "x" * 219 + "…"
    assert [st.age(NOW - d * 86_400_000, NOW) for d in (0, 1, 5, 45, 400)] == ["today", "1d ago", "5d ago",
                                                                                "1mo ago", "1y ago"]
    assert st.age(NOW + 10 ** 6, NOW) == "future"


def test_schema_version_counts_the_search_migration() -> None:
    from magic_context.store import migrations

    assert "m004_search_index" in migrations.all_names()
    assert db.SCHEMA_VERSION == len(migrations.all_names())


def test_a_historian_publish_indexes_the_folded_messages(conn) -> None:
    from historian_helpers import store_pi

    from magic_context.history import wrapup

    b = PiBuilder()
    for i in range(30):
        b.turn(f"please update module number {i} with the quokka setting", f"src/mod{i}.py")
    pk = store_pi(conn, b.messages)
    result = wrapup.wrapup(conn, pk, keep=10, provider="extractive")
    assert result.compartments >= 1
    end = conn.execute("SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (pk,)).fetchone()[0]
    indexed = [r[0] for r in conn.execute("SELECT ordinal FROM message_text WHERE session_pk = ? ORDER BY ordinal",
                                          (pk,))]
    assert indexed == list(range(end + 1))  # folded history only, indexed by the publish itself
    # inline (this test's historian mode) indexes but does not embed: replayed pass times stay as they were
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0


def test_note_block_and_anchor_hint() -> None:
    note = lanes.Hit("note", 4, 1.0, "fts", "check  the zebra", session_pk=7, status="active", at_ms=NOW - 86_400_000,
                     extra={"anchor_ordinal": 12})
    other = lanes.Hit("note", 5, 0.5, "fts", "project note", session_pk=None, status="pending", at_ms=NOW,
                      extra={"anchor_ordinal": None})
    assert fmt.block(1, note, NOW, 7) == "[1] [note] score=1.00 id=#4 status=active 1d ago @msg 12\ncheck the zebra"
    assert fmt.block(2, other, NOW, 7) == "[2] [note] score=0.50 id=#5 status=pending today\nproject note"
    text = fmt.render(engine.SearchResult("zebra", [note, other]), NOW, 7)
    assert text.endswith(fmt.NOTE_HINT) and fmt.EXPAND_HINT not in text


def test_a_busy_database_still_searches_what_is_indexed(conn) -> None:
    import sqlite3

    from magic_context import paths

    pk = session_with_history(conn, fold_through=9)
    run(conn, "walrus", pk)  # indexed through 9
    fold(conn, pk, 10, 12, "penguin talk")
    blocker = sqlite3.connect(paths.db_file(), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        hurried = open_db()
        hurried.execute("PRAGMA busy_timeout=50")
        result = engine.search(hurried, "walrus", session_pks=[pk], project_id="dir:syn", now_ms=NOW,
                               count_retrievals=False)
        assert result.hits and "database busy" in result.warnings[0]
        hurried.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_result_text_is_capped_at_4096_tokens() -> None:
    from magic_context.tokens import estimate

    hits = [lanes.Hit("compartment", i, 1.0, "fts", "word " * 400, 1, i, i + 6, title="title " * 300)
            for i in range(50)]  # a title is capped at 1024 bytes, a preview at 220 characters
    text = fmt.render(engine.SearchResult("word", hits), NOW, 1)
    assert estimate(text) <= fmt.MAX_TOKENS
    kept = text.count("] [message]")
    assert 0 < kept < 50
    assert text.endswith(f"({50 - kept} result(s) omitted to fit the output budget — refine the query or lower the "
                         "limit)")
    assert fmt.EXPAND_HINT in text


def test_a_compartment_hit_reaches_back_to_the_request_a_fold_split_from_its_answer(conn, monkeypatch) -> None:
    from magic_context.tools.expand import expand_range

    pk = session_with_history(conn, fold_through=None)
    fold(conn, pk, 0, 2, "Flaky parser request")  # the fold ended mid-turn: the request (0) and the failing run
    fold(conn, pk, 3, 8, "Committed the stripe fix", content="A: miscounts stripes; committed 3f9a1c2")
    fold(conn, pk, 9, 10, "Renamed walrus to pinniped")  # begins with the person's next request
    indexer.index_session(conn, pk, now_ms=NOW)

    def compartment_hits(query: str) -> dict[str, lanes.Hit]:
        hits = run(conn, query, pk, sources=["message"]).hits
        return {h.title: h for h in hits if h.source == "compartment"}

    fix = compartment_hits("committed stripe fix")["Committed the stripe fix"]
    assert (fix.ordinal_start, fix.ordinal_end) == (0, 8)  # back to the request at 0, so expand shows it
    assert (fix.extra["compartment_start"], fix.extra["compartment_end"]) == (3, 8)
    assert "Please fix the flaky zebra parser" in expand_range(conn, pk, fix.ordinal_start, fix.ordinal_end).text
    rename = compartment_hits("renamed walrus pinniped")["Renamed walrus to pinniped"]
    assert (rename.ordinal_start, rename.ordinal_end) == (9, 10)  # already starts at a request: unchanged
    monkeypatch.setattr(lanes, "TURN_REACH", 2)  # the request lies 3 back: out of reach, the range is the compartment's
    fix = compartment_hits("committed stripe fix")["Committed the stripe fix"]
    assert (fix.ordinal_start, fix.ordinal_end) == (3, 8)


def test_agreement_counts_only_the_messages_a_compartment_summarizes(conn) -> None:
    pk = zebra_and_walrus(conn)
    q = query("zebra parser miscounts")
    # compartment 2's range reaches back to 0 (as TURN_REACH would stretch it) but it summarizes 5-10 only: the best
    # message (3) is not its own, so compartment 1 (which summarizes 0-4) keeps the agreement and the lead
    summary = [lanes.Hit("compartment", 2, 0.9, "fts", "s", pk, 0, 10, extra={"compartment_start": 5,
                                                                            "compartment_end": 10}),
               lanes.Hit("compartment", 1, 0.8, "fts", "s", pk, 0, 4, extra={"compartment_start": 0,
                                                                           "compartment_end": 4})]
    hits = lanes.messages(conn, pk, q, 10, 10, compartment_hits=summary)
    assert [h.id for h in hits if h.source == "compartment"] == [1, 2]
