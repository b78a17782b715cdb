"""The memory lifecycle on a real SQLite database: de-dup, TTLs, statuses, merge, remove, FTS, export/import."""

from __future__ import annotations

import itertools
import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magic_context.errors import BadInput, NotFound
from magic_context.memory import engine, model, transfer
from magic_context.store import db
from magic_context.store import memories as store

P = "git:project"
OTHER = "git:other"
NOW = 1_700_000_000_000
DAY = model.DAY_MS


def _fts(conn: sqlite3.Connection, word: str) -> list[int]:
    return sorted(r[0] for r in conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (word,)))


def _snapshot(conn: sqlite3.Connection) -> list[tuple]:
    return [tuple(r) for r in conn.execute("SELECT * FROM memories ORDER BY id")] + \
        [tuple(r) for r in conn.execute("SELECT * FROM memory_mutations ORDER BY id")]


# --- add and de-dup ----------------------------------------------------------------------------


def test_exact_duplicate_bumps_seen_count_not_a_new_row(conn) -> None:
    first = engine.add(conn, P, "Never edit a landed migration.", "constraints", now_ms=NOW)
    assert first.created and first.memory["category"] == "CONSTRAINTS" and first.memory["seen_count"] == 1
    again = engine.add(conn, P, "  never EDIT a landed   migration ", "CONSTRAINTS", now_ms=NOW + 5)
    assert not again.created and again.memory["id"] == first.memory["id"]
    assert again.memory["seen_count"] == 2 and again.memory["last_seen_at"] == NOW + 5
    assert "seen count incremented" in again.message()
    # Another category or another project is another memory.
    assert engine.add(conn, P, "Never edit a landed migration.", "PROJECT_RULES", now_ms=NOW).created
    assert engine.add(conn, OTHER, "Never edit a landed migration.", "CONSTRAINTS", now_ms=NOW).created
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 3


@pytest.mark.parametrize(("content", "category", "field"), [
    ("", "NAMING", "content"), ("   \n ", "NAMING", "content"), ("x" * (model.MAX_CONTENT_BYTES + 1), "NAMING",
                                                                   "content"),
    ("fine", "BOGUS", "category"), ("fine", "KNOWN_ISSUES", "category"),  # legacy: historian/import only
])
def test_bad_add_input_is_refused_and_writes_nothing(conn, content, category, field) -> None:
    with pytest.raises(BadInput) as info:
        engine.add(conn, P, content, category, now_ms=NOW)
    assert info.value.one_line().startswith(field + ":")
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_importance_is_validated(conn) -> None:
    with pytest.raises(BadInput, match="importance"):
        engine.add(conn, P, "x", "NAMING", importance=0, now_ms=NOW)
    assert engine.add(conn, P, "x", "NAMING", importance=90, now_ms=NOW).memory["importance"] == 90


# --- TTL -----------------------------------------------------------------------------------------


def test_historian_memories_expire_and_a_repeat_renews_them(conn) -> None:
    new, seen = engine.promote_facts(conn, P, "ses_1", [("CONFIG_VALUES", "port is 8080"), ("NAMING", "mc, not MC"),
                                                        ("KNOWN_ISSUES", "flaky on CI"), ("NAMING", "   "),
                                                        ("NOPE", "dropped")], NOW)
    assert (new, seen) == (3, 0)
    rows = {r["content"]: r for r in engine.list_memories(conn, P, now_ms=NOW)}
    assert rows["port is 8080"]["expires_at"] == NOW + 180 * DAY
    assert rows["flaky on CI"]["expires_at"] == NOW + 30 * DAY
    assert rows["mc, not MC"]["expires_at"] is None and rows["mc, not MC"]["source_type"] == "historian"
    later = NOW + 31 * DAY
    assert "flaky on CI" not in {r["content"] for r in engine.list_memories(conn, P, now_ms=later)}
    assert [r["content"] for r in engine.list_memories(conn, P, now_ms=later, expired=True)] == ["flaky on CI"]
    assert engine.counts(conn, P, now_ms=later)["expired"] == 1
    # Seeing the config value again renews its TTL from that day.
    assert engine.promote_facts(conn, P, "ses_2", [("CONFIG_VALUES", "Port is 8080.")], later) == (0, 1)
    assert store.get(conn, rows["port is 8080"]["id"])["expires_at"] == later + 180 * DAY
    # Agent and user writes never expire.
    assert engine.add(conn, P, "port is 9090", "CONFIG_VALUES", now_ms=NOW).memory["expires_at"] is None


