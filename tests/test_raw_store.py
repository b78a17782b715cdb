"""store/raw.py: append-only raw history, divergence handling, idempotent sync."""

from __future__ import annotations

import itertools
import sqlite3
import zlib

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magic_context import tokens
from magic_context.store import raw
from magic_context.store.db import open_db
from magic_context.wire import pi
from magic_context.wire.identity import IdDeriver, content_hash
from magic_context.wire.model import COMPACTION_SUMMARY, Block, Message

_session_ids = itertools.count()


def new_session(conn: sqlite3.Connection) -> int:
    return raw.ensure_session(conn, "pi", f"s{next(_session_ids)}", project_dir="/p", now_ms=1)


def msg(key: str, version: int = 0, *, compaction: str | None = None) -> Message:
    role = ("user", "assistant")[sum(map(ord, key)) % 2]
    return Message(id=key, role=role, raw={"role": role, "content": [{"type": "text", "text": f"{key} v{version}"}]},
                   compaction=compaction)


def msgs(n: int, prefix: str = "m", start: int = 0) -> list[Message]:
    return [msg(f"{prefix}{i}") for i in range(start, start + n)]


def derived(raws: list[dict]) -> list[Message]:
    """Messages of a format without ids (Anthropic/OpenAI/Pi arrays): ids derived from content."""
    ids = IdDeriver()
    return [Message(id=ids.next_id(r), role=r["role"], raw=r) for r in raws]


def delta(conn: sqlite3.Connection, fn):
    before = conn.total_changes
    result = fn()
    return result, conn.total_changes - before


def check_consistent(conn: sqlite3.Connection, pk: int, messages: list[Message]) -> None:
    """Live ordinals unique and contiguous; each input message is live at its ordinal with its content."""
    live = raw.live_index(conn, pk)
    ordinals = [row[0] for row in live]
    assert ordinals == list(range(ordinals[0], ordinals[0] + len(ordinals))) if ordinals else True
    assert len({row[1] for row in live}) == len(live)
    at = {o: (key, digest) for o, key, digest, _ in live}
    assert len({m.ordinal for m in messages}) == len(messages)
    for m in messages:
        assert m.ordinal in at, f"{m.id} has no live row at {m.ordinal}"
        assert at[m.ordinal][1] == content_hash(m.raw)
    dupes = conn.execute(
        "SELECT ordinal FROM raw_messages WHERE session_pk = ? AND superseded_at IS NULL GROUP BY ordinal"
        " HAVING count(*) > 1", (pk,)).fetchall()
    assert dupes == []


def test_first_sync_repeat_and_append(conn):
    pk = new_session(conn)
    history = msgs(40)
    result, changes = delta(conn, lambda: raw.sync(conn, pk, history, now_ms=10))
    assert result.written == 40 and result.appended == 40 and result.divergences == []
    assert [m.ordinal for m in history] == list(range(40))
    assert raw.count(conn, pk) == 40 and raw.last_ordinal(conn, pk) == 39 and raw.first_ordinal(conn, pk) == 0
    assert result.last_ordinal == 39 and result.view_start == 0 and not result.head_dropped

    again = msgs(40)
    result, changes = delta(conn, lambda: raw.sync(conn, pk, again, now_ms=20))
    assert changes == 0 and result.written == 0 and result.unchanged == 40
    assert [m.ordinal for m in again] == list(range(40))

    grown = msgs(43)
    result, changes = delta(conn, lambda: raw.sync(conn, pk, grown, now_ms=30))
    assert result.written == 3 and result.unchanged == 40 and result.divergences == []
    assert changes == 3 + 1  # three rows and the session's updated_at
    assert conn.execute("SELECT count(*) FROM raw_messages").fetchone()[0] == 43
    assert [s.message_id for s in raw.read_range(conn, pk, 40, 42)] == ["m40", "m41", "m42"]
    check_consistent(conn, pk, grown)


