"""Notes on a real SQLite database: scopes, statuses, conditions, dismiss, the count nudge text."""

from __future__ import annotations

import sqlite3

import pytest

from magic_context.errors import BadInput, NotFound
from magic_context.memory import notes
from magic_context.store import raw as raw_store

P = "git:proj"
NOW = 1_700_000_000_000


def _session(conn: sqlite3.Connection, sid: str, project_id: str = P) -> int:
    return raw_store.ensure_session(conn, "opencode", sid, project_id=project_id, project_dir="/p", now_ms=NOW)


def test_scopes_and_listing(conn) -> None:
    s1, s2 = _session(conn, "s1"), _session(conn, "s2")
    mine = notes.add(conn, "check the flaky test", project_id=P, session_pk=s1, now_ms=NOW)
    theirs = notes.add(conn, "other session's", project_id=P, session_pk=s2, now_ms=NOW)
    shared = notes.add(conn, "bump the pin", project_id=P, session_pk=s2, scope=notes.PROJECT, now_ms=NOW)
    smart = notes.add(conn, "drop the shim", project_id=P, scope=notes.PROJECT,
                      surface_condition="when httpx 1.0 is out", now_ms=NOW)
    foreign = notes.add(conn, "elsewhere", project_id="git:other", scope=notes.PROJECT, now_ms=NOW)
    assert (mine["type"], mine["status"], smart["status"]) == ("session", "active", "pending")
    seen = [n["id"] for n in notes.list_notes(conn, session_pk=s1, project_id=P)]
    assert seen == [smart["id"], shared["id"], mine["id"]]  # newest first, not s2's session note
    assert theirs["id"] not in seen and foreign["id"] not in seen
    assert [n["id"] for n in notes.list_notes(conn, project_id=P)] == [smart["id"], shared["id"], theirs["id"],
                                                                       mine["id"]]
    assert notes.counts(conn, session_pk=s1, project_id=P) == {"active": 2, "pending": 1, "ready": 0, "dismissed": 0}


def test_a_note_written_from_a_session_is_anchored_at_its_last_message(conn) -> None:
    """§2.1: `add` itself stores the writer session's last ordinal (what `mc note add` and ctx_note share)."""
    from magic_context.wire.model import TEXT, USER, Block, Message

    s1, empty = _session(conn, "s1"), _session(conn, "s2")
    raw_store.sync(conn, s1, [Message(f"m{i}", USER, [Block(TEXT, text=f"say {i}")], raw={"n": i}) for i in range(6)],
                   now_ms=NOW)
    assert notes.add(conn, "mine", project_id=P, session_pk=s1, now_ms=NOW)["anchor_ordinal"] == 5
    shared = notes.add(conn, "for all", project_id=P, session_pk=s1, scope=notes.PROJECT, now_ms=NOW)
    assert shared["anchor_ordinal"] == 5  # a project note its session wrote: anchored in that session
    assert notes.add(conn, "no history yet", project_id=P, session_pk=empty, now_ms=NOW)["anchor_ordinal"] is None
    assert notes.add(conn, "outside", project_id=P, scope=notes.PROJECT, now_ms=NOW)["anchor_ordinal"] is None


def test_condition_lifecycle(conn) -> None:
    smart = notes.add(conn, "upgrade", project_id=P, scope=notes.PROJECT, surface_condition="v2 ships", now_ms=NOW)
    notes.mark_checked(conn, smart["id"], now_ms=NOW + 1)
    ready = notes.mark_ready(conn, smart["id"], "v2.0.0 tagged", now_ms=NOW + 2)
    assert (ready["status"], ready["ready_reason"], ready["ready_at"], ready["last_checked_at"]) == \
        ("ready", "v2.0.0 tagged", NOW + 2, NOW + 2)
    with pytest.raises(NotFound):
        notes.mark_ready(conn, smart["id"], "again")


