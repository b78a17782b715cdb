"""transform/state.py (which keys a pass writes back) and transform/note_nudge.py (when the deferred-notes nudge
fires and its exact text), on a real database."""

from __future__ import annotations

import sqlite3

from magic_context.memory import notes
from magic_context.store import raw as raw_store
from magic_context.store import state as state_store
from magic_context.transform import note_nudge
from magic_context.transform.state import SessionState
from magic_context.wire import model as m

NOW = 1_800_000_000_000
PID = "git:nudge-test"


def session(conn: sqlite3.Connection) -> int:
    return raw_store.ensure_session(conn, "pi", "nudge-session", project_id=PID, project_dir="/p", now_ms=1)


# --- SessionState ----------------------------------------------------------------------------------


def test_state_writes_only_changed_keys(conn: sqlite3.Connection) -> None:
    pk = session(conn)
    state_store.write_state(conn, pk, {"a": 1, "b": {"x": [1]}}, 5)
    state = SessionState.load(conn, pk)
    assert (state.session_pk, state.get("a"), state.get("b"), state.get("c"), state.get("c", 7)) == (
        pk, 1, {"x": [1]}, None, 7)
    state.set("a", 1)
    state.set("b", {"x": [1]})
    assert not state.dirty
    assert state.save(conn, 6) == 0
    state.set("c", None)  # a new key is written even when its value equals the default
    state.set("a", 2)
    assert state.dirty
    assert state.save(conn, 7) == 2 and not state.dirty
    assert state_store.load_state(conn, pk) == {"a": 2, "b": {"x": [1]}, "c": None}
    assert state.save(conn, 8) == 0


# --- note nudge text -------------------------------------------------------------------------------


def test_nudge_text() -> None:
    assert note_nudge.text(0, 0) == ""
    assert note_nudge.text(1, 0) == ('\n\n<instruction name="deferred_notes">You have 1 deferred note. '
                                     "Review with ctx_note read — some may be actionable now.</instruction>")
    assert note_nudge.text(2, 1) == ('\n\n<instruction name="deferred_notes">You have 2 deferred notes and 1 '
                                     "ready smart note. Review with ctx_note read — some may be actionable now."
                                     "</instruction>")
    assert "You have 3 ready smart notes." in note_nudge.text(0, 3)
    assert note_nudge.text(1, 0) == notes.nudge_text(1, 0)  # the tool's own wording


def test_pending_until_the_trigger_is_handled() -> None:
    assert not note_nudge.pending(SessionState(1, {}))
    assert not note_nudge.pending(SessionState(1, {note_nudge.TRIGGER_KEY: 0}))
    assert note_nudge.pending(SessionState(1, {note_nudge.TRIGGER_KEY: 5}))
    assert note_nudge.pending(SessionState(1, {note_nudge.TRIGGER_KEY: 5, note_nudge.STATE_KEY: {"handled": 4}}))
    assert not note_nudge.pending(SessionState(1, {note_nudge.TRIGGER_KEY: 5, note_nudge.STATE_KEY: {"handled": 5}}))


# --- note nudge step -------------------------------------------------------------------------------


def turn(*ids: str) -> list[m.Message]:
    return [m.Message(i, m.USER if i.startswith("u") else m.ASSISTANT, [m.Block(m.TEXT, text=i, key="p0")])
            for i in ids]


def test_step_fires_once_on_a_new_user_message_after_the_trigger(conn: sqlite3.Connection) -> None:
    pk = session(conn)
    notes.add(conn, "look again", project_id=PID, session_pk=pk, now_ms=NOW)
    state = SessionState(pk, {note_nudge.TRIGGER_KEY: 100})

    def step(kept: list[m.Message], now: int) -> str:
        return note_nudge.step(conn, state, kept, sites=[], messages=kept, session_pk=pk, project_id=PID, now_ms=now)

    head = m.Message("m1", m.USER, [m.Block(m.TEXT, text="head", key="p0")], synthetic=True)
    assert step([*turn("u1"), head], NOW) == ""  # first sight: u1 is already cached
    assert state.get(note_nudge.STATE_KEY) == {"trigger": 100, "user": "u1"}
    assert step(turn("u1"), NOW) == ""  # still the same user message
    assert step(turn("u1", "a1"), NOW) == ""  # the newest message is not a user message
    assert step([], NOW) == ""
    assert step(turn("u1", "a1", "u2"), NOW) == note_nudge.text(1, 0)
    assert state.get(note_nudge.STATE_KEY) == {"trigger": 100, "user": "u2", "handled": 100, "delivered_at": NOW}
    assert not note_nudge.pending(state)