def test_stored_body_is_compressed_raw_json(conn):
    pk = new_session(conn)
    history = msgs(3)
    raw.sync(conn, pk, history, now_ms=1)
    body, digest, role = conn.execute(
        "SELECT body, content_hash, role FROM raw_messages WHERE session_pk = ? AND ordinal = 1", (pk,)).fetchone()
    assert orjson.loads(zlib.decompress(body)) == history[1].raw
    assert digest == content_hash(history[1].raw) and role == history[1].role
    stored = raw.read_range(conn, pk, 0, 10)
    assert [(s.ordinal, s.message_id, s.raw) for s in stored] == [(m.ordinal, m.id, m.raw) for m in history]


@pytest.mark.parametrize("ids", ["harness", "derived"])
def test_edit_message_5_of_40(conn, ids):
    pk = new_session(conn)
    raws = [m.raw for m in msgs(40)]
    make = derived if ids == "derived" else (lambda rs: [Message(id=f"m{i}", role=r["role"], raw=r)
                                                         for i, r in enumerate(rs)])
    raw.sync(conn, pk, make(raws), now_ms=1)
    edited_raws = list(raws)
    edited_raws[5] = {"role": raws[5]["role"], "content": [{"type": "text", "text": "rewritten by the user"}]}
    edited = make(edited_raws)

    result = raw.sync(conn, pk, edited, now_ms=2)
    assert result.written == 1 and result.superseded == 1 and result.replaced == 1
    assert result.divergences == [(raw.EDITED, 5)]
    assert [m.ordinal for m in edited] == list(range(40))
    assert raw.read_range(conn, pk, 5, 5)[0].raw == edited_raws[5]
    assert raw.count(conn, pk) == 40
    assert raw.divergences(conn, pk) == [(5, raw.EDITED, 2)]
    check_consistent(conn, pk, edited)

    result, changes = delta(conn, lambda: raw.sync(conn, pk, make(edited_raws), now_ms=3))
    assert changes == 0 and result.written == 0


def test_updating_the_newest_message_is_not_a_divergence(conn):
    """OpenCode's in-flight assistant message grows between passes under the same id."""
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    history = [*msgs(9), msg("m9", version=1)]
    result = raw.sync(conn, pk, history, now_ms=2)
    assert result.written == 1 and result.superseded == 1 and result.divergences == []
    assert history[9].ordinal == 9
    check_consistent(conn, pk, history)


def test_head_dropped_and_summary_inserted(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(40), now_ms=1)
    summary = msg("summary-1", compaction=COMPACTION_SUMMARY)
    view = [summary, *msgs(15, start=25), *msgs(2, start=40)]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [m.ordinal for m in view[1:16]] == list(range(25, 40))  # kept messages keep their ordinals
    assert summary.ordinal == 40 and [m.ordinal for m in view[16:]] == [41, 42]
    assert result.superseded == 0 and result.written == 3 and result.head_dropped and result.view_start == 25
    assert result.divergences == [(raw.COMPACTED, 25)]
    assert raw.count(conn, pk) == 43  # the dropped head is history, still live
    assert raw.read_range(conn, pk, 0, 0)[0].message_id == "m0"
    check_consistent(conn, pk, view)

    result, changes = delta(conn, lambda: raw.sync(conn, pk, list(view), now_ms=3))
    assert changes == 0 and result.head_dropped

    later = [*view, msg("m42")]
    result = raw.sync(conn, pk, later, now_ms=4)
    assert result.written == 1 and result.divergences == [] and later[-1].ordinal == 43

    # A second compaction moves the boundary: recorded once more.
    second = [msg("summary-2", compaction=COMPACTION_SUMMARY), *later[-2:]]
    result = raw.sync(conn, pk, second, now_ms=5)
    assert result.divergences == [(raw.COMPACTED, 42)] and second[0].ordinal == 44
    check_consistent(conn, pk, second)