def test_a_persons_edit_or_restore_clears_the_ttl(conn) -> None:
    engine.promote_facts(conn, P, "s", [("CONFIG_VALUES", "timeout is 5s")], NOW)
    mid = engine.list_memories(conn, P, now_ms=NOW)[0]["id"]
    expired_at = NOW + 200 * DAY
    assert engine.list_memories(conn, P, now_ms=expired_at) == []
    restored = engine.restore(conn, mid, now_ms=expired_at)
    assert restored["expires_at"] is None and restored["status"] == "active"
    engine.promote_facts(conn, P, "s", [("CONFIG_VALUES", "retries is 3")], NOW)
    other = engine.list_memories(conn, P, now_ms=NOW, category="CONFIG_VALUES")[-1]["id"]
    assert engine.edit(conn, other, importance=70, now_ms=NOW)["expires_at"] is not None  # importance: no vouch
    assert engine.edit(conn, other, permanent=True, now_ms=NOW)["expires_at"] is None


def test_a_repeat_of_an_archived_fact_only_bumps_counters(conn) -> None:
    engine.promote_facts(conn, P, "s", [("NAMING", "use snake_case")], NOW)
    mid = engine.list_memories(conn, P, now_ms=NOW)[0]["id"]
    engine.archive(conn, [mid], reason="wrong", now_ms=NOW)
    engine.promote_facts(conn, P, "s", [("NAMING", "Use snake_case")], NOW + 1)
    row = store.get(conn, mid)
    assert row["status"] == "archived" and row["seen_count"] == 2
    assert "It is archived" in engine.add(conn, P, "use snake_case", "NAMING", now_ms=NOW).message()
    assert json.loads(row["metadata_json"]) == {"archive_reason": "wrong"}


# --- statuses, edit, archive, restore, remove ------------------------------------------------------


def test_statuses_and_listing(conn) -> None:
    a = engine.add(conn, P, "alpha", "NAMING", now_ms=NOW).memory["id"]
    b = engine.add(conn, P, "beta", "NAMING", permanent=True, now_ms=NOW).memory["id"]
    c = engine.add(conn, P, "gamma", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [c], now_ms=NOW)
    assert [r["id"] for r in engine.list_memories(conn, P, now_ms=NOW)] == [a, b]
    assert [r["id"] for r in engine.list_memories(conn, P, statuses=["archived"], now_ms=NOW)] == [c]
    assert engine.counts(conn, P, now_ms=NOW) == {"active": 1, "permanent": 1, "archived": 1, "expired": 0,
                                                  "superseded": 0, "total": 3}
    with pytest.raises(BadInput, match="restore it before editing"):
        engine.edit(conn, c, content="gamma 2", now_ms=NOW)
    with pytest.raises(BadInput, match="restore it before archiving"):
        engine.archive(conn, [a, c], now_ms=NOW)
    assert store.get(conn, a)["status"] == "active"  # all or none
    with pytest.raises(BadInput, match="not archived"):
        engine.restore(conn, a, now_ms=NOW)
    assert engine.restore(conn, c, now_ms=NOW)["status"] == "active"
    assert engine.edit(conn, b, permanent=False, now_ms=NOW)["status"] == "active"


def test_unknown_ids_and_foreign_projects_are_not_found(conn) -> None:
    mid = engine.add(conn, OTHER, "theirs", "NAMING", now_ms=NOW).memory["id"]
    for call in (lambda: engine.get(conn, 999), lambda: engine.edit(conn, 999, content="x"),
                 lambda: engine.archive(conn, [999]), lambda: engine.restore(conn, 999),
                 lambda: engine.remove(conn, [999]), lambda: engine.get(conn, mid, project_id=P),
                 lambda: engine.edit(conn, mid, content="mine", project_id=P)):
        before = _snapshot(conn)
        with pytest.raises(NotFound):
            call()
        assert _snapshot(conn) == before


