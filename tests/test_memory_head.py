"""Memories in the head through the real transform: budgeted `<project-memory>` in m[0], changes as m[1]
updates, m[0] byte-stable until a HARD fold, defer passes byte-identical, visible ids recorded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from magic_context.memory import engine
from magic_context.store import memories as store
from magic_context.tools.reduce import find_session
from magic_context.transform import head, pipeline, protocol

NOW = 1_800_000_000_000
MINUTE = 60_000
LIMIT = 200_000


def serve(project_dir: Path, messages: list[dict], now: int, *, limit: int = LIMIT,
          session: str = "ses_mem") -> tuple[bytes, dict]:
    doc = {"messages": messages, "harness": "openai", "session_id": session, "project_dir": str(project_dir),
           "now": now, "model": {"provider": "p", "id": "model", "context_limit": limit}}
    result = pipeline.run(protocol.read_input(protocol.parse_document(orjson.dumps(doc)), {}))
    return orjson.dumps(result.document["messages"]), result.report


def heads(served: bytes) -> tuple[str, str]:
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
             for m in orjson.loads(served)[:2]]
    return texts[0], texts[1]


def chat(n: int) -> list[dict]:
    out = []
    for i in range(n):
        out += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    return out


def _visible(conn: sqlite3.Connection) -> list[int]:
    return store.visible_ids(conn, find_session(conn, "ses_mem"))


def test_state_key_matches_the_store() -> None:
    from magic_context import memory

    assert head.VISIBLE_MEMORY_KEY == store.VISIBLE_STATE_KEY
    assert memory.visible_ids is store.visible_ids  # the seam the search engine calls


def test_memories_in_m0_then_updates_in_m1_and_m0_stays_until_a_fold(project_db) -> None:
    proj, pid, conn = project_db
    a = engine.add(conn, pid, "tests run on real SQLite", "PROJECT_RULES", now_ms=NOW).memory["id"]
    b = engine.add(conn, pid, "the proxy binds loopback", "ARCHITECTURE", now_ms=NOW).memory["id"]
    c = engine.add(conn, pid, "use snake_case & <no> camels", "NAMING", now_ms=NOW).memory["id"]
    engine.add(conn, "git:someone-else", "not ours", "NAMING", now_ms=NOW)

    first, report = serve(proj, chat(2), NOW)
    assert report["pass"] == "fold"
    m0, m1 = heads(first)
    assert m0.endswith(
        f"<project-memory>\n<PROJECT_RULES>\n#{a}: tests run on real SQLite\n</PROJECT_RULES>\n"
        f"<ARCHITECTURE>\n#{b}: the proxy binds loopback\n</ARCHITECTURE>\n"
        f"<NAMING>\n#{c}: use snake_case &amp; &lt;no&gt; camels\n</NAMING>\n</project-memory>")
    assert "not ours" not in m0 and m1.startswith("<session-history-since>(no new")
    assert _visible(conn) == [a, b, c]

    # Changes between passes: an edit, an archive, a merge, a new memory.
    d = engine.add(conn, pid, "ports are never hard-coded", "CONSTRAINTS", now_ms=NOW + 1).memory["id"]
    engine.edit(conn, a, content="tests run on real SQLite in tmp dirs", now_ms=NOW + 1)
    engine.archive(conn, [c], now_ms=NOW + 1)
    e = engine.add(conn, pid, "the proxy binds 127.0.0.1", "ARCHITECTURE", now_ms=NOW + 1).memory["id"]
    merged = engine.merge(conn, [b, e], content="the proxy binds 127.0.0.1 only", now_ms=NOW + 1).memory["id"]

    # A defer pass replays the stored head byte for byte.
    again, report = serve(proj, chat(3), NOW + MINUTE)
    assert report["pass"] == "defer"
    assert heads(again) == (m0, m1)
    assert first[:-1] == again[:len(first) - 1]  # the served prefix is unchanged

    # A SOFT (execute) pass re-renders m[1] only: ~7 000 tokens of a 10 000-token window, over the 65% an
    # OpenAI Chat caller gets there (scheduler.default_threshold), under the 85% force band.
    big = [*chat(3), {"role": "user", "content": "x " * 7000}]
    soft, report = serve(proj, big, NOW + 2 * MINUTE, limit=10_000)
    assert report["pass"] == "execute", report
    soft_m0, soft_m1 = heads(soft)
    assert soft_m0 == m0
    assert soft_m1 == (
        "<session-history-since>\n<memory-updates>\n"
        "These memories changed since the snapshot below — trust these:\n"
        f'  <updated id="{a}" category="PROJECT_RULES">tests run on real SQLite in tmp dirs</updated>\n'
        f'  <superseded id="{b}" by="{merged}"/>\n'
        f'  <removed id="{c}"/>\n'
        "</memory-updates>\n"
        f"<new-memories>\n<ARCHITECTURE>\n#{merged}: the proxy binds 127.0.0.1 only\n</ARCHITECTURE>\n"
        f"<CONSTRAINTS>\n#{d}: ports are never hard-coded\n</CONSTRAINTS>\n</new-memories>\n"
        "</session-history-since>")
    assert _visible(conn) == sorted([a, d, merged])

    # Defer passes after it replay the new m[1] as stored.
    assert heads(serve(proj, big, NOW + 3 * MINUTE, limit=10_000)[0]) == (soft_m0, soft_m1)

    # The cache TTL expires: a HARD fold folds everything into m[0] and resets m[1].
    hard, report = serve(proj, chat(3), NOW + 20 * MINUTE)
    assert report["pass"] == "fold"
    hard_m0, hard_m1 = heads(hard)
    assert f"#{a}: tests run on real SQLite in tmp dirs" in hard_m0 and f"#{merged}: " in hard_m0
    assert f"#{b}:" not in hard_m0 and f"#{c}:" not in hard_m0 and f"#{e}:" not in hard_m0
    assert hard_m1.startswith("<session-history-since>(no new")
    assert _visible(conn) == sorted([a, d, merged])


def test_budget_skips_the_memory_that_does_not_fit_and_goes_on(project_db, tmp_path) -> None:
    proj, pid, conn = project_db
    (proj / ".magic-context.toml").write_text("[memory]\ninjection_budget_tokens = 500\n")
    big = engine.add(conn, pid, "big " * 600, "ARCHITECTURE", importance=90, now_ms=NOW).memory["id"]
    small = engine.add(conn, pid, "small fact", "NAMING", importance=10, now_ms=NOW).memory["id"]
    m0, _ = heads(serve(proj, chat(1), NOW)[0])
    assert f"#{small}: small fact" in m0 and f"#{big}:" not in m0
    assert _visible(conn) == [small]


def test_expired_and_archived_memories_stay_out(project_db) -> None:
    proj, pid, conn = project_db
    engine.promote_facts(conn, pid, "s", [("CONFIG_VALUES", "old value is 3")], NOW - 181 * 86_400_000)
    gone = engine.add(conn, pid, "archived fact", "NAMING", now_ms=NOW).memory["id"]
    engine.archive(conn, [gone], now_ms=NOW)
    m0, _ = heads(serve(proj, chat(1), NOW)[0])
    assert "<project-memory>" not in m0 and _visible(conn) == []


def test_memory_disabled_renders_nothing(project_db) -> None:
    proj, pid, conn = project_db
    (proj / ".magic-context.toml").write_text("[memory]\nenabled = false\n")
    engine.add(conn, pid, "hidden", "NAMING", now_ms=NOW)
    m0, _ = heads(serve(proj, chat(1), NOW)[0])
    assert "hidden" not in m0 and _visible(conn) == []


def test_status_counts_memories_and_notes(project_db) -> None:
    from magic_context import status
    from magic_context.memory import notes

    proj, pid, conn = project_db
    keep = engine.add(conn, pid, "kept", "NAMING", permanent=True, now_ms=NOW).memory["id"]
    gone = engine.add(conn, pid, "gone", "NAMING", now_ms=NOW).memory["id"]
    engine.add(conn, pid, "live", "NAMING", now_ms=NOW)
    engine.archive(conn, [gone], now_ms=NOW)
    serve(proj, chat(1), NOW)
    pk = find_session(conn, "ses_mem")
    notes.add(conn, "look again", project_id=pid, session_pk=pk, now_ms=NOW)
    notes.add(conn, "later", project_id=pid, scope=notes.PROJECT, surface_condition="when v2 ships", now_ms=NOW)
    data = status.status(conn, session_id="ses_mem")
    assert data["memories"] == 2 and keep
    assert {k: data["memory"][k] for k in ("active", "permanent", "archived", "expired")} == \
        {"active": 1, "permanent": 1, "archived": 1, "expired": 0}
    assert (data["notes"]["active"], data["notes"]["pending"]) == (1, 1)


def test_notes_nudge_after_a_publish_on_the_next_new_user_message(project_db) -> None:
    from magic_context.history import publish
    from magic_context.memory import notes
    from magic_context.transform import note_nudge

    assert publish.NOTE_TRIGGER_KEY == note_nudge.TRIGGER_KEY
    proj, pid, conn = project_db
    conv = [*chat(1), {"role": "user", "content": "next"}]
    serve(proj, conv, NOW)
    pk = find_session(conn, "ses_mem")
    notes.add(conn, "recheck the proxy test", project_id=pid, session_pk=pk, now_ms=NOW)
    notes.add(conn, "ship it", project_id=pid, scope=notes.PROJECT, surface_condition="when CI is green",
              now_ms=NOW)
    conn.execute("BEGIN")
    publish.set_state(conn, pk, publish.NOTE_TRIGGER_KEY, NOW + 1, NOW + 1)  # what a historian publish does
    conn.execute("COMMIT")
    nudge = notes.nudge_text(1, 0)

    def last_text(served: bytes) -> str:
        return orjson.loads(served)[-1]["content"]

    first, _ = serve(proj, conv, NOW + MINUTE)  # the trigger is seen; the current user message is cached
    assert nudge not in first.decode()
    conv += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "another"}]
    second, _ = serve(proj, conv, NOW + 2 * MINUTE)
    assert last_text(second).endswith("another" + nudge)
    assert second.decode().count("deferred_notes") == 1
    conv += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "third"}]
    third, report = serve(proj, conv, NOW + 3 * MINUTE)
    assert report["pass"] == "defer" and third.decode().count("deferred_notes") == 1
    assert third.startswith(second[:-1])  # the nudged message replays byte for byte
    assert not last_text(third).endswith(nudge)
    # Nothing to read: a later trigger sends nothing.
    for note in notes.list_notes(conn, session_pk=pk, project_id=pid):
        notes.dismiss(conn, note["id"], session_pk=pk, project_id=pid)
    conn.execute("BEGIN")
    publish.set_state(conn, pk, publish.NOTE_TRIGGER_KEY, NOW + 99, NOW + 99)
    conn.execute("COMMIT")
    conv += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "fourth"}]
    serve(proj, conv, NOW + 30 * MINUTE)
    conv += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "fifth"}]
    assert serve(proj, conv, NOW + 31 * MINUTE)[0].decode().count("deferred_notes") == 1


@pytest.mark.parametrize(("said", "fires"), [
    ({"role": "assistant", "content": "Committed the fix as 3f9a2c1d."}, True),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "bash", "arguments": '{"command": "git cherry-pick 4be5c6d7a"}'}}]}, True),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "todowrite", "arguments": '{"todos": [{"content": "a", "status": "completed"}, '
                                          '{"content": "b", "status": "cancelled"}]}'}}]}, True),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "todowrite", "arguments": '{"todos": [{"content": "a", "status": "completed"}, '
                                          '{"content": "b", "status": "in_progress"}]}'}}]}, False),
    ({"role": "assistant", "content": "The build number is 1234567 and deadbeef is a word."}, False),
])
def test_a_commit_or_a_finished_todo_list_in_new_messages_triggers_the_notes_nudge(project_db, said, fires) -> None:
    """§2.3's other triggers: a commit in the tail, or every todo done. The nudge then goes out like after a
    publish — on the next new user message, never on the message current when the trigger was seen."""
    from magic_context.memory import notes

    proj, pid, conn = project_db
    conv = [*chat(1), {"role": "user", "content": "next"}]
    serve(proj, conv, NOW)
    pk = find_session(conn, "ses_mem")
    notes.add(conn, "recheck the proxy test", project_id=pid, session_pk=pk, now_ms=NOW)
    conv += [said]
    if said.get("tool_calls"):
        conv += [{"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    first, _ = serve(proj, conv, NOW + MINUTE)  # the trigger is seen here
    assert "deferred_notes" not in first.decode()
    conv += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "another"}]
    second, _ = serve(proj, conv, NOW + 2 * MINUTE)
    assert orjson.loads(second)[-1]["content"].endswith(notes.nudge_text(1, 0)) is fires