def test_summary_replacing_one_message_is_not_an_edit(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    view = [msg("summary", compaction=COMPACTION_SUMMARY), *msgs(9, start=1)]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert view[0].ordinal == 10 and result.superseded == 0 and result.divergences == [(raw.COMPACTED, 1)]
    assert raw.read_range(conn, pk, 0, 0)[0].message_id == "m0"
    # Without the compaction mark the same shape is an edit of the first message.
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    view = [msg("new-first"), *msgs(9, start=1)]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert view[0].ordinal == 0 and result.divergences == [(raw.EDITED, 0)]


def test_reordered_input_never_claims_a_row_twice(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    m = msgs(10)
    view = [m[2], msg("x"), m[4], m[1], msg("y"), m[5]]
    raw.sync(conn, pk, view, now_ms=2)
    check_consistent(conn, pk, view)
    assert raw.sync(conn, pk, [m[2], msg("x"), m[4], m[1], msg("y"), m[5]], now_ms=3).written == 0


def test_head_dropped_without_summary(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(40), now_ms=1)
    view = msgs(30, start=10)
    result, changes = delta(conn, lambda: raw.sync(conn, pk, view, now_ms=2))
    assert result.written == 0 and result.divergences == [(raw.COMPACTED, 10)]
    assert [m.ordinal for m in view] == list(range(10, 40))
    assert changes == 2  # the divergence row and the session's updated_at; no message row
    result, changes = delta(conn, lambda: raw.sync(conn, pk, msgs(30, start=10), now_ms=3))
    assert changes == 0


def test_first_seen_is_the_earliest_version_of_the_live_message(conn):
    """What the notes nudge compares note changes with: a message rewritten in flight keeps its first sighting; a
    fork's message at the same ordinal is another message."""
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    raw.sync(conn, pk, [*msgs(9), msg("m9", version=1)], now_ms=2)
    assert raw.first_seen(conn, pk, 9) == 1
    raw.sync(conn, pk, [*msgs(5), *msgs(2, prefix="y")], now_ms=3)
    assert raw.first_seen(conn, pk, 5) == 3 and raw.first_seen(conn, pk, 4) == 1
    assert raw.first_seen(conn, pk, 9) is None  # superseded by the fork: no live message there


def test_fork_replaces_the_tail(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(40), now_ms=1)
    fork = [*msgs(20), *msgs(3, prefix="y")]
    result = raw.sync(conn, pk, fork, now_ms=2)
    assert result.superseded == 20 and result.written == 3
    assert result.divergences == [(raw.FORKED, 20)]
    assert [m.ordinal for m in fork] == list(range(23))
    assert raw.count(conn, pk) == 23 and raw.last_ordinal(conn, pk) == 22
    assert result.last_ordinal == 22
    check_consistent(conn, pk, fork)
    result, changes = delta(conn, lambda: raw.sync(conn, pk, [*msgs(20), *msgs(3, prefix="y")], now_ms=3))
    assert changes == 0

    # Switching back to the old branch supersedes the fork and stores the old tail again.
    back = msgs(40)
    result = raw.sync(conn, pk, back, now_ms=4)
    assert result.divergences == [(raw.FORKED, 20)] and result.written == 20 and result.superseded == 3
    check_consistent(conn, pk, back)


def test_rewind_without_new_messages(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    result = raw.sync(conn, pk, msgs(6), now_ms=2)
    assert result.divergences == [(raw.FORKED, 6)] and result.written == 0 and raw.count(conn, pk) == 6


def test_insert_in_the_middle_and_prepend(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    view = [*msgs(5), msg("x"), *msgs(5, start=5)]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert view[5].ordinal == 10 and result.divergences == [(raw.INSERTED, 10)]
    check_consistent(conn, pk, view)
    view = [msg("first"), *view]
    result = raw.sync(conn, pk, view, now_ms=3)
    assert view[0].ordinal == 11 and result.divergences == [(raw.INSERTED, 11)]
    check_consistent(conn, pk, view)


def test_deleted_middle_message_stays_history(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    view = [*msgs(4), *msgs(5, start=5)]
    _result, changes = delta(conn, lambda: raw.sync(conn, pk, view, now_ms=2))
    assert changes == 0 and raw.count(conn, pk) == 10
    check_consistent(conn, pk, view)


def test_nothing_known_keeps_old_rows(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(5), now_ms=1)
    view = msgs(3, prefix="z")
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [m.ordinal for m in view] == [5, 6, 7] and result.superseded == 0
    assert result.divergences == [(raw.COMPACTED, 5)]
    assert raw.sync(conn, pk, msgs(3, prefix="z"), now_ms=3).divergences == []


def test_repeated_ids_and_empty_input(conn):
    pk = new_session(conn)
    assert raw.sync(conn, pk, [], now_ms=1).written == 0
    view = [msg("same"), msg("same", 1), msg("same", 2)]
    raw.sync(conn, pk, view, now_ms=2)
    assert [m.ordinal for m in view] == [0, 1, 2]
    assert [s.message_id for s in raw.read_range(conn, pk, 0, 2)] == ["same", "same#1", "same#2"]
    assert raw.sync(conn, pk, [], now_ms=3).written == 0 and raw.count(conn, pk) == 3


def test_ensure_session(conn):
    pk, changes = delta(conn, lambda: raw.ensure_session(conn, "opencode", "ses_1", project_id="git:abc", now_ms=5))
    assert changes == 1
    again, changes = delta(conn, lambda: raw.ensure_session(conn, "opencode", "ses_1", now_ms=6))
    assert again == pk and changes == 0
    again = raw.ensure_session(conn, "opencode", "ses_1", project_dir="/work", now_ms=7)
    row = conn.execute("SELECT project_id, project_dir, created_at, updated_at FROM sessions WHERE id = ?",
                       (pk,)).fetchone()
    assert again == pk and tuple(row) == ("git:abc", "/work", 5, 7)
    assert raw.ensure_session(conn, "pi", "ses_1", now_ms=8) != pk
    assert raw.last_ordinal(conn, pk) is None and raw.count(conn, pk) == 0


def test_token_estimates_are_stored_and_reused(conn, sessions_dir):
    pk = new_session(conn)
    lines = (sessions_dir / "pi_large-session.jsonl").read_text(encoding="utf-8").splitlines()
    payload = [orjson.loads(line)["message"] for line in lines if '"type":"message"' in line][:120]
    first = pi.decode(payload)
    result = raw.sync(conn, pk, first, now_ms=1, estimate=tokens.estimate)
    expected = [raw.message_tokens(msg, tokens.estimate) for msg in first]
    assert result.tokens == expected and all(t >= raw.MESSAGE_OVERHEAD for t in expected)
    assert [row[3] for row in raw.live_index(conn, pk)] == expected

    calls = []

    def counting(text: str) -> int:
        calls.append(text)
        return tokens.estimate(text)

    result, changes = delta(conn, lambda: raw.sync(conn, pk, pi.decode(payload), now_ms=2, estimate=counting))
    assert changes == 0 and result.tokens == expected and calls == []  # every estimate came from the rows
    assert raw.sync(conn, pk, pi.decode(payload), now_ms=3).tokens == []  # no estimator, no estimates

    # Rows stored without an estimator hold 0 ("unknown") and are estimated when asked.
    pk = new_session(conn)
    raw.sync(conn, pk, pi.decode(payload[:10]), now_ms=1)
    assert {row[3] for row in raw.live_index(conn, pk)} == {0}
    assert raw.sync(conn, pk, pi.decode(payload[:10]), now_ms=2, estimate=tokens.estimate).tokens == expected[:10]


def test_message_tokens_per_block_kind():
    message = Message(id="a", role="assistant", blocks=[
        Block("text", text="hello world"), Block("tool_call", tool_name="bash", input={"command": "ls -la"}),
        Block("media", media_type="image/png"), Block("opaque", raw={"type": "unknown", "x": 1}),
    ])
    expected = (raw.MESSAGE_OVERHEAD + tokens.estimate("hello world") + tokens.estimate('{"command": "ls -la"}')
                + raw.TOOL_CALL_OVERHEAD + raw.MEDIA_TOKENS + tokens.estimate('{"type":"unknown","x":1}'))
    assert raw.message_tokens(message, tokens.estimate) == expected


def test_read_only_sync_writes_nothing(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(10), now_ms=1)
    view = [*msgs(5), *msgs(3, prefix="y")]
    result, changes = delta(conn, lambda: raw.sync(conn, pk, view, now_ms=2, write=False, estimate=tokens.estimate))
    assert changes == 0 and result.written == 0 and [m.ordinal for m in view] == list(range(8))
    assert len(result.tokens) == 8 and raw.count(conn, pk) == 10


def test_caller_transaction_is_respected(conn):
    pk = new_session(conn)
    conn.execute("BEGIN IMMEDIATE")
    raw.sync(conn, pk, msgs(3), now_ms=1)
    assert conn.in_transaction
    conn.execute("ROLLBACK")
    assert raw.count(conn, pk) == 0


# --- property: random histories ---------------------------------------------------------------

_names = itertools.count()


def _new() -> Message:
    return msg(f"n{next(_names)}")


ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "edit_same_id", "edit_new_id", "fork", "compact", "summary", "delete",
                         "insert", "repeat", "revert", "rewind", "swap"]),
        st.integers(min_value=0, max_value=10_000),
        st.integers(min_value=1, max_value=4),
    ),
    min_size=1,
    max_size=12,
)


def _apply_op(view: list[Message], views: list[list[Message]], op: str, at: int, k: int) -> list[Message]:
    n = len(view)
    i = at % n if n else 0
    if op == "append" or n == 0:
        return view + [_new() for _ in range(k)]
    if op == "edit_same_id":
        return [*view[:i], msg(view[i].id, version=at + 1), *view[i + 1:]]
    if op == "edit_new_id":
        return [*view[:i], _new(), *view[i + 1:]]
    if op == "fork":
        return view[:i] + [_new() for _ in range(k)]
    if op == "compact":
        return view[min(i + 1, n - 1):]
    if op == "summary":
        return [msg(f"s{next(_names)}", compaction=COMPACTION_SUMMARY), *view[min(i + 1, n - 1):]]
    if op == "delete" and n > 1:
        return view[:i] + view[i + 1:]
    if op == "insert":
        return [*view[:i], _new(), *view[i:]]
    if op == "revert":
        return list(views[at % len(views)])
    if op == "rewind":
        return view[:max(i, 1)]
    if op == "swap" and n > 1:
        j = (i + k) % n
        out = list(view)
        out[i], out[j] = out[j], out[i]
        return out
    return list(view)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_random_histories_keep_invariants(conn, sequence):
    pk = new_session(conn)
    view = msgs(8, prefix=f"b{next(_names)}-")
    views = [view]
    raw.sync(conn, pk, view, now_ms=0)
    for step, (op, at, k) in enumerate(sequence, start=1):
        view = _apply_op(view, views, op, at, k)
        views.append(view)
        before = {row[1]: row[0] for row in raw.live_index(conn, pk)}
        incoming = [Message(id=m.id, role=m.role, raw=m.raw, compaction=m.compaction) for m in view]
        raw.sync(conn, pk, incoming, now_ms=step)
        check_consistent(conn, pk, incoming)
        for m in incoming:  # a live message seen before keeps its ordinal
            if m.id in before:
                assert m.ordinal == before[m.id]
        repeat = [Message(id=m.id, role=m.role, raw=m.raw, compaction=m.compaction) for m in view]
        result, changes = delta(conn, lambda r=repeat, s=step: raw.sync(conn, pk, r, now_ms=s))
        assert changes == 0 and result.written == 0
        assert [m.ordinal for m in repeat] == [m.ordinal for m in incoming]
        stored = {s.ordinal: s.raw for s in raw.read_range(conn, pk, 0, 10**9)}
        assert all(stored[m.ordinal] == m.raw for m in incoming)


def test_skimmed_messages_must_be_stored_unchanged_and_folded(conn) -> None:
    pk = new_session(conn)
    first = msgs(6)
    raw.sync(conn, pk, first, now_ms=2)
    # Unchanged and at or below the fold watermark: the skim holds and only the new message is written.
    result, changes = delta(conn, lambda: raw.sync(conn, pk, [*msgs(6), msg("m6")], now_ms=3, skimmed=4,
                                                   folded_through=3))
    assert result.written == 1 and changes > 0
    # A skimmed message above the watermark, or one the harness edited: nothing is written.
    for messages, through in (([*msgs(7), msg("m7")], 2), ([msg("m0", 1), *msgs(6, start=1), msg("m7")], 3)):
        before = conn.total_changes
        with pytest.raises(raw.SkimmedChange):
            raw.sync(conn, pk, messages, now_ms=4, skimmed=4, folded_through=through)
        assert conn.total_changes == before
    result = raw.sync(conn, pk, [msg("m0", 1), *msgs(6, start=1), msg("m7")], now_ms=5)  # decoded whole
    assert result.written == 2 and result.divergences


def test_message_tokens_edges() -> None:
    """Unserializable call input is counted as its str(); an opaque part without raw JSON costs nothing; Chat
    Completions reasoning is not read back; a document too deep for orjson with a lone surrogate still counts."""
    overhead = raw.MESSAGE_OVERHEAD
    odd = Message(id="a", role="assistant", blocks=[Block("tool_call", tool_name="x", input={"data": b"\x00\x01"})])
    assert raw.message_tokens(odd, len) == overhead + len(str({"data": b"\x00\x01"})) + raw.TOOL_CALL_OVERHEAD
    assert raw.message_tokens(Message(id="b", role="assistant", blocks=[Block("opaque", raw=None)]), len) == overhead
    hidden = Block("reasoning", text="long thoughts", meta={"field": "reasoning_content"})
    shown = Block("reasoning", text="long thoughts", meta={"signature": "s"})
    assert raw.message_tokens(Message(id="c", role="assistant", blocks=[hidden]), len) == overhead
    assert raw.message_tokens(Message(id="c", role="assistant", blocks=[shown]), len) == overhead + 13
    deep: object = "\ud800"
    for _ in range(300):
        deep = [deep]
    cost = raw.message_tokens(Message(id="d", role="assistant", blocks=[Block("opaque", raw=deep)]), len)
    assert cost == overhead + 600 + 2 + 3  # brackets, quotes, and U+FFFD for each of the surrogate's 3 bytes


def test_skim_edges_and_messages(conn) -> None:
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(4), now_ms=1)
    # The first message after the skimmed ones may be new.
    result = raw.sync(conn, pk, [*msgs(4), msg("m4")], now_ms=2, skimmed=4, folded_through=3)
    assert result.written == 1
    with pytest.raises(raw.SkimmedChange, match=r"^skimmed message 1 is new or changed$"):
        raw.sync(conn, pk, [msg("m0"), msg("m1", 1), *msgs(3, start=2)], now_ms=3, skimmed=2, folded_through=4)
    with pytest.raises(raw.SkimmedChange, match=r"^skimmed message 2 is no longer folded$"):
        raw.sync(conn, pk, msgs(5), now_ms=3, skimmed=3, folded_through=1)