def test_edit_refuses_to_create_a_duplicate(conn) -> None:
    a = engine.add(conn, P, "one", "NAMING", now_ms=NOW).memory["id"]
    b = engine.add(conn, P, "two", "NAMING", now_ms=NOW).memory["id"]
    with pytest.raises(BadInput, match=f"already exists as #{a}"):
        engine.edit(conn, b, content="ONE", now_ms=NOW)
    with pytest.raises(BadInput, match="nothing to change"):
        engine.edit(conn, b, now_ms=NOW)
    moved = engine.edit(conn, b, category="ARCHITECTURE", content="two!", now_ms=NOW + 1)
    assert (moved["category"], moved["content"], moved["updated_at"]) == ("ARCHITECTURE", "two!", NOW + 1)


def test_fts_follows_edits_and_deletes(conn) -> None:
    mid = engine.add(conn, P, "the proxy listens on loopback", "ARCHITECTURE", now_ms=NOW).memory["id"]
    assert _fts(conn, "loopback") == [mid]
    engine.edit(conn, mid, content="the proxy binds 127.0.0.1 only", now_ms=NOW)
    assert _fts(conn, "loopback") == [] and _fts(conn, "binds") == [mid]
    engine.remove(conn, [mid], now_ms=NOW)
    assert _fts(conn, "binds") == []
    assert store.get(conn, mid) is None


# --- merge ---------------------------------------------------------------------------------------


def test_merge_into_a_new_canonical_memory(conn) -> None:
    a = engine.add(conn, P, "tests use tmp dirs", "PROJECT_RULES", now_ms=NOW).memory["id"]
    b = engine.add(conn, P, "tests never touch real data", "PROJECT_RULES", permanent=True, now_ms=NOW).memory["id"]
    engine.add(conn, P, "tests use tmp dirs", "PROJECT_RULES", now_ms=NOW)  # seen twice
    store.record_retrieval(conn, [b], NOW)
    result = engine.merge(conn, [a, b], content="tests use tmp dirs and never touch real data", now_ms=NOW + 1)
    new = result.memory
    assert new["id"] not in (a, b) and result.superseded == [a, b]
    assert (new["seen_count"], new["retrieval_count"], new["status"]) == (3, 1, "permanent")
    assert new["merged_from"] == [a, b]
    for mid in (a, b):
        row = store.get(conn, mid)
        assert (row["status"], row["superseded_by"]) == ("archived", new["id"])
    assert f"into canonical memory [ID: {new['id']}]" in result.message()
    # A later merge carries the earlier provenance along.
    c = engine.add(conn, P, "fixtures are per test", "PROJECT_RULES", now_ms=NOW).memory["id"]
    again = engine.merge(conn, [new["id"], c], now_ms=NOW + 2)
    assert again.memory["id"] == new["id"] and again.superseded == [c]
    assert again.memory["merged_from"] == sorted([a, b, c])


def test_merge_refusals_write_nothing(conn) -> None:
    a = engine.add(conn, P, "a", "NAMING", now_ms=NOW).memory["id"]
    b = engine.add(conn, P, "b", "CONSTRAINTS", now_ms=NOW).memory["id"]
    c = engine.add(conn, P, "c", "NAMING", now_ms=NOW).memory["id"]
    d = engine.add(conn, OTHER, "d", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [c], now_ms=NOW)
    before = _snapshot(conn)
    for ids, match in (([a, b], "different categories"), ([a], "at least 2"), ([a, a], "at least 2"),
                       ([a, c], "archived or superseded"), ([a, d], "different projects")):
        with pytest.raises(BadInput, match=match):
            engine.merge(conn, ids, now_ms=NOW)
        assert _snapshot(conn) == before


# --- export / import -----------------------------------------------------------------------------


