"""§2.3's last delivery condition through the real transform on real SQLite: the deferred-notes nudge is held back
while the agent still sees a `ctx_note read` it ran after the latest note change, and goes out once that read
was dropped from the served context or a note changed after it — in three wire formats, with the tool names each
harness gives an MCP tool."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from magic_context.history import publish
from magic_context.memory import notes
from magic_context.tools.reduce import find_session, queue_drops
from magic_context.transform import note_nudge, pipeline, protocol
from magic_context.wire import model as m

NOW = 1_800_000_000_000
MINUTE = 60_000
SESSION = "ses_read"


# --- the same conversation in each wire format ---------------------------------------------------------------------

def _anthropic_user(text: str, n: int) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def _anthropic_say(text: str, n: int) -> list[dict]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def _anthropic_tool(name: str, args: dict, output: str, n: int) -> list[dict]:
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}]}]


def _openai_user(text: str, n: int) -> list[dict]:
    return [{"role": "user", "content": text}]


def _openai_say(text: str, n: int) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _openai_tool(name: str, args: dict, output: str, n: int) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {
        "name": name, "arguments": orjson.dumps(args).decode()}}]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": output}]


def _oc(role: str, n: int, parts: list[dict]) -> list[dict]:
    mid = f"msg_{n:04d}"
    return [{"info": {"id": mid, "sessionID": SESSION, "role": role, "time": {"created": NOW + n}},
             "parts": [{"id": f"prt_{n:04d}_{i}", "sessionID": SESSION, "messageID": mid, **p}
                       for i, p in enumerate(parts)]}]


def _opencode_user(text: str, n: int) -> list[dict]:
    return _oc("user", n, [{"type": "text", "text": text}])


def _opencode_say(text: str, n: int) -> list[dict]:
    return _oc("assistant", n, [{"type": "text", "text": text}])


def _opencode_tool(name: str, args: dict, output: str, n: int) -> list[dict]:
    return _oc("assistant", n, [{"type": "tool", "callID": f"call_{n}", "tool": name, "state": {
        "status": "completed", "input": args, "output": output, "title": "", "metadata": {},
        "time": {"start": NOW + n, "end": NOW + n}}}])


FORMATS = {  # harness -> (user, say, tool, the name that harness gives the ctx_note tool)
    m.ANTHROPIC: (_anthropic_user, _anthropic_say, _anthropic_tool, "mcp__magic-context__ctx_note"),  # Claude Code
    m.OPENAI: (_openai_user, _openai_say, _openai_tool, "ctx_note"),
    m.OPENCODE: (_opencode_user, _opencode_say, _opencode_tool, "magic-context_ctx_note"),  # OpenCode's MCP naming
}


class Chat:
    """A growing conversation in one wire format, served through `pipeline.run` as its harness sends it."""

    def __init__(self, harness: str, project_dir: Path) -> None:
        self.harness, self.project_dir = harness, project_dir
        self._user, self._say, self._tool, self.note_tool = FORMATS[harness]
        self.native: list[dict] = []
        self.n = 0

    def add(self, kind: str, *args: object) -> Chat:
        self.n += 1
        builder = {"user": self._user, "say": self._say, "tool": self._tool}[kind]
        self.native += builder(*args, self.n)  # type: ignore[operator]
        return self

    def serve(self, now: int) -> str:
        doc = {"messages": self.native, "harness": self.harness, "session_id": SESSION,
               "project_dir": str(self.project_dir), "now": now,
               "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "context_limit": 200_000}}
        result = pipeline.run(protocol.read_input(protocol.parse_document(orjson.dumps(doc)), {}))
        return orjson.dumps(result.document["messages"]).decode()


def _trigger(conn: sqlite3.Connection, pk: int, at: int) -> None:
    conn.execute("BEGIN")
    publish.set_state(conn, pk, publish.NOTE_TRIGGER_KEY, at, at)  # what a historian publish does
    conn.execute("COMMIT")


def _read_then_wait(chat: Chat, conn: sqlite3.Connection, pid: str) -> int:
    """A session with one note and a pending trigger whose agent then ran ctx_note read: served twice with a new
    user message each time, the nudge held back both times. Returns the session pk."""
    chat.add("user", "start").add("say", "hello").add("user", "next")
    chat.serve(NOW)
    pk = find_session(conn, SESSION, chat.harness)
    notes.add(conn, "recheck the proxy test", project_id=pid, session_pk=pk, now_ms=NOW)
    _trigger(conn, pk, NOW + 1)
    assert "deferred_notes" not in chat.serve(NOW + MINUTE)  # the trigger is seen: the current message is cached
    chat.add("tool", chat.note_tool, {"action": "read"}, "## Session Notes\n- **#1**: recheck the proxy test")
    chat.add("say", "noted").add("user", "another")
    assert "deferred_notes" not in chat.serve(NOW + 2 * MINUTE)  # read after the note was written, still visible
    chat.add("say", "ok").add("user", "third")
    assert "deferred_notes" not in chat.serve(NOW + 3 * MINUTE)
    assert note_nudge.pending(_state(conn, pk))  # held back, not handled: it may still go out
    return pk


def _escaped(text: str) -> str:
    """`text` as it appears inside the served JSON."""
    return orjson.dumps(text).decode()[1:-1]


def _state(conn: sqlite3.Connection, pk: int):
    from magic_context.transform.state import SessionState

    return SessionState.load(conn, pk)


@pytest.mark.parametrize("harness", list(FORMATS))
def test_a_visible_read_after_the_latest_change_holds_the_nudge_until_a_note_changes(project_db, harness) -> None:
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _read_then_wait(chat, conn, pid)
    notes.add(conn, "and the flaky retry", project_id=pid, session_pk=pk, now_ms=NOW + 3 * MINUTE + 1)
    chat.add("say", "ok").add("user", "fourth")
    served = chat.serve(NOW + 4 * MINUTE)
    assert served.count("deferred_notes") == 1 and _escaped(notes.nudge_text(2, 0)) in served
    assert not note_nudge.pending(_state(conn, pk))


@pytest.mark.parametrize("harness", list(FORMATS))
def test_the_nudge_goes_out_once_the_read_was_dropped_from_context(project_db, harness) -> None:
    proj, pid, conn = project_db
    chat = Chat(harness, proj)
    pk = _read_then_wait(chat, conn, pid)
    (number,) = [n for (n,) in conn.execute("SELECT tag_number FROM tags WHERE session_pk = ? AND tool_name LIKE "
                                            "'%ctx_note'", (pk,))]
    queue_drops(conn, pk, str(number), protected_tags=0, now_ms=NOW + 3 * MINUTE, forced=True)
    conn.commit()
    chat.add("say", "ok").add("user", "fourth")
    served = chat.serve(NOW + 20 * MINUTE)  # the cache TTL expired: this pass busts and the queued drop lands
    assert "## Session Notes" not in served  # the read's output is no longer served
    assert served.count("deferred_notes") == 1 and _escaped(notes.nudge_text(1, 0)) in served


def test_a_read_before_the_latest_change_or_a_write_does_not_hold_it(project_db) -> None:
    proj, pid, conn = project_db
    chat = Chat(m.OPENAI, proj)
    chat.add("user", "start").add("say", "hello").add("user", "next")
    chat.serve(NOW)
    pk = find_session(conn, SESSION, m.OPENAI)
    chat.add("tool", "ctx_note", {}, "## Notes\n\nNo session notes or smart notes.")  # no args: a read
    chat.add("tool", "ctx_note", {"content": "recheck the proxy test"}, "Saved session note #1.")  # a write
    chat.add("say", "saved").add("user", "go on")
    chat.serve(NOW + MINUTE)  # the read was first seen here, before the note below
    notes.add(conn, "recheck the proxy test", project_id=pid, session_pk=pk, now_ms=NOW + MINUTE + 1)
    _trigger(conn, pk, NOW + MINUTE + 2)
    chat.serve(NOW + 2 * MINUTE)
    chat.add("say", "ok").add("user", "more")
    assert chat.serve(NOW + 3 * MINUTE).count("deferred_notes") == 1


@pytest.mark.parametrize(("name", "matches"), [
    ("ctx_note", True), ("mcp__magic-context__ctx_note", True), ("magic-context_ctx_note", True),
    ("magic_context.ctx_note", True), ("CTX_NOTE", True), ("ctx_notes", False), ("myctx_note", False),
    ("ctx_note_read", False), (None, False), ("", False),
])
def test_the_tool_is_recognized_under_each_harness_naming(name, matches) -> None:
    assert note_nudge.is_note_tool(name) is matches


@pytest.mark.parametrize(("args", "reads"), [
    ({"action": "read"}, True), ({"action": "READ", "filter": "ready"}, True), ({}, True), (None, True),
    ({"content": "  "}, True), ({"content": "x"}, False), ({"action": "write", "content": "x"}, False),
    ({"action": "dismiss", "note_id": 1}, False), ("garbled", False),
])
def test_which_calls_are_reads(args, reads) -> None:
    assert note_nudge.is_read(args) is reads


def test_only_an_answered_successful_undropped_read_is_visible() -> None:
    from magic_context.transform import tagger
    from magic_context.transform.tags import DROPPED

    def arc(n: int, name: str, args: dict, *, output: str | None = "## Notes", error: bool = False) -> list[m.Message]:
        call = m.Message(f"a{n}", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id=f"c{n}", tool_name=name, input=args,
                                                        key="p0")], ordinal=2 * n)
        if output is None:
            return [call]
        return [call, m.Message(f"r{n}", m.TOOL, [m.Block(m.TOOL_RESULT, text=output, tool_id=f"c{n}", tool_name=name,
                                                            is_error=error, key="p0")], ordinal=2 * n + 1)]

    def visible(*arcs: list[m.Message]) -> int | None:
        messages = [msg for a in arcs for msg in a]
        sites, _new, _counter = tagger.assign(messages, {}, 0, len)
        return note_nudge.visible_read(sites, messages)

    read, other = arc(1, "mcp__mc__ctx_note", {"action": "read"}), arc(2, "bash", {"command": "ls"})
    assert visible(read, other) == 2  # the ordinal of the message holding the call
    assert visible(read, arc(3, "ctx_note", {}), other) == 6  # the newest read
    assert visible(arc(1, "ctx_note", {"action": "read"}, error=True)) is None  # the read failed
    assert visible(arc(1, "ctx_note", {"action": "read"}, output=None)) is None  # not answered (yet)
    assert visible(arc(1, "ctx_note", {"action": "write", "content": "x"})) is None
    messages = arc(1, "ctx_note", {"action": "read"})
    sites, _new, _counter = tagger.assign(messages, {}, 0, len)
    sites[0].tag.status = DROPPED
    assert note_nudge.visible_read(sites, messages) is None
