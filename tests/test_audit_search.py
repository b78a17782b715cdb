"""Audit (#12 acceptance): search claims that no earlier test could fail on — the merge's sort by
`score × source boost` through `engine.search` itself (tests/test_search.py sorts a list of its own)."""

from __future__ import annotations

import pytest
from historian_helpers import NOW
from search_helpers import add_memory, db_digest, session_with_history

from magic_context.search import engine


def _note(conn, pk: int, content: str) -> None:
    conn.execute("INSERT INTO notes (type, status, content, session_pk, created_at, updated_at) "
                 "VALUES ('session', 'active', ?, ?, ?, ?)", (content, pk, NOW, NOW))


def test_the_merge_orders_lanes_by_boosted_score_not_raw_score(conn) -> None:
    """Raw lane scores: message 1.0, note 1.0, memory 0.8 (FTS only). Boosted (§3.4): message 1.15,
    memory 1.04, note 1.0 — so the memory must come before the note, which an unboosted sort reverses."""
    pk = session_with_history(conn)
    add_memory(conn, "the walrus module became pinniped")
    _note(conn, pk, "walrus")
    hits = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", now_ms=NOW,
                         sources=["memory", "message", "note"]).hits
    order = [h.source for h in hits if h.source in ("memory", "note")]
    assert order[:2] == ["memory", "note"], [(h.source, h.score) for h in hits]
    memory = next(h for h in hits if h.source == "memory")
    note = next(h for h in hits if h.source == "note")
    assert memory.score == pytest.approx(0.8 * 1.3) and note.score == pytest.approx(1.0)
    assert hits[0].source in ("message", "compartment") and hits[0].score == pytest.approx(1.15)


@pytest.mark.parametrize(("source", "query"), [
    ("memory", "counting cafe"),  # memories_fts: "counted" and "Café"
    ("message", "miscounting"),  # message_fts: "miscounts"
    ("compartment", "renaming walruses"),  # compartment_fts: "renamed walrus"
    ("git_commit", "fixing stripes"),  # git_commit_fts: "Fixed the stripe"
])
def test_every_fts_table_stems_and_folds_case_and_diacritics(conn, source, query) -> None:
    """§3.2: every FTS5 table is `porter unicode61` — a word finds its other forms, and `cafe` finds `Café`."""
    pk = session_with_history(conn)
    add_memory(conn, "Café stripes are counted from the header")
    conn.execute("INSERT INTO git_commits (project_id, sha, message, committed_at, indexed_at) "
                 "VALUES ('dir:syn', ?, 'Fixed the stripe count', ?, ?)", ("a" * 40, NOW, NOW))
    lane = "message" if source == "compartment" else source
    hits = engine.search(conn, query, session_pks=[pk], project_id="dir:syn", now_ms=NOW, sources=[lane],
                         count_retrievals=False).hits
    assert any(h.source == source and h.match == "fts" for h in hits), [(h.source, h.snippet[:40]) for h in hits]


def test_bad_search_scope_and_fts_syntax_write_nothing_through_the_cli(mc, tmp_path) -> None:
    """#12 acceptance: an unknown session or project, or FTS syntax characters: a one-line error or an empty
    result, never a traceback, and nothing written (the index is caught up by a first search beforehand)."""
    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-scope")
    conn.close()
    assert mc("search", "walrus", "--session", "ses-scope", "--source", "message").returncode == 0

    before = db_digest()
    for args, needle in ((("--session", "nope"), "no session 'nope'"),
                         (("--project", str(tmp_path / "elsewhere")), "mc has no session for project"),
                         (("--session", "ses-scope", "--harness", "claude-code"), "no session 'ses-scope'")):
        result = mc("search", "walrus", *args)
        err = result.stderr.decode()
        assert result.returncode == 2 and needle in err and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and result.stdout == b""
    for query in ('"*^():-', "NEAR(a b)", "col:umn*", "AND"):
        result = mc("search", query, "--session", "ses-scope", "--source", "message")
        assert result.returncode == 0 and "Traceback" not in result.stderr.decode(), query
    assert db_digest() == before


