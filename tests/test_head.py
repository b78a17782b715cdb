"""transform/head.py directly: the project docs block, what m[0] holds for each include flag and the watermarks
it records, the m[1] delta after compartments and memories, the pressure backstop's edge, and the two
synthetic messages. (test_memory_head.py drives the same code through whole passes.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from magic_context.history import render
from magic_context.memory import engine
from magic_context.store import compartments
from magic_context.store import raw as raw_store
from magic_context.transform import head
from magic_context.wire import model as m

NOW = 1_800_000_000_000
PID = "git:head-test"


def ctx(pk: int, project_dir: Path, **flags: object) -> head.HeadContext:
    values: dict = {"include_history": False, "include_memory": False, "include_docs": False, "temporal": False,
                    "history_budget": 10_000, "memory_budget": 4_000, **flags}
    return head.HeadContext(session_pk=pk, project_id=PID, project_dir=str(project_dir),
                            estimate=render.estimate_tokens, now_ms=NOW, **values)


def session(conn: sqlite3.Connection) -> int:
    return raw_store.ensure_session(conn, "pi", "head-session", project_dir="/p", now_ms=1)


def compartment(conn: sqlite3.Connection, pk: int, sequence: int, title: str) -> None:
    compartments.insert(conn, pk, sequence=sequence, start=10 * sequence, end=10 * sequence + 9,
                        start_message_id=None, end_message_id=None, title=title, p1=f"{title} in short",
                        p2="", p3="", p4="", content=f"{title} in short", importance=50, episode_type=None,
                        start_time=None, end_time=None, now_ms=NOW)


# --- project docs ----------------------------------------------------------------------------------


def test_docs_from_the_repository_root_in_a_fixed_order(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "STRUCTURE.md").write_text("  layout\n\n")
    (root / "ARCHITECTURE.md").write_bytes(b"spine \xff holds")
    assert head._docs(str(root / "sub")) == (
        '<project-docs>\n<file name="ARCHITECTURE.md">\nspine \ufffd holds\n</file>\n'
        '<file name="STRUCTURE.md">\nlayout\n</file>\n</project-docs>')


def test_docs_read_at_most_64_kib_and_skip_missing_files(tmp_path: Path) -> None:
    (tmp_path / "STRUCTURE.md").write_text("x" * (64 * 1024) + "TAIL")
    assert head._docs(str(tmp_path)) == ('<project-docs>\n<file name="STRUCTURE.md">\n' + "x" * 65536
                                         + "\n</file>\n</project-docs>")
    assert head._docs(str(tmp_path / "nowhere")) == ""


# --- m[0] ------------------------------------------------------------------------------------------


def test_m0_with_nothing_included_is_empty(conn: sqlite3.Connection, tmp_path: Path) -> None:
    (tmp_path / "ARCHITECTURE.md").write_text("doc")
    pk = session(conn)
    compartment(conn, pk, 0, "ignored")
    assert head.render_m0(conn, ctx(pk, tmp_path)) == ("", {"max_sequence": -1, "max_memory_id": 0})


def test_m0_sections_in_order_and_watermarks(conn: sqlite3.Connection, tmp_path: Path) -> None:
    (tmp_path / "ARCHITECTURE.md").write_text("doc")
    pk = session(conn)
    compartment(conn, pk, 0, "first")
    compartment(conn, pk, 1, "second")
    a = engine.add(conn, PID, "tests use SQLite", "PROJECT_RULES", now_ms=NOW).memory["id"]
    engine.edit(conn, a, content="tests use real SQLite", now_ms=NOW)  # a logged mutation: the cursor moves
    b = engine.add(conn, PID, "x " * 3000, "NAMING", now_ms=NOW).memory["id"]  # over the budget below
    engine.add(conn, "git:other", "not ours", "NAMING", now_ms=NOW)
    text, marks = head.render_m0(conn, ctx(pk, tmp_path, include_docs=True, include_history=True,
                                           include_memory=True, memory_budget=200))
    docs = '<project-docs>\n<file name="ARCHITECTURE.md">\ndoc\n</file>\n</project-docs>'
    history = render.render_session_history(compartments.for_head(conn, pk), 10_000, False,
                                            estimate=render.estimate_tokens)
    memory = f"<project-memory>\n<PROJECT_RULES>\n#{a}: tests use real SQLite\n</PROJECT_RULES>\n</project-memory>"
    assert "first in short" in history and "second in short" in history
    assert text == f"{docs}\n\n{history}\n\n{memory}"
    cursor = marks.pop("memory_cursor")
    assert cursor > 0 and marks == {"max_sequence": 1, "max_memory_id": b, "memory_ids": [a]}


def test_m0_history_only_and_memory_without_rows(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    text, marks = head.render_m0(conn, ctx(pk, tmp_path, include_history=True, include_memory=True))
    assert text == render.EMPTY_SESSION_HISTORY
    assert marks == {"max_sequence": -1, "max_memory_id": 0, "memory_ids": [], "memory_cursor": marks["memory_cursor"]}


# --- m[1] ------------------------------------------------------------------------------------------


def test_m1_shows_only_what_came_after_m0(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    compartment(conn, pk, 0, "old")
    a = engine.add(conn, PID, "first fact", "NAMING", now_ms=NOW).memory["id"]
    c = ctx(pk, tmp_path, include_history=True, include_memory=True)
    _, marks = head.render_m0(conn, c)
    marks["materialized_at"] = NOW
    assert head.render_m1(conn, c, marks) == (render.M1_PLACEHOLDER, [a])
    compartment(conn, pk, 1, "newer")
    b = engine.add(conn, PID, "second fact", "NAMING", now_ms=NOW).memory["id"]
    text, visible = head.render_m1(conn, c, marks)
    assert "newer in short" in text and "old in short" not in text
    assert f"#{b}: second fact" in text and f"#{a}:" not in text and visible == [a, b]
    assert head.render_m1(conn, ctx(pk, tmp_path), marks) == (render.M1_PLACEHOLDER, [])  # nothing included


def test_m1_reports_edits_archives_and_a_restored_memory(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    a = engine.add(conn, PID, "alpha", "NAMING", now_ms=NOW).memory["id"]
    b = engine.add(conn, PID, "beta", "NAMING", now_ms=NOW).memory["id"]
    gone = engine.add(conn, PID, "gamma", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [gone], now_ms=NOW)
    c = ctx(pk, tmp_path, include_memory=True)
    _, marks = head.render_m0(conn, c)
    assert marks["memory_ids"] == [a, b]
    engine.edit(conn, a, content="alpha two", now_ms=NOW + 1)
    engine.archive(conn, [b], now_ms=NOW + 1)
    engine.restore(conn, gone, now_ms=NOW + 1)  # never shown by m[0]: forced into <new-memories>
    text, visible = head.render_m1(conn, c, marks)
    assert f'<updated id="{a}" category="NAMING">alpha two</updated>' in text
    assert f'<removed id="{b}"/>' in text and f"#{gone}: gamma" in text
    assert visible == [a, gone]


# --- backstop and messages -------------------------------------------------------------------------


def test_m1_too_large_above_a_fifth_of_the_history_budget(tmp_path: Path) -> None:
    c = ctx(1, tmp_path, history_budget=1_000)
    c.estimate = len
    assert not head.m1_too_large("x" * 200, c)
    assert head.m1_too_large("x" * 201, c)
    c.estimate = lambda text: 10**9
    assert not head.m1_too_large(render.M1_PLACEHOLDER, c)  # the placeholder never asks for a fold


def test_messages_are_two_synthetic_user_turns_and_skip_empty_text() -> None:
    both = head.messages("base", "delta", 123)
    assert [(x.id, x.role, x.created_at, x.synthetic, [(b.kind, b.text, b.key, b.synthetic) for b in x.blocks])
            for x in both] == [
        (head.M0_ID, m.USER, 123, True, [(m.TEXT, "base", "p0", True)]),
        (head.M1_ID, m.USER, 123, True, [(m.TEXT, "delta", "p0", True)]),
    ]
    assert [x.id for x in head.messages("", "delta", None)] == [head.M1_ID]
    assert head.messages("", "", None) == []


def test_m1_from_a_legacy_baseline_without_watermarks(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """m[0] metadata from before the watermarks: every compartment (from sequence 0) and memory counts as new."""
    pk = session(conn)
    compartment(conn, pk, 0, "zeroth")
    compartment(conn, pk, 1, "first")
    a = engine.add(conn, PID, "a fact", "NAMING", now_ms=NOW).memory["id"]
    text, visible = head.render_m1(conn, ctx(pk, tmp_path, include_history=True, include_memory=True), {})
    assert "zeroth in short" in text and "first in short" in text and f"#{a}: a fact" in text
    assert visible == [a]


def test_m1_shows_every_chosen_memory_and_keeps_the_temporal_choice(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    c = ctx(pk, tmp_path, include_history=True, include_memory=True, memory_budget=100_000)
    _, marks = head.render_m0(conn, c)
    compartments.insert(conn, pk, sequence=0, start=0, end=9, start_message_id=None, end_message_id=None,
                        title="timed", p1="timed in short", p2="", p3="", p4="", content="timed in short",
                        importance=50, episode_type=None, start_time=NOW - 86_400_000, end_time=NOW, now_ms=NOW)
    big = [engine.add(conn, PID, f"fact {i} " + "word " * 600, "NAMING", now_ms=NOW).memory["id"] for i in range(3)]
    text, visible = head.render_m1(conn, c, marks)
    assert all(f"#{i}: fact" in text for i in big) and visible == big  # beyond render's default m[1] budget
    rows = compartments.for_head(conn, pk)
    assert render.render_new_compartments_p1(rows, temporal=False) in text
    assert render.render_new_compartments_p1(rows, temporal=True) not in text


def test_m1_judges_new_memories_at_m0s_materialization_time(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """The same rows give the same bytes: a fact that expires between m[0]'s materialization and this pass
    still shows, since eligibility is judged at the frozen time."""
    pk = session(conn)
    day = 86_400_000
    c = ctx(pk, tmp_path, include_memory=True)
    _, marks = head.render_m0(conn, c)
    marks["materialized_at"] = NOW
    engine.promote_facts(conn, PID, "s", [("CONFIG_VALUES", "port is 8080")], NOW - 179 * day)
    later = ctx(pk, tmp_path, include_memory=True)
    later.now_ms = NOW + 2 * day  # 181 days after promotion: expired now, not at materialization
    text, visible = head.render_m1(conn, later, marks)
    assert "port is 8080" in text and len(visible) == 1
    marks["materialized_at"] = NOW + 2 * day
    assert head.render_m1(conn, c, marks) == (render.M1_PLACEHOLDER, [])


def test_m1_forces_a_restored_or_replacement_memory_m0_never_showed(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """Memories older than m[0]'s watermark are not "new", yet one restored after m[0], or one that now replaces a
    memory m[0] showed, must appear in <new-memories>: otherwise the agent sees it nowhere."""
    pk = session(conn)
    gone = engine.add(conn, PID, "archived before m0", "NAMING", now_ms=NOW).memory["id"]
    small = engine.add(conn, PID, "small", "NAMING", now_ms=NOW).memory["id"]
    big = engine.add(conn, PID, "big " * 400, "NAMING", now_ms=NOW).memory["id"]  # over m[0]'s budget
    unseen = engine.add(conn, PID, "unseen " * 400, "NAMING", now_ms=NOW).memory["id"]  # over the budget too
    stays = engine.add(conn, PID, "kept as is", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [gone], now_ms=NOW)
    c = ctx(pk, tmp_path, include_memory=True, memory_budget=60)
    _, marks = head.render_m0(conn, c)
    assert marks["memory_ids"] == [small, stays] and marks["max_memory_id"] == stays
    engine.restore(conn, gone, now_ms=NOW + 1)
    engine.edit(conn, unseen, content="still unseen " * 400, now_ms=NOW + 1)  # an edit m[0] never showed: not forced
    merged = engine.merge(conn, [big, small], now_ms=NOW + 1)  # big's text: big survives, small is superseded
    assert merged.memory["id"] == big
    text, visible = head.render_m1(conn, c, marks)
    assert text == (
        "<session-history-since>\n<memory-updates>\nThese memories changed since the snapshot below — trust these:\n"
        f'  <superseded id="{small}" by="{big}"/>\n</memory-updates>\n'
        f"<new-memories>\n<NAMING>\n#{gone}: archived before m0\n#{big}: {'big ' * 399}big\n</NAMING>\n"
        "</new-memories>\n</session-history-since>")
    assert visible == sorted([gone, big, stays])


def test_m1_new_memories_get_a_quarter_of_the_memory_budget(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    c = ctx(pk, tmp_path, include_memory=True, memory_budget=400)  # m[1]: 100 tokens of new memories
    _, marks = head.render_m0(conn, c)
    ids = [engine.add(conn, PID, f"fact {i} " + "word " * 40, "NAMING", now_ms=NOW).memory["id"] for i in range(3)]
    text, visible = head.render_m1(conn, c, marks)
    assert visible == ids[:1] and f"#{ids[0]}: fact 0" in text and "fact 1" not in text



def test_m0_and_m1_render_compartment_times_when_temporal_is_on(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    c = ctx(pk, tmp_path, include_history=True, temporal=True)
    day = 86_400_000
    compartments.insert(conn, pk, sequence=0, start=0, end=9, start_message_id=None, end_message_id=None,
                        title="old", p1="old in short", p2="", p3="", p4="", content="old in short", importance=50,
                        episode_type=None, start_time=NOW - 3 * day, end_time=NOW - 2 * day, now_ms=NOW)
    m0, marks = head.render_m0(conn, c)
    rows = compartments.for_head(conn, pk)
    assert m0 == render.render_session_history(rows, 10_000, True, estimate=render.estimate_tokens)
    assert m0 != render.render_session_history(rows, 10_000, False, estimate=render.estimate_tokens)
    compartments.insert(conn, pk, sequence=1, start=10, end=19, start_message_id=None, end_message_id=None,
                        title="new", p1="new in short", p2="", p3="", p4="", content="new in short", importance=50,
                        episode_type=None, start_time=NOW - day, end_time=NOW, now_ms=NOW)
    text, _ = head.render_m1(conn, c, marks)
    assert render.render_new_compartments_p1(compartments.for_head(conn, pk, 0), temporal=True) in text


# --- what the mutation run of head.py left open ------------------------------------------------------


def test_m0_history_decays_to_the_history_budget(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    for i in range(6):
        compartments.insert(conn, pk, sequence=i, start=10 * i, end=10 * i + 9, start_message_id=None,
                            end_message_id=None, title=f"step {i}", p1=f"step {i} " + "detail " * 60,
                            p2=f"step {i} " + "gist " * 20, p3=f"step {i} short", p4=f"s{i}",
                            content=f"step {i}", importance=50, episode_type=None, start_time=None, end_time=None,
                            now_ms=NOW)
    rows = compartments.for_head(conn, pk)
    text, _ = head.render_m0(conn, ctx(pk, tmp_path, include_history=True, history_budget=200))
    assert text == render.render_session_history(rows, 200, False, estimate=render.estimate_tokens)
    assert text != render.render_session_history(rows, None, False, estimate=render.estimate_tokens)


def test_m0_shows_a_fact_until_it_expires(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """Historian facts carry a TTL (180 days for CONFIG_VALUES): m[0] judges it at the pass's time."""
    pk = session(conn)
    day = 86_400_000
    engine.promote_facts(conn, PID, "s", [("CONFIG_VALUES", "port was 80")], NOW - 181 * day)
    engine.promote_facts(conn, PID, "s", [("CONFIG_VALUES", "port is 8080")], NOW - day)
    text, marks = head.render_m0(conn, ctx(pk, tmp_path, include_memory=True))
    assert text == "<project-memory>\n<CONFIG_VALUES>\n#2: port is 8080\n</CONFIG_VALUES>\n</project-memory>"
    assert marks["memory_ids"] == [2] and marks["max_memory_id"] == 2