def test_dismiss_is_scoped_and_once(conn) -> None:
    s1, s2 = _session(conn, "s1"), _session(conn, "s2")
    note = notes.add(conn, "x", project_id=P, session_pk=s1, now_ms=NOW)
    with pytest.raises(NotFound, match=f"note #{note['id']} not found among session s2's notes and project {P}'s"):
        notes.dismiss(conn, note["id"], session_pk=s2, project_id=P)
    done = notes.dismiss(conn, note["id"], session_pk=s1, project_id=P, now_ms=NOW + 5)
    assert (done["status"], done["dismissed_at"]) == ("dismissed", NOW + 5)
    with pytest.raises(NotFound, match=f"note #{note['id']} is already dismissed"):
        notes.dismiss(conn, note["id"], session_pk=s1, project_id=P)
    with pytest.raises(NotFound, match="note #999 not found among"):
        notes.dismiss(conn, 999, project_id=P)
    assert notes.list_notes(conn, session_pk=s1, project_id=P) == []
    assert len(notes.list_notes(conn, session_pk=s1, project_id=P, statuses=["dismissed"])) == 1


def test_dismiss_reaches_exactly_what_list_shows(conn) -> None:
    """The scope rule the CLI and ctx_note share: a project (all its notes) or a session (its own and its
    project's project notes); never another project's note, never unscoped, and a refusal writes nothing."""
    s1, s2 = _session(conn, "s1"), _session(conn, "s2", project_id="git:other")
    foreign = notes.add(conn, "elsewhere", project_id="git:other", scope=notes.PROJECT, now_ms=NOW)
    shared = notes.add(conn, "for all", project_id=P, scope=notes.PROJECT, now_ms=NOW)
    mine = notes.add(conn, "s1's", project_id=P, session_pk=s1, now_ms=NOW)
    with pytest.raises(BadInput, match="dismiss needs a scope"):
        notes.dismiss(conn, foreign["id"])
    with pytest.raises(NotFound, match=f"not found among project {P}'s notes"):
        notes.dismiss(conn, foreign["id"], project_id=P, now_ms=NOW + 1)
    with pytest.raises(NotFound, match="not found among session s2's notes and project git:other's project notes"):
        notes.dismiss(conn, shared["id"], session_pk=s2, project_id="git:other")
    assert notes.list_notes(conn, project_id="git:other")[0] == foreign  # untouched: no status, no updated_at
    for note, scope in ((mine, {"project_id": P}), (shared, {"session_pk": s1, "project_id": P})):
        listed = [n["id"] for n in notes.list_notes(conn, **scope)]
        assert note["id"] in listed
        assert notes.dismiss(conn, note["id"], **scope, now_ms=NOW + 2)["status"] == "dismissed"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"content": "  "}, "content: note content is empty"),
    ({"content": "ok", "surface_condition": " "}, "surface_condition"),
    ({"content": "ok", "scope": "global"}, "unknown note scope"),
    ({"content": "x" * (notes.MAX_CONTENT_BYTES + 1)}, "over the"),
])
def test_bad_note_input_writes_nothing(conn, kwargs, match) -> None:
    pk = _session(conn, "s1")
    with pytest.raises(BadInput, match=match):
        notes.add(conn, project_id=P, session_pk=pk, now_ms=NOW, **kwargs)
    with pytest.raises(BadInput, match="needs a session"):
        notes.add(conn, "ok", project_id=P, now_ms=NOW)
    with pytest.raises(BadInput, match="unknown note status"):
        notes.list_notes(conn, project_id=P, statuses=["open"])
    assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0


def test_nudge_text() -> None:
    assert notes.nudge_text(0, 0) == ""
    assert notes.nudge_text(1, 0) == ('\n\n<instruction name="deferred_notes">You have 1 deferred note. '
                                      "Review with ctx_note read — some may be actionable now.</instruction>")
    assert "You have 2 deferred notes and 1 ready smart note." in notes.nudge_text(2, 1)
    assert "You have 3 ready smart notes." in notes.nudge_text(0, 3)