@pytest.mark.parametrize("source", ["memory", "note", "git_commit", "message", "compartment"])
def test_from_and_to_filter_every_lane(conn, source) -> None:
    """`--from/--to` (§ Deliver 6) apply to each lane's own time: a hit inside the window is found, and a window
    that starts after it (or ends before it) hides it. tests/test_search.py::test_date_filters covers messages only."""
    pk = session_with_history(conn)
    add_memory(conn, "walrus memory fact")
    _note(conn, pk, "walrus note")
    conn.execute("INSERT INTO git_commits (project_id, sha, message, committed_at, indexed_at) "
                 "VALUES ('dir:syn', ?, 'walrus commit', ?, ?)", ("b" * 40, NOW, NOW))
    lane = "message" if source == "compartment" else source

    def found(**window) -> bool:
        hits = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", now_ms=NOW, sources=[lane],
                             count_retrievals=False, **window).hits
        return any(h.source == source for h in hits)

    day = 86_400_000  # the synthetic messages are stamped from NOW on, seconds apart
    assert found(since_ms=NOW - day, until_ms=NOW + day)
    assert not found(since_ms=NOW + day)
    assert not found(until_ms=NOW - day)


def test_the_message_lane_never_reads_past_its_cutoff_even_when_the_index_does(conn) -> None:
    """The lane filters ordinals in SQL, not only by what the indexer wrote: an index left ahead of the cutoff (a
    last compartment removed while the database was busy) must not leak the now-live messages."""
    from magic_context.search import indexer, lanes
    from magic_context.search import text as st

    pk = session_with_history(conn, fold_through=None)
    from search_helpers import fold

    fold(conn, pk, 0, 4, "Zebra parser")
    last = fold(conn, pk, 5, 10, "Walrus module")
    indexer.index_session(conn, pk, now_ms=NOW)
    conn.execute("DELETE FROM compartments WHERE id = ?", (last,))  # the index still holds ordinals 5-10
    q = lanes.Query("walrus", st.probes("walrus"), st.sanitize("walrus"), st.any_words("walrus"))
    hits = lanes.messages(conn, pk, q, indexer.cutoff(conn, pk), 10)
    assert indexer.cutoff(conn, pk) == 4 and all(h.ordinal <= 4 for h in hits) and not [h for h in hits
                                                                                            if "walrus" in h.snippet]


def test_search_and_expand_on_a_fresh_install_create_no_database(mc, isolated_dirs) -> None:
    """Before mc has stored anything, a search or an expand is a one-line 'no sessions yet', and the database is
    not created just to say so (it was: a 250 KB context.db for `mc search x --session nope`)."""
    from magic_context import paths

    for args in (("search", "walrus", "--session", "nope"), ("search", "walrus"),
                 ("expand", "--session", "nope", "--range", "1-5")):
        result = mc(*args)
        err = result.stderr.decode()
        assert result.returncode == 2 and "mc has no sessions yet" in err and "Traceback" not in err, (args, err)
        assert not paths.db_path().exists() and not isolated_dirs["data"].joinpath("context.db").exists()


def test_an_oversized_query_names_its_size_in_the_unit_of_the_limit() -> None:
    from magic_context.errors import BadInput

    with pytest.raises(BadInput, match="query is 18000 bytes \\(UTF-8\\); the limit is 16384 bytes"):
        engine.validate_query("é" * 9000)  # 9 000 characters, under 16 384, but 18 000 bytes