def test_read_range_returns_every_field(conn) -> None:
    pk = new_session(conn)
    history = msgs(3)
    raw.sync(conn, pk, history, now_ms=77)
    assert raw.read_range(conn, pk, 1, 1) == [raw.StoredMessage(1, "m1", history[1].role, history[1].raw,
                                                                content_hash(history[1].raw), 77)]
    estimated = msgs(2, prefix="e")
    estimated[1].blocks = [Block("text", text="seven!!")]
    raw.sync(conn, pk, [*history, *estimated], now_ms=78, estimate=len)
    assert [(s.ordinal, s.tokens) for s in raw.read_range(conn, pk, 2, 9)] == [
        (2, 0), (3, raw.MESSAGE_OVERHEAD), (4, raw.MESSAGE_OVERHEAD + 7)]  # the stored estimate; 0: none


def test_two_edits_under_known_ids_in_one_sync(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(6), now_ms=1)
    view = [msg("m0"), msg("m1", 1), msg("m2"), msg("m3", 1), *msgs(2, start=4)]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert (result.replaced, result.superseded, result.written) == (2, 2, 2)
    assert result.divergences == [(raw.EDITED, 1), (raw.EDITED, 3)]


def test_a_known_message_moved_later_is_never_the_gap_a_new_one_fills(conn):
    """m1 moved behind m2: the new X between m0 and m2 must not take ordinal 1, which m1 still holds."""
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(6), now_ms=1)
    m_ = msgs(6)
    view = [m_[0], msg("X"), m_[2], m_[1], *m_[3:]]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [x.ordinal for x in view] == [0, 6, 2, 1, 3, 4, 5]
    assert result.superseded == 0 and result.divergences == [(raw.INSERTED, 6)]
    check_consistent(conn, pk, view)


