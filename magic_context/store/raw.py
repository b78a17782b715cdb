"""Raw history: every harness message of a session, append-only, zlib-compressed (DESIGN §3.4 step 1).

A session's raw history is its *live* rows (`superseded_at IS NULL`) in `ordinal` order: the order
in which mc first saw each message, from 0. Live ordinals are unique and contiguous from the
smallest; a message keeps its ordinal while it is live; rows are never deleted, only superseded.
The historian reads ordinal ranges of live rows (`read_range`).

`sync` runs once per pass, on the harness's messages as decoded (before mc edits them). It reads
the live (ordinal, message_id, content_hash) list with one query, matches the input by id in
memory, and writes only what is new or changed: a repeated pass writes no row at all. Rules, in
terms of the input's *known* messages (id present among live rows) and *new* ones:

1. Known, same content: nothing is written; the message takes its stored ordinal.
2. Known, changed content: the row is superseded and the new content takes the same ordinal
   (divergence "edited"; none when it is the newest live row, e.g. OpenCode's in-flight
   assistant message, which is simply "updated").
3. Fork / rewind: live rows above the highest known ordinal are superseded ("forked" at the first
   of them); new messages after the last known one take ordinals from there on.
4. Edit under a new id (formats with derived ids): a run of k new messages between known messages
   at ordinals p < s, where the input lacks exactly k live rows between p and s, replaces those rows
   one for one ("edited"). The same holds for a run before the first known message, unless one of
   its messages is a harness compaction summary.
5. Anything else new is appended after the highest ordinal ("inserted"): a message inserted in the
   middle, a summary the harness put in front after compacting, or the whole input when no
   message is known (the old rows stay: mc cannot tell a compaction from a fork there).
6. Live rows the input no longer carries below the highest known ordinal stay live: they are
   history (the harness compacted its head or pruned a message). When the input's smallest ordinal
   is above the smallest live one, the head was dropped: "compacted" is recorded at the input's
   smallest ordinal each time that boundary moves.

Token estimates: with `estimate`, `SyncResult.tokens` holds each input message's estimate
(`message_tokens`, never below 4); it is stored with the row (`raw_messages.tokens`; 0 means not
estimated), so a pass estimates only new or changed messages. `write=False` (a read-only, last-known-good pass) plans
and assigns ordinals the same way but writes nothing.

Ids that repeat within one input are stored as `id`, `id#1`, `id#2`… Divergence rows are written
only together with the change they describe (or when the compaction boundary moves), so sync is
idempotent. Writes happen in one short `BEGIN IMMEDIATE` transaction (or the caller's open one);
the plan is recomputed inside it if another process changed the session meanwhile.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable, Sequence

from magic_context.records import Factory, record
from magic_context.store.db import atomic, classify
from magic_context.store.sessions import ensure_session, touch
from magic_context.wire import jsonio
from magic_context.wire import model as m
from magic_context.wire.identity import content_hash
from magic_context.wire.model import Message

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

_dumps = jsonio.dumps  # orjson, or the stdlib for documents nested past orjson's writing limit
_loads = jsonio.loads

ZLIB_LEVEL: Final = 1  # ~20% faster than 6 on session JSON for ~3 points of ratio; the first pass writes it all
EDITED: Final = "edited"
FORKED: Final = "forked"
COMPACTED: Final = "compacted"
INSERTED: Final = "inserted"
MESSAGE_OVERHEAD: Final = 4  # role and framing tokens of one message
TOOL_CALL_OVERHEAD: Final = 12  # name, id and framing of one tool call (as transform.reclaim counts it)
MEDIA_TOKENS: Final = 500  # flat figure for an image (as transform.reclaim counts it)

Live = list[tuple[int, str, str, int]]  # (ordinal, message_id, content_hash, tokens) of live rows; tokens 0: unknown
_LIVE: Final = "FROM raw_messages WHERE session_pk = ? AND superseded_at IS NULL"


class SkimmedChange(Exception):
    """`sync` found a skimmed message (decoded without blocks) that it would have to write: decode fully."""


@record(frozen=True)
class StoredMessage:
    """One live raw row, decoded."""

    ordinal: int
    message_id: str
    role: str
    raw: Any
    content_hash: str
    created_at: int
    tokens: int = 0  # the stored estimate (0: not estimated)


@record
class SyncResult:
    """What one `sync` did. `divergences` lists the (reason, at_ordinal) rows recorded by this call."""

    written: int = 0  # message rows inserted
    unchanged: int = 0  # input messages already stored as they are
    superseded: int = 0
    appended: int = 0  # messages given a new ordinal at the end
    replaced: int = 0  # messages that took over the ordinal of a superseded row
    divergences: list[tuple[str, int]] = Factory(factory=list)
    view_start: int | None = None  # smallest ordinal in the input
    head_dropped: bool = False  # the input starts above the oldest live row
    last_ordinal: int | None = None
    tokens: list[int] = Factory(factory=list)  # per input message, when `estimate` was given


@record(frozen=True)
class _Input:
    messages: Sequence[Message]
    keys: list[str]  # storage ids: the message id, `#n`-suffixed when it repeats
    hashes: list[str]


@record
class _Plan:
    ordinals: list[int]
    inserts: list[int]  # input indexes to insert, at ordinals[i]
    stored_tokens: list[int | None]  # per input message: the estimate kept with its unchanged row
    supersede: list[int]  # live ordinals to supersede
    divergences: list[tuple[str, int]]
    result: SyncResult


def message_tokens(message: Message, estimate: Callable[[str], int]) -> int:
    """A message's prompt cost: text, reasoning and tool output estimated as text, tool-call arguments
    as compact JSON plus a fixed overhead, images at a flat figure, unknown parts as their JSON.
    Reasoning the provider does not read back (Chat Completions fields, `model.in_prompt`) costs nothing."""
    total = MESSAGE_OVERHEAD
    for block in message.blocks:
        if block.kind == m.TOOL_CALL:
            try:
                args = jsonio.text(block.input)
            except (TypeError, ValueError):
                args = str(block.input)
            total += estimate(args) + TOOL_CALL_OVERHEAD
        elif block.kind == m.MEDIA:
            total += MEDIA_TOKENS
        elif block.kind == m.OPAQUE:
            total += estimate(_dumps(block.raw).decode("utf-8", "replace")) if block.raw is not None else 0
        elif block.text and m.in_prompt(block):
            total += estimate(block.text)
    return total


def _keys(messages: Sequence[Message]) -> list[str]:
    seen: dict[str, int] = {}
    keys = []
    for msg in messages:
        n = seen.get(msg.id, 0)
        seen[msg.id] = n + 1
        keys.append(msg.id if n == 0 else f"{msg.id}#{n}")
    return keys


def _live(conn: sqlite3.Connection, session_pk: int) -> Live:
    cursor = conn.execute(f"SELECT ordinal, message_id, content_hash, tokens {_LIVE} ORDER BY ordinal", (session_pk,))
    cursor.row_factory = None  # plain tuples: this runs on every pass over the whole live history
    return cursor.fetchall()


def _last_compaction(conn: sqlite3.Connection, session_pk: int) -> int | None:
    row = conn.execute(
        "SELECT at_ordinal FROM raw_divergences WHERE session_pk = ? AND reason = ? ORDER BY id DESC LIMIT 1",
        (session_pk, COMPACTED),
    ).fetchone()
    return None if row is None else int(row[0])


def _plan(conn: sqlite3.Connection, session_pk: int, inp: _Input, live: Live) -> _Plan:
    messages, keys, hashes = inp.messages, inp.keys, inp.hashes
    res = SyncResult()
    by_key = {key: (ordinal, digest, count) for ordinal, key, digest, count in live}
    n = len(messages)
    ordinals = [-1] * n
    stored_tokens: list[int | None] = [None] * n
    inserts: list[int] = []
    supersede: list[int] = []
    divergences: list[tuple[str, int]] = []
    newest = live[-1][0] if live else None

    known_ordinals: set[int] = set()
    for i, key in enumerate(keys):
        hit = by_key.get(key)
        if hit is None:
            continue
        ordinals[i] = hit[0]
        known_ordinals.add(hit[0])
        if hit[1] == hashes[i]:
            res.unchanged += 1
            stored_tokens[i] = hit[2] or None
        else:  # rule 2
            inserts.append(i)
            supersede.append(hit[0])
            res.replaced += 1
            if hit[0] != newest:
                divergences.append((EDITED, hit[0]))

    hi = max(known_ordinals) if known_ordinals else None
    if hi is not None:  # rule 3
        tail = [row[0] for row in live if row[0] > hi]
        if tail:
            supersede.extend(tail)
            divergences.append((FORKED, tail[0]))
        next_ordinal = hi + 1
    else:
        next_ordinal = newest + 1 if newest is not None else 0

    unmatched = [row[0] for row in live if row[0] not in known_ordinals and (hi is None or row[0] < hi)]
    claimed: set[int] = set()
    inserted_at: dict[bool, int] = {}  # first ordinal appended for a run in front (True) / in the middle (False)
    i = 0
    while i < n:
        if ordinals[i] >= 0:
            i += 1
            continue
        j = i
        while j < n and ordinals[j] < 0:
            j += 1
        left = ordinals[i - 1] if i > 0 else None
        right = ordinals[j] if j < n else None
        gap: list[int] = []
        if right is not None and (left is None or left < right):  # rule 4
            low = -1 if left is None else left
            gap = [o for o in unmatched if low < o < right]
            head_summary = left is None and any(messages[k].compaction for k in range(i, j))
            if len(gap) != j - i or head_summary or claimed.intersection(gap):
                gap = []
        if gap:
            claimed.update(gap)
            supersede.extend(gap)
            divergences.append((EDITED, gap[0]))
            for k, ordinal in zip(range(i, j), gap, strict=True):
                ordinals[k] = ordinal
                inserts.append(k)
                res.replaced += 1
        else:  # rules 3 and 5: take fresh ordinals at the end
            if right is not None:
                inserted_at.setdefault(left is None, next_ordinal)
            for k in range(i, j):
                ordinals[k] = next_ordinal
                next_ordinal += 1
                inserts.append(k)
                res.appended += 1
        i = j

    if n:
        res.view_start = min(ordinals)
        oldest = live[0][0] if live else res.view_start
        res.head_dropped = res.view_start > oldest
    # New messages in front of a dropped head are the harness's summary: covered by "compacted".
    inserted = [at for front, at in inserted_at.items() if not (front and res.head_dropped)]
    if inserted:
        divergences.append((INSERTED, min(inserted)))
    view_start = res.view_start
    if res.head_dropped and view_start is not None and _last_compaction(conn, session_pk) != view_start:  # rule 6
        divergences.append((COMPACTED, view_start))
    # Everything above hi was superseded and appends continued from there, so the top is next - 1.
    res.last_ordinal = next_ordinal - 1 if next_ordinal > 0 else None
    return _Plan(ordinals, inserts, stored_tokens, supersede, divergences, res)


def sync(
    conn: sqlite3.Connection,
    session_pk: int,
    messages: Sequence[Message],
    *,
    now_ms: int,
    estimate: Callable[[str], int] | None = None,
    write: bool = True,
    skimmed: int = 0,
    folded_through: int = -1,
) -> SyncResult:
    """Persist what is new or changed in `messages` and set every `Message.ordinal` (see the module rules).

    With `estimate`, fill `SyncResult.tokens`; with `write=False`, plan and assign ordinals only. The
    first `skimmed` messages carry no blocks (see "Skimmed messages" in `wire.model`): unless each
    of them is stored unchanged and, system messages aside, at or below `folded_through`, nothing is
    written and `SkimmedChange` is raised (the caller decodes them fully and syncs again).
    """
    inp = _Input(messages, _keys(messages), [msg.digest or content_hash(msg.raw) for msg in messages])
    try:
        live = _live(conn, session_pk)
        plan = _plan(conn, session_pk, inp, live)
        if skimmed:
            _check_skim(plan, messages, skimmed, folded_through)
        if write and (plan.inserts or plan.supersede or plan.divergences):
            plan = _apply(conn, session_pk, inp, live, plan, now_ms=now_ms, estimate=estimate)
    except sqlite3.Error as exc:
        raise classify(exc) from exc
    for msg, ordinal in zip(messages, plan.ordinals, strict=True):
        msg.ordinal = ordinal
    plan.result.tokens = _tokens(plan, messages, estimate)  # new rows already carry theirs
    return plan.result


def _check_skim(plan: _Plan, messages: Sequence[Message], skimmed: int, folded_through: int) -> None:
    inserted = [i for i in plan.inserts if i < skimmed]
    if inserted:
        raise SkimmedChange(f"skimmed message {inserted[0]} is new or changed")
    unfolded = [i for i in range(min(skimmed, len(messages)))
                if messages[i].role != m.SYSTEM and plan.ordinals[i] > folded_through]
    if unfolded:
        raise SkimmedChange(f"skimmed message {unfolded[0]} is no longer folded")


def _tokens(plan: _Plan, messages: Sequence[Message], estimate: Callable[[str], int] | None) -> list[int]:
    if estimate is None:
        return []
    return [t if t is not None else message_tokens(msg, estimate)
            for msg, t in zip(messages, plan.stored_tokens, strict=True)]


def _apply(conn: sqlite3.Connection, session_pk: int, inp: _Input, live: Live, plan: _Plan, *, now_ms: int,
           estimate: Callable[[str], int] | None) -> _Plan:
    messages, keys, hashes = inp.messages, inp.keys, inp.hashes
    own = not conn.in_transaction
    with atomic(conn):
        # A caller's open transaction already covered our read (the pass holds the write lock; a read
        # snapshot that went stale fails its first write with SQLITE_BUSY): re-read only under our own.
        fresh = _live(conn, session_pk) if own else live
        if fresh != live:  # another process wrote this session between our read and the lock
            plan = _plan(conn, session_pk, inp, fresh)
        if plan.supersede:
            conn.executemany(
                "UPDATE raw_messages SET superseded_at = ?"
                " WHERE session_pk = ? AND ordinal = ? AND superseded_at IS NULL",
                [(now_ms, session_pk, o) for o in sorted(set(plan.supersede))],
            )
            plan.result.superseded = len(set(plan.supersede))
        rows = []
        for i in sorted(plan.inserts, key=plan.ordinals.__getitem__):
            count = message_tokens(messages[i], estimate) if estimate is not None else 0
            plan.stored_tokens[i] = count or None
            rows.append((session_pk, plan.ordinals[i], keys[i], messages[i].role, hashes[i],
                         zlib.compress(_dumps(messages[i].raw), ZLIB_LEVEL), count, now_ms))
        conn.executemany(
            "INSERT INTO raw_messages (session_pk, ordinal, message_id, role, content_hash, body, tokens, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        plan.result.written = len(plan.inserts)
        conn.executemany(
            "INSERT INTO raw_divergences (session_pk, at_ordinal, reason, detected_at) VALUES (?, ?, ?, ?)",
            [(session_pk, at, reason, now_ms) for reason, at in plan.divergences],
        )
        plan.result.divergences = list(plan.divergences)
        touch(conn, session_pk, now_ms)
    return plan


def _query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise classify(exc) from exc


def read_range(conn: sqlite3.Connection, session_pk: int, start_ordinal: int, end_ordinal: int) -> list[StoredMessage]:
    """Live messages with `start_ordinal <= ordinal <= end_ordinal`, in ordinal order, raw JSON decoded.

    Rows are decoded as the cursor yields them: a long tail's compressed rows are never all held at once
    beside their decoded messages (issue #14 item 10)."""
    try:
        cursor = conn.execute(f"SELECT ordinal, message_id, role, body, content_hash, created_at, tokens {_LIVE}"
                              " AND ordinal BETWEEN ? AND ? ORDER BY ordinal", (session_pk, start_ordinal, end_ordinal))
        cursor.row_factory = None
        return [StoredMessage(r[0], r[1], r[2], _loads(zlib.decompress(r[3])), r[4], r[5], r[6]) for r in cursor]
    except sqlite3.Error as exc:
        raise classify(exc) from exc


def first_of_role(conn: sqlite3.Connection, session_pk: int, role: str, through: int, limit: int,
                  ) -> list[StoredMessage]:
    """The first `limit` live messages of `role` at or below ordinal `through`, in ordinal order, decoded."""
    try:
        cursor = conn.execute(f"SELECT ordinal, message_id, role, body, content_hash, created_at, tokens {_LIVE}"
                              " AND role = ? AND ordinal <= ? ORDER BY ordinal LIMIT ?",
                              (session_pk, role, through, limit))
        cursor.row_factory = None
        return [StoredMessage(r[0], r[1], r[2], _loads(zlib.decompress(r[3])), r[4], r[5], r[6]) for r in cursor]
    except sqlite3.Error as exc:
        raise classify(exc) from exc


def live_index(conn: sqlite3.Connection, session_pk: int) -> Live:
    """(ordinal, message_id, content_hash, tokens) of every live row, in ordinal order (no bodies)."""
    try:
        return _live(conn, session_pk)
    except sqlite3.Error as exc:
        raise classify(exc) from exc


def last_ordinal(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The highest live ordinal, or None for a session without raw history."""
    return _query(conn, f"SELECT max(ordinal) {_LIVE}", (session_pk,))[0][0]


def first_ordinal(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The lowest live ordinal, or None for a session without raw history."""
    return _query(conn, f"SELECT min(ordinal) {_LIVE}", (session_pk,))[0][0]


def count(conn: sqlite3.Connection, session_pk: int) -> int:
    """Number of live rows."""
    return int(_query(conn, f"SELECT count(*) {_LIVE}", (session_pk,))[0][0])


def first_seen(conn: sqlite3.Connection, session_pk: int, ordinal: int) -> int | None:
    """When mc first stored the message now live at `ordinal` (ms): the earliest `created_at` of its rows,
    superseded versions of the same message id included (an in-flight message is rewritten as it grows),
    or None when no live row has that ordinal."""
    sql = ("SELECT min(created_at) FROM raw_messages WHERE session_pk = ? AND ordinal = ? AND message_id = "
           f"(SELECT message_id {_LIVE} AND ordinal = ?)")
    return _query(conn, sql, (session_pk, ordinal, session_pk, ordinal))[0][0]


def divergences(conn: sqlite3.Connection, session_pk: int) -> list[tuple[int, str, int]]:
    """Recorded (at_ordinal, reason, detected_at) rows, oldest first."""
    rows = _query(conn, "SELECT at_ordinal, reason, detected_at FROM raw_divergences WHERE session_pk = ? ORDER BY id",
                  (session_pk,))
    return [(r[0], r[1], r[2]) for r in rows]


__all__ = [
    "COMPACTED",
    "EDITED",
    "FORKED",
    "INSERTED",
    "MEDIA_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "ZLIB_LEVEL",
    "SkimmedChange",
    "StoredMessage",
    "SyncResult",
    "count",
    "divergences",
    "ensure_session",
    "first_of_role",
    "first_ordinal",
    "first_seen",
    "last_ordinal",
    "live_index",
    "message_tokens",
    "read_range",
    "sync",
]