def _populate(conn: sqlite3.Connection) -> None:
    a = engine.add(conn, P, "alpha & <beta>", "ARCHITECTURE", importance=80, now_ms=NOW).memory["id"]
    b = engine.add(conn, P, "alpha and beta", "ARCHITECTURE", now_ms=NOW).memory["id"]
    engine.merge(conn, [a, b], content="alpha with beta", now_ms=NOW + 1)
    engine.promote_facts(conn, P, "ses_x", [("KNOWN_ISSUES", "é unicode issue"), ("NAMING", "mc")], NOW)
    c = engine.add(conn, P, "gone", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [c], reason="obsolete", now_ms=NOW)


def _comparable(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines]


def test_export_import_round_trip(conn, tmp_path, monkeypatch) -> None:
    _populate(conn)
    exported = list(transfer.export_lines(conn, P))
    assert len(exported) == 6 and all("\n" not in line for line in exported)
    monkeypatch.setenv("MAGIC_CONTEXT_STORAGE_DIR", str(tmp_path / "second"))
    other = db.open_db()
    try:
        result = transfer.import_lines(other, P, exported, now_ms=NOW + 10)
        assert (result.imported, result.existing) == (6, 0)
        assert _comparable(list(transfer.export_lines(other, P))) == _comparable(exported)
        # Importing the same file again changes nothing.
        before = _snapshot(other)
        assert transfer.import_lines(other, P, exported, now_ms=NOW + 20).existing == 6
        assert _snapshot(other) == before
        # Into another project identity: links are re-pointed to the new ids.
        moved = transfer.import_lines(other, OTHER, exported, now_ms=NOW + 30)
        rows = {r["content"]: r for r in store.select(other, OTHER)}
        assert rows["alpha & <beta>"]["superseded_by"] == rows["alpha with beta"]["id"]
        assert rows["alpha with beta"]["merged_from"] == sorted(moved.ids[i] for i in (1, 2))
    finally:
        other.close()


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2: not valid JSON"),
    ('["a"]', "line 2: expected a JSON object"),
    ('{"category": "NAMING"}', "line 2: field 'content': missing"),
    ('{"content": "", "category": "NAMING"}', "line 2: field 'content': memory content is empty"),
    ('{"content": "x", "category": "NOPE"}', "line 2: field 'category': unknown memory category"),
    ('{"content": "x", "category": "NAMING", "status": "gone"}', "line 2: field 'status'"),
    ('{"content": "x", "category": "NAMING", "importance": 500}', "line 2: field 'importance'"),
    ('{"content": "x", "category": "NAMING", "seen_count": "3"}', "line 2: field 'seen_count'"),
    ('{"content": "x", "category": "NAMING", "merged_from": [1, "2"]}', "line 2: field 'merged_from'"),
    ('{"content": "x", "category": "NAMING", "format": "other/9"}', "line 2: field 'format'"),
])
def test_a_bad_line_names_itself_and_nothing_is_imported(conn, line, message) -> None:
    good = '{"content": "fine", "category": "NAMING"}'
    with pytest.raises(BadInput) as info:
        transfer.import_lines(conn, P, [good, line, good.replace("fine", "also fine")], now_ms=NOW)
    text = info.value.one_line()
    assert text.startswith(message) and "\n" not in text and "nothing was imported" in text
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_import_dry_run_rolls_back(conn) -> None:
    result = transfer.import_dry_run(conn, P, ['{"content": "x", "category": "naming"}', ""], now_ms=NOW)
    assert result.imported == 1
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_retrieval_counters(conn) -> None:
    a = engine.add(conn, P, "a", "NAMING", now_ms=NOW).memory["id"]
    assert engine.record_retrieval(conn, [a, a, 999], now_ms=NOW + 7) == 1
    row = store.get(conn, a)
    assert (row["retrieval_count"], row["last_retrieved_at"]) == (1, NOW + 7)


_EXAMPLES = itertools.count()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(model.CATEGORIES), st.text(min_size=1, max_size=80),
                          st.sampled_from(model.STATUSES), st.integers(1, 100)), max_size=12))