def test_reads_turn_sqlite_errors_into_storage_errors(conn):
    from magic_context.errors import StorageUnavailable

    pk = new_session(conn)
    conn.execute("DROP TABLE raw_divergences")
    with pytest.raises(StorageUnavailable, match=r"^database error: no such table: raw_divergences$"):
        raw.divergences(conn, pk)
    conn.close()
    for read in (raw.count, raw.last_ordinal, raw.first_ordinal, raw.live_index):
        with pytest.raises(StorageUnavailable, match="closed database"):
            read(conn, pk)
    with pytest.raises(StorageUnavailable, match="closed database"):
        raw.read_range(conn, pk, 0, 5)


def test_a_write_between_our_read_and_the_lock_is_planned_again(conn):
    """Another process appends to the session after this sync read the live rows but before it took the write
    lock: the plan is recomputed on the fresh rows (here: the other branch's message is forked away)."""
    other = open_db()
    try:
        pk = new_session(conn)
        raw.sync(conn, pk, msgs(3), now_ms=1)
        raced = []

        def race(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE") and not raced:
                raced.append(raw.sync(other, pk, [*msgs(3), msg("theirs")], now_ms=2))

        conn.set_trace_callback(race)
        ours = [*msgs(3), msg("ours")]
        result = raw.sync(conn, pk, ours, now_ms=3)
        conn.set_trace_callback(None)
        assert raced and raced[0].written == 1  # the other writer's row landed at ordinal 3 first
        assert ours[3].ordinal == 3 and result.divergences == [(raw.FORKED, 3)]
        assert (result.superseded, result.written) == (1, 1)
        assert [s.message_id for s in raw.read_range(conn, pk, 0, 9)] == ["m0", "m1", "m2", "ours"]
        check_consistent(conn, pk, ours)
    finally:
        other.close()


def test_a_new_row_is_written_once_with_its_times_level_and_estimate(conn):
    pk = new_session(conn)
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text)

    history = msgs(3)
    for m in history:
        m.blocks = [Block("text", text=m.raw["content"][0]["text"])]
    history[2].digest = "given-digest"  # a codec's digest is stored as it is
    result = raw.sync(conn, pk, history, now_ms=42, estimate=counting)
    assert calls == ["m0 v0", "m1 v0", "m2 v0"]  # each new message estimated once, not again for the result
    assert result.tokens == [raw.MESSAGE_OVERHEAD + 5] * 3
    rows = conn.execute("SELECT ordinal, body, content_hash, tokens, created_at, superseded_at FROM raw_messages"
                        " WHERE session_pk = ? ORDER BY ordinal", (pk,)).fetchall()
    assert [tuple(r) for r in rows] == [
        (i, zlib.compress(orjson.dumps(history[i].raw), raw.ZLIB_LEVEL),
         "given-digest" if i == 2 else content_hash(history[i].raw), 9, 42, None) for i in range(3)]
    assert conn.execute("SELECT updated_at FROM sessions WHERE id = ?", (pk,)).fetchone()[0] == 42
    raw.sync(conn, pk, [*msgs(2), msg("m2", 1)], now_ms=50)
    assert conn.execute("SELECT superseded_at FROM raw_messages WHERE session_pk = ? AND ordinal = 2 AND"
                        " superseded_at IS NOT NULL", (pk,)).fetchone()[0] == 50