def test_m0_memory_budget_pays_for_the_block_wrapper(conn: sqlite3.Connection, tmp_path: Path) -> None:
    pk = session(conn)
    a = engine.add(conn, PID, "tests use real SQLite", "NAMING", now_ms=NOW).memory["id"]
    est = render.estimate_tokens
    cost = (est(f"#{a}: tests use real SQLite") + est("<NAMING>\n</NAMING>")
            + est("<project-memory>\n</project-memory>"))
    fits, _ = head.render_m0(conn, ctx(pk, tmp_path, include_memory=True, memory_budget=cost))
    assert fits == f"<project-memory>\n<NAMING>\n#{a}: tests use real SQLite\n</NAMING>\n</project-memory>"
    short, marks = head.render_m0(conn, ctx(pk, tmp_path, include_memory=True, memory_budget=cost - 1))
    assert short == "" and marks["memory_ids"] == []


def test_m1_names_a_replacement_only_while_the_agent_can_see_it(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """A memory superseded by one m[0] showed reads `<superseded by>` when the replacement is still there (untouched,
    or edited since: it is live), and `<removed>` once the replacement itself was archived."""
    pk = session(conn)
    c = ctx(pk, tmp_path, include_memory=True)
    keep, gone = (engine.add(conn, PID, text, "NAMING", now_ms=NOW).memory["id"] for text in ("keep", "gone"))
    edited, merged = (engine.add(conn, PID, text, "PROJECT_RULES", now_ms=NOW).memory["id"]
                      for text in ("edited", "merged"))
    lost, dropped = (engine.add(conn, PID, text, "CONFIG_VALUES", now_ms=NOW).memory["id"]
                     for text in ("lost", "dropped"))
    _, marks = head.render_m0(conn, c)
    assert marks["memory_ids"] == [keep, gone, edited, merged, lost, dropped]
    engine.merge(conn, [keep, gone], now_ms=NOW + 1)  # keep's text: keep logs no mutation of its own
    engine.edit(conn, edited, content="edited again", now_ms=NOW + 1)
    engine.merge(conn, [edited, merged], now_ms=NOW + 1)
    engine.merge(conn, [lost, dropped], now_ms=NOW + 1)
    engine.archive(conn, [lost], now_ms=NOW + 1)  # the replacement is gone too
    text, visible = head.render_m1(conn, c, marks)
    assert text == (
        "<session-history-since>\n<memory-updates>\nThese memories changed since the snapshot below — trust these:\n"
        f'  <superseded id="{gone}" by="{keep}"/>\n'
        f'  <updated id="{edited}" category="PROJECT_RULES">edited again</updated>\n'
        f'  <superseded id="{merged}" by="{edited}"/>\n'
        f'  <removed id="{lost}"/>\n'
        f'  <removed id="{dropped}"/>\n'
        "</memory-updates>\n</session-history-since>")
    assert visible == [keep, edited]


def test_m1_reads_a_changed_memory_at_m0s_time_even_with_a_ttl(conn: sqlite3.Connection, tmp_path: Path) -> None:
    """The changed rows are looked up at m[0]'s time: a row still carrying an unexpired TTL is live. (The engine's
    writers clear the TTL of a row they log a change for, so the TTL is set in SQLite here, as an older writer or a
    future one could leave it.)"""
    pk = session(conn)
    c = ctx(pk, tmp_path, include_memory=True)
    a = engine.add(conn, PID, "port is 80", "CONFIG_VALUES", now_ms=NOW).memory["id"]
    _, marks = head.render_m0(conn, c)
    marks["materialized_at"] = NOW
    engine.edit(conn, a, content="port is 8080", now_ms=NOW + 1)
    with conn:
        conn.execute("UPDATE memories SET expires_at = ? WHERE id = ?", (NOW + 86_400_000, a))
    text, visible = head.render_m1(conn, c, marks)
    assert text == (
        "<session-history-since>\n<memory-updates>\nThese memories changed since the snapshot below — trust these:\n"
        f'  <updated id="{a}" category="CONFIG_VALUES">port is 8080</updated>\n'
        "</memory-updates>\n</session-history-since>")
    assert visible == [a]
    with conn:
        conn.execute("UPDATE memories SET expires_at = ? WHERE id = ?", (NOW, a))  # expired at m[0]'s time
    assert head.render_m1(conn, c, marks)[0].endswith(f'  <removed id="{a}"/>\n</memory-updates>\n'
                                                      "</session-history-since>")