def test_export_import_round_trip_property(conn, items) -> None:
    project = f"git:example-{next(_EXAMPLES)}"  # the database outlives hypothesis's examples
    for category, content, status, importance in items:
        if not content.strip():
            continue
        mid = engine.add(conn, project, content, category, importance=importance, now_ms=NOW).memory["id"]
        if status == "archived" and store.get(conn, mid)["status"] == "active":
            engine.archive(conn, [mid], now_ms=NOW)
        elif status == "permanent" and store.get(conn, mid)["status"] != "archived":
            # the same content again may return an archived row, which must be restored before an edit
            engine.edit(conn, mid, permanent=True, now_ms=NOW)
    exported = list(transfer.export_lines(conn, project))
    target = project + ":copy"
    result = transfer.import_lines(conn, target, exported, now_ms=NOW)
    assert result.imported == len(exported)
    copied = [json.loads(line) for line in transfer.export_lines(conn, target)]
    strip = ("id", "project_id", "superseded_by", "merged_from")
    assert [{k: v for k, v in c.items() if k not in strip} for c in copied] == \
        [{k: v for k, v in json.loads(line).items() if k not in strip} for line in exported]


def test_the_historian_prompt_gets_eligible_memories_most_important_first(conn) -> None:
    from magic_context.history import prompt

    engine.add(conn, P, "low", "NAMING", importance=10, now_ms=NOW)
    engine.add(conn, P, "high", "ARCHITECTURE", importance=90, now_ms=NOW)
    engine.add(conn, P, "pinned", "NAMING", importance=1, permanent=True, now_ms=NOW)
    gone = engine.add(conn, P, "archived", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [gone], now_ms=NOW)
    engine.promote_facts(conn, P, "s", [("KNOWN_ISSUES", "stale issue")], NOW - 40 * DAY)
    rows = store.for_prompt(conn, P, NOW, 10)
    assert [r["content"] for r in rows] == ["pinned", "high", "low"]
    assert prompt.render_memory(rows) == "<ARCHITECTURE>\n* high\n</ARCHITECTURE>\n<NAMING>\n* pinned\n* low\n</NAMING>"


def test_the_mutation_log_is_pruned_after_a_month(conn) -> None:
    a = engine.add(conn, P, "a", "NAMING", now_ms=NOW).memory["id"]
    engine.edit(conn, a, content="a1", now_ms=NOW)
    engine.edit(conn, a, content="a2", now_ms=NOW + 20 * DAY)
    engine.promote_facts(conn, P, "s", [], NOW + 31 * DAY)
    assert [row[1] for row in store.mutations_after(conn, P, 0)] == ["update"]
    assert engine.prune(conn, now_ms=NOW + 60 * DAY) == 1
    assert list(store.mutations_after(conn, P, 0)) == []


def test_a_version_2_database_with_memories_is_upgraded(tmp_path) -> None:
    from sqlite_utils import Database

    from magic_context.store import migrations

    path = tmp_path / "old.db"
    old = db.connect(path)
    migrations.migrations.apply(Database(old), stop_before="m003_memories_notes")
    old.execute("PRAGMA user_version=2")
    old.execute("INSERT INTO memories (project_id, category, content, normalized_hash, created_at, updated_at) "
                "VALUES (?, 'NAMING', 'kept across the upgrade', ?, 1, 1)",
                (P, model.content_hash("kept across the upgrade")))
    old.execute("INSERT INTO notes (content, created_at, updated_at) VALUES ('old note', 1, 1)")
    old.close()
    conn = db.open_db(path)
    try:
        assert db.user_version(conn) == db.SCHEMA_VERSION
        row = engine.list_memories(conn, P, now_ms=NOW)[0]
        assert (row["content"], row["merged_from"], row["last_retrieved_at"]) == ("kept across the upgrade", [], None)
        assert not engine.add(conn, P, "Kept across the upgrade.", "NAMING", now_ms=NOW).created
        assert _fts(conn, "upgrade") == [row["id"]]
        assert conn.execute("SELECT content, anchor_ordinal FROM notes").fetchall()[0][0] == "old note"
    finally:
        conn.close()