def test_sync_maps_sqlite_errors(conn):
    from magic_context.errors import StorageUnavailable

    pk = new_session(conn)
    conn.close()
    with pytest.raises(StorageUnavailable, match="closed database"):
        raw.sync(conn, pk, msgs(2), now_ms=1)


def test_an_edit_under_a_new_id_claims_only_the_rows_between_its_neighbours(conn):
    """m1 was deleted (it stays history) and m3 edited under a new id: X takes m3's ordinal; the unmatched m1
    below X's left neighbour is not part of its gap (counting it would make the gap two rows for one message)."""
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(7), now_ms=1)
    m_ = msgs(7)
    view = [m_[0], m_[2], msg("X"), *m_[4:]]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [x.ordinal for x in view] == [0, 2, 3, 4, 5, 6]
    assert result.divergences == [(raw.EDITED, 3)] and (result.replaced, result.superseded) == (1, 1)
    check_consistent(conn, pk, view)


def test_a_message_inserted_after_a_dropped_head_is_an_insert_not_a_summary(conn):
    """The head m0-m1 was dropped and X inserted right after the first message: X is appended and recorded as
    inserted (only new messages in front of a dropped head are the harness's summary)."""
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(5), now_ms=1)
    m_ = msgs(5)
    view = [m_[2], msg("X"), *m_[3:]]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [x.ordinal for x in view] == [2, 5, 3, 4]
    assert result.divergences == [(raw.INSERTED, 5), (raw.COMPACTED, 2)] and result.head_dropped
    check_consistent(conn, pk, view)


