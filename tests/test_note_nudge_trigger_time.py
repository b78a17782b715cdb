"""When the deferred-notes nudge goes out after a trigger (§2.3), through the real transform on real SQLite, in three
wire formats: the next *new* user message carries it — including one mc first stores on the very pass that first
sees the trigger — never a user message the provider was already sent without it, and never a tool result."""

from __future__ import annotations

import orjson
import pytest
from test_note_nudge_read import FORMATS, MINUTE, NOW, Chat, _escaped, _state, _trigger

from magic_context.memory import notes
from magic_context.tools.reduce import find_session
from magic_context.transform import note_nudge

HARNESSES = list(FORMATS)


def _started(chat: Chat, conn, pid: str) -> int:
    """A served first turn whose newest user message "next" mc stored at NOW, and one session note."""
    chat.add("user", "start").add("say", "hello").add("user", "next")
    assert "deferred_notes" not in chat.serve(NOW)
    pk = find_session(conn, "ses_read", chat.harness)
    notes.add(conn, "recheck the proxy test", project_id=pid, session_pk=pk, now_ms=NOW)
    return pk


def _nudge() -> str:
    return _escaped(notes.nudge_text(1, 0))


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_publish_between_passes_nudges_the_next_request_s_new_user_message(project_db, harness) -> None:
    """The historian published between two requests (`mc wrapup` in the background, or an inline run that ended
    the previous pass) and the next request brings a new user message: that message carries the nudge. mc first
    stored it after the trigger, so no provider has it cached."""
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _started(chat, conn, pid)
    _trigger(conn, pk, NOW + 1)
    chat.add("say", "ok").add("user", "go on")
    served = chat.serve(NOW + MINUTE)
    assert served.count("deferred_notes") == 1
    assert served.index(_nudge()) > served.index("go on") > served.index("next")  # on the new message, not "next"
    assert not note_nudge.pending(_state(conn, pk))
    # Later passes replay it from its anchor: what was served is served again byte for byte, and no second nudge.
    chat.add("say", "done").add("user", "more")
    again = chat.serve(NOW + 2 * MINUTE)
    before, after = orjson.loads(served), orjson.loads(again)
    assert after[:len(before)] == before and again.count("deferred_notes") == 1


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_user_message_already_sent_gets_nothing_nor_does_a_tool_result(project_db, harness) -> None:
    """The request after the trigger re-sends the same newest user message (a retry, or a tool loop): it was sent
    without the nudge, so it stays so; a tool result (a user-role message in Anthropic's format) is not a new user
    message either. The next user message the person types carries it."""
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _started(chat, conn, pid)
    _trigger(conn, pk, NOW + 1)
    assert "deferred_notes" not in chat.serve(NOW + MINUTE)  # the same array again
    chat.add("tool", "bash", {"command": "ls"}, "README.md")
    assert "deferred_notes" not in chat.serve(NOW + 2 * MINUTE)
    assert note_nudge.pending(_state(conn, pk))
    chat.add("say", "listed").add("user", "go on")
    served = chat.serve(NOW + 3 * MINUTE)
    assert served.count("deferred_notes") == 1 and served.index(_nudge()) > served.index("go on")


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_message_stored_while_a_background_run_was_going_is_not_new(project_db, harness) -> None:
    """A background historian stamps its publish with the time its run started, which may be before a pass it
    overlapped: that pass sent its user message without the nudge (it could not see the trigger yet). Re-sent
    on the pass that first sees the trigger, the message was stored after the trigger's stamp but not on this
    pass, so it gets nothing; the next new one does."""
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _started(chat, conn, pid)
    _trigger(conn, pk, NOW - 5_000)  # started 5 s before the pass at NOW, published after it
    assert "deferred_notes" not in chat.serve(NOW + MINUTE)
    chat.add("say", "ok").add("user", "go on")
    assert chat.serve(NOW + 2 * MINUTE).count("deferred_notes") == 1


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_inline_publish_leaves_its_pass_s_user_message_frozen(project_db, harness) -> None:
    """An inline historian publishes during a pass with that pass's clock: the pass's own user message was
    stored at the trigger's time and sent without the nudge; it is not new on the next pass."""
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _started(chat, conn, pid)
    _trigger(conn, pk, NOW)  # the stamp an inline publish in the pass at NOW leaves
    assert "deferred_notes" not in chat.serve(NOW + MINUTE)
    chat.add("say", "ok").add("user", "go on")
    assert chat.serve(NOW + 2 * MINUTE).count("deferred_notes") == 1


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_commit_seen_in_a_pass_nudges_only_the_next_user_message(project_db, harness) -> None:
    """Same-pass detection (`detect`: the trigger is the pass's own clock): that pass's user message counts as
    current at trigger time and gets nothing; the next new user message does."""
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _started(chat, conn, pid)
    chat.add("say", "ok").add("user", "I committed it as 3f2a9c1e, carry on")
    assert "deferred_notes" not in chat.serve(NOW + MINUTE)
    assert _state(conn, pk).get(note_nudge.TRIGGER_KEY) == NOW + MINUTE
    assert note_nudge.pending(_state(conn, pk))
    chat.add("say", "ok").add("user", "go on")
    served = chat.serve(NOW + 2 * MINUTE)
    assert served.count("deferred_notes") == 1 and served.index(_nudge()) > served.index("go on")