def test_step_waits_out_the_cooldown_and_skips_when_nothing_to_read(conn: sqlite3.Connection) -> None:
    pk = session(conn)
    note = notes.add(conn, "look again", project_id=PID, session_pk=pk, now_ms=NOW)
    last = NOW - note_nudge.COOLDOWN_MS + 1
    state = SessionState(pk, {note_nudge.TRIGGER_KEY: 200,
                              note_nudge.STATE_KEY: {"trigger": 200, "user": "u1", "delivered_at": last}})

    def step(now: int, *ids: str) -> str:
        return note_nudge.step(conn, state, turn(*ids), sites=[], messages=[], session_pk=pk, project_id=PID,
                               now_ms=now)

    assert step(NOW, "u1", "a1", "u2") == ""  # 15 minutes less 1 ms since the last one
    assert state.get(note_nudge.STATE_KEY) == {"trigger": 200, "user": "u2", "delivered_at": last}  # u2 went out bare
    assert step(NOW + 1, "u1", "a1", "u2") == ""  # the cooldown is over, but u2 was sent (and cached) without it
    assert step(NOW + 1, "u1", "a1", "u2", "a2", "u3") == note_nudge.text(1, 0)
    state = SessionState(pk, {note_nudge.TRIGGER_KEY: 200,
                              note_nudge.STATE_KEY: {"trigger": 200, "user": "u1", "delivered_at": last}})
    notes.dismiss(conn, note["id"], session_pk=pk, project_id=PID)
    assert step(NOW + 1, "u1", "a1", "u2") == ""  # the cooldown is over, but there is nothing to read
    assert state.get(note_nudge.STATE_KEY) == {"trigger": 200, "user": "u2", "delivered_at": last, "handled": 200}


def test_step_takes_a_tool_result_for_no_user_message(conn: sqlite3.Connection) -> None:
    """Anthropic's tool results travel in user-role messages: not one the person sent, so no nudge lands there."""
    pk = session(conn)
    notes.add(conn, "look again", project_id=PID, session_pk=pk, now_ms=NOW)
    state = SessionState(pk, {note_nudge.TRIGGER_KEY: 1, note_nudge.STATE_KEY: {"trigger": 1, "user": "u1"}})
    result = m.Message("u2", m.USER, [m.Block(m.TOOL_RESULT, text="ok", tool_id="c1", key="p0"),
                                      m.Block(m.TEXT, text="<system-reminder>", key="p1")])
    assert note_nudge.step(conn, state, [*turn("u1", "a1"), result], sites=[], messages=[], session_pk=pk,
                           project_id=PID, now_ms=NOW) == ""
    assert note_nudge.pending(state)
    assert note_nudge.step(conn, state, [*turn("u1", "a1"), result, *turn("a2", "u3")], sites=[], messages=[],
                           session_pk=pk, project_id=PID, now_ms=NOW) == note_nudge.text(1, 0)


def test_step_without_an_earlier_delivery_has_no_cooldown(conn: sqlite3.Connection) -> None:
    pk = session(conn)
    notes.add(conn, "look again", project_id=PID, session_pk=pk, now_ms=0)
    state = SessionState(pk, {note_nudge.TRIGGER_KEY: 1, note_nudge.STATE_KEY: {"trigger": 1, "user": "u1"}})
    assert note_nudge.step(conn, state, turn("u1", "a1", "u2"), sites=[], messages=[], session_pk=pk, project_id=PID,
                           now_ms=0) != ""


def test_step_counts_the_notes_this_session_sees(conn: sqlite3.Connection) -> None:
    """Its own session notes and the project's notes (a ready smart note included), never another session's."""
    pk = session(conn)
    other = raw_store.ensure_session(conn, "pi", "someone-else", project_id=PID, project_dir="/p", now_ms=1)

    def fire() -> str:
        state = SessionState(pk, {note_nudge.TRIGGER_KEY: 1, note_nudge.STATE_KEY: {"trigger": 1, "user": "u1"}})
        return note_nudge.step(conn, state, turn("u1", "a1", "u2"), sites=[], messages=[], session_pk=pk,
                               project_id=PID, now_ms=NOW)

    notes.add(conn, "not mine", project_id=PID, session_pk=other, now_ms=NOW)
    assert fire() == ""
    notes.add(conn, "for the project", project_id=PID, scope=notes.PROJECT, now_ms=NOW)
    assert fire() == note_nudge.text(1, 0)
    smart = notes.add(conn, "ship it", project_id=PID, scope=notes.PROJECT, surface_condition="when CI is green",
                      now_ms=NOW)
    notes.mark_ready(conn, smart["id"], "CI is green", now_ms=NOW)
    assert fire() == note_nudge.text(1, 1)