def test_last_ordinal_of_an_empty_a_one_message_and_a_longer_history(conn):
    pk = new_session(conn)
    assert raw.sync(conn, pk, [], now_ms=1).last_ordinal is None
    assert raw.sync(conn, pk, msgs(1), now_ms=2).last_ordinal == 0
    assert raw.sync(conn, pk, msgs(3), now_ms=3).last_ordinal == 2


def test_a_run_of_edits_under_new_ids_counts_each_replacement(conn):
    pk = new_session(conn)
    raw.sync(conn, pk, msgs(6), now_ms=1)
    m_ = msgs(6)
    view = [m_[0], msg("X"), msg("Y"), msg("Z"), *m_[4:]]
    result = raw.sync(conn, pk, view, now_ms=2)
    assert [x.ordinal for x in view] == list(range(6))
    assert (result.replaced, result.superseded, result.appended) == (3, 3, 0)
    assert result.divergences == [(raw.EDITED, 1)]


def test_live_rows_are_read_again_only_under_syncs_own_transaction(conn):
    """Under the caller's open transaction (the pass holds the write lock) the first read stands; under its own,
    sync reads the live rows once more after taking the lock."""
    pk = new_session(conn)
    reads: list[str] = []
    conn.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith("SELECT ordinal, message_id") else None)
    conn.execute("BEGIN IMMEDIATE")
    raw.sync(conn, pk, msgs(2), now_ms=1)
    conn.execute("COMMIT")
    assert len(reads) == 1
    reads.clear()
    raw.sync(conn, pk, msgs(3), now_ms=2)
    conn.set_trace_callback(None)
    assert len(reads) == 2


def test_a_raced_sync_with_a_dropped_head_is_planned_again_on_the_database(conn):
    """The plan made again after another writer's append still reads the last compaction boundary from the
    database (the input dropped its head)."""
    other = open_db()
    try:
        pk = new_session(conn)
        raw.sync(conn, pk, msgs(5), now_ms=1)
        assert raw.sync(conn, pk, msgs(3, start=2), now_ms=2).divergences == [(raw.COMPACTED, 2)]
        raced = []

        def race(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE") and not raced:
                raced.append(raw.sync(other, pk, [*msgs(5), msg("theirs")], now_ms=3))

        conn.set_trace_callback(race)
        ours = [*msgs(3, start=2), msg("ours")]
        result = raw.sync(conn, pk, ours, now_ms=4)
        conn.set_trace_callback(None)
        assert raced and [x.ordinal for x in ours] == [2, 3, 4, 5]
        assert result.divergences == [(raw.FORKED, 5)]  # the boundary at 2 is recorded already
        check_consistent(conn, pk, ours)
    finally:
        other.close()