def test_a_memory_the_head_shows_is_hidden_from_that_sessions_search_only(mc, tmp_path) -> None:
    """§3.5 hides what a session's head shows because that agent has it in context. A project-wide `mc search`
    (no --session) is a person's, who sees no head: the memory comes back, also by id."""
    import json as _json

    from magic_context import project
    from magic_context.store.db import open_db
    from magic_context.store.memories import VISIBLE_STATE_KEY

    conn = open_db()
    pid = project.identity(tmp_path)
    pk = session_with_history(conn, session_id="ses-vis", project_id=pid)
    shown = add_memory(conn, "zebra stripes are counted from the header", project_id=pid)
    conn.execute("UPDATE sessions SET project_dir = ? WHERE id = ?", (str(tmp_path), pk))
    conn.execute("INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?, ?, ?, ?)",
                 (pk, VISIBLE_STATE_KEY, _json.dumps([shown]), NOW))
    conn.commit()
    conn.close()

    def memory_ids(*args: str) -> list[int]:
        result = mc("search", *args, "--source", "memory", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        return [h["id"] for h in _json.loads(result.stdout)["data"]["results"]]

    assert memory_ids("zebra stripes", "--session", "ses-vis") == []
    assert memory_ids(f"#{shown}", "--session", "ses-vis") == []
    assert memory_ids("zebra stripes") == [shown]
    assert memory_ids("zebra stripes", "--project", str(tmp_path)) == [shown]
    assert memory_ids(f"#{shown}") == [shown]


def test_memory_off_searches_no_memory_and_asking_for_an_off_lane_says_why(conn, tmp_path) -> None:
    """§3.1: the memory source is searched only while `memory.enabled`; git commits only while indexing is on.
    Asking for either by name while it is off says so, instead of an unexplained empty result."""
    from magic_context.config.model import MCConfig

    pk = session_with_history(conn)
    mid = add_memory(conn, "zebra stripes are counted from the header")
    off = MCConfig.model_validate({"embedding": {"provider": "off"}, "memory": {"enabled": False}})
    on = MCConfig.model_validate({"embedding": {"provider": "off"}})

    def run_with(config, sources=None, query="zebra stripes"):
        return engine.search(conn, query, session_pks=[pk], project_id="dir:syn", now_ms=NOW, sources=sources,
                             config=config, count_retrievals=False, project_dir=str(tmp_path))

    assert mid in [h.id for h in run_with(on).hits if h.source == "memory"]
    everything = run_with(off)
    assert not [h for h in everything.hits if h.source == "memory"]
    assert everything.warnings == []  # not asked for by name: quietly left out, as the head leaves them out
    asked = run_with(off, ["memory"])
    assert asked.hits == [] and any("memory.enabled = false" in w for w in asked.warnings)
    assert run_with(off, ["memory"], query=f"#{mid}").hits == []  # the id shortcut too
    commits = run_with(on, ["git_commit"])
    assert any("memory.git_commit_indexing.enabled" in w for w in commits.warnings)


def test_a_notes_msg_anchor_is_shown_only_to_its_own_session() -> None:
    """§3.6: ` @msg <ordinal>` only for this session's notes — another session's ordinals mean nothing here."""
    from magic_context.search import format as fmt
    from magic_context.search.lanes import Hit

    note = Hit("note", 5, 1.0, "fts", "look again", session_pk=7, status="active", at_ms=NOW,
               extra={"anchor_ordinal": 42})
    assert fmt.block(1, note, NOW, 7).splitlines()[0] == "[1] [note] score=1.00 id=#5 status=active today @msg 42"
    assert fmt.block(1, note, NOW, 8).splitlines()[0] == "[1] [note] score=1.00 id=#5 status=active today"
    assert fmt.block(1, note, NOW, None).splitlines()[0].endswith("today")


def test_each_dynamic_field_of_the_result_text_is_capped_at_1024_bytes() -> None:
    """§3.6 [later]: every dynamic field at most 1024 UTF-8 bytes (a pasted log as a query or a title)."""
    from magic_context.search import format as fmt
    from magic_context.search.engine import SearchResult
    from magic_context.search.lanes import Hit

    long_title = "é" * 1000  # 2 000 bytes
    hit = Hit("compartment", 3, 0.5, "fts", "", session_pk=1, ordinal_start=0, ordinal_end=9, title=long_title)
    head = fmt.block(1, hit, NOW).splitlines()[0]
    assert head.endswith("title=" + "é" * 512) and len(head.split("title=")[1].encode()) == 1024
    text = fmt.render(SearchResult("q" * 3000, [hit]), NOW)
    assert text.splitlines()[0] == f'Found 1 result(s) for "{"q" * 1024}":'


def test_the_cli_warns_about_an_off_lane_only_when_asked_for_it(mc) -> None:
    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-off-lane")
    conn.close()
    plain = mc("search", "walrus", "--session", "ses-off-lane")  # git indexing is off by default
    assert plain.returncode == 0 and "not searched" not in plain.stderr.decode()
    named = mc("search", "walrus", "--session", "ses-off-lane", "--source", "git_commit")
    assert named.returncode == 0 and "git_commit is not searched" in named.stderr.decode()


def test_a_project_with_memories_and_notes_but_no_session_yet_is_searchable(mc, tmp_path) -> None:
    """`mc memory add` / `mc note add` work in a project mc has not served yet; searching that project (by --project
    or from its directory) must find them — memory and note lanes are project-scoped (§3.1) — not refuse with
    "no session". A directory with nothing of its own still gets the one-line error."""
    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-other")  # a database exists, for another project
    conn.close()
    project = tmp_path / "fresh"
    project.mkdir()
    assert mc("memory", "add", "the walrus module became pinniped", "--category", "NAMING",
              cwd=project).returncode == 0
    assert mc("note", "add", "check the walrus migration", cwd=project).returncode == 0
    for args, cwd in ((("--project", str(project)), None), ((), project)):
        result = mc("search", "walrus", *args, cwd=cwd)
        assert result.returncode == 0, result.stderr.decode()
        out = result.stdout.decode()
        assert "[memory]" in out and "[note]" in out, out
    empty = tmp_path / "empty"
    empty.mkdir()
    result = mc("search", "walrus", "--project", str(empty))
    assert result.returncode == 2 and "mc has no session for project" in result.stderr.decode()
