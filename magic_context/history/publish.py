"""Publish one validated historian answer in a single transaction (reference §4.3 "Publishing").

Writes compartments (p1–p4, importance, episode_type, ordinals, boundary message ids, times), their
events, facts promoted to project memories through `memory.engine.promote_facts` (exact
de-duplication on (project, category, normalized hash) — a repeat bumps `seen_count` — and the
historian TTLs), and `session_state.historian_last_publish`.

It queues NO drops: the transform removes raw messages at or below the last compartment's end on its
next cache-busting pass (the fold watermark), so a publish never forces a bust. The publish is
optimistic: it refuses (`StalePublish`) when another run moved the session's last compartment end
since the chunk was read. Stdlib only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from magic_context.errors import MCError
from magic_context.memory import engine, model
from magic_context.store.db import classify

if TYPE_CHECKING:
    from magic_context.history.chunk import Chunk
    from magic_context.history.validate import ValidatedOutput

LAST_PUBLISH_KEY = "historian_last_publish"
NOTE_TRIGGER_KEY = "note_trigger_at"  # = transform.note_nudge.TRIGGER_KEY (a test checks)
DEFAULT_IMPORTANCE = 50
_SAVEPOINT = "mc_historian"


class StalePublish(MCError):
    """Raised when the session's compartments changed after the chunk was read (another run published)."""


@dataclass(frozen=True, slots=True)
class PublishResult:
    sequence_from: int
    sequence_to: int
    compartments: int
    start: int
    end: int
    facts_new: int = 0
    facts_seen: int = 0
    events: int = 0


def normalize_fact(text: str) -> str:
    """The form facts are de-duplicated on (`memory.model.normalize`)."""
    return model.normalize(text)


def fact_hash(text: str) -> str:
    """`memories.normalized_hash` of a fact (`memory.model.content_hash`)."""
    return model.content_hash(text)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE … COMMIT`, or a savepoint inside the caller's open transaction (inline runs)."""
    nested = conn.in_transaction
    conn.execute(f"SAVEPOINT {_SAVEPOINT}" if nested else "BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if nested:
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
            conn.execute(f"RELEASE {_SAVEPOINT}")
        elif conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute(f"RELEASE {_SAVEPOINT}" if nested else "COMMIT")


def last_compartment_end(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The highest published end ordinal of the session, or None before its first compartment."""
    row = conn.execute("SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (session_pk,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def set_state(conn: sqlite3.Connection, session_pk: int, key: str, value: object, now_ms: int) -> None:
    """Write one `session_state` JSON value (None deletes the key)."""
    if value is None:
        conn.execute("DELETE FROM session_state WHERE session_pk = ? AND key = ?", (session_pk, key))
        return
    conn.execute(
        "INSERT INTO session_state (session_pk, key, value, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(session_pk, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (session_pk, key, json.dumps(value, ensure_ascii=False, separators=(",", ":")), now_ms))


def publish(conn: sqlite3.Connection, session_pk: int, validated: ValidatedOutput, chunk: Chunk, *,
            provider: str, model: str | None, now_ms: int, project_id: str | None = None,
            session_id: str | None = None, promote_facts: bool = True) -> PublishResult:
    """Store `validated` (for `chunk`) in one transaction; raises `StalePublish` if the session moved on."""
    comps = validated.compartments
    try:
        with transaction(conn):
            last = last_compartment_end(conn, session_pk)
            if last is not None and last != chunk.start - 1:
                raise StalePublish(f"session compartments end at {last}, but this run read from {chunk.start}",
                                   fix="nothing to do: another historian run published first")
            row = conn.execute("SELECT coalesce(max(sequence), 0) FROM compartments WHERE session_pk = ?",
                               (session_pk,)).fetchone()
            sequence = int(row[0])
            first_sequence = sequence + 1
            ids: list[int] = []
            for c in comps:
                sequence += 1
                start_time, end_time = chunk.times(c.start, c.end)
                cur = conn.execute(
                    "INSERT INTO compartments (session_pk, sequence, start_ordinal, end_ordinal, start_message_id, "
                    "end_message_id, title, p1, p2, p3, p4, content, importance, episode_type, legacy, start_time, "
                    "end_time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
                    (session_pk, sequence, c.start, c.end, chunk.message_id(c.start), chunk.message_id(c.end),
                     c.title, c.p1 or "", c.p2 or "", c.p3 or "", c.p4 or "", c.content or c.p1 or "",
                     c.importance if c.importance is not None else DEFAULT_IMPORTANCE, c.episode_type,
                     start_time, end_time, now_ms))
                ids.append(int(cur.lastrowid))
            events = 0
            for event in validated.events:
                index = event.at_compartment
                compartment_id = ids[index - 1] if index is not None and 1 <= index <= len(ids) else None
                conn.execute("INSERT INTO compartment_events (session_pk, compartment_id, kind, fields_json) "
                             "VALUES (?, ?, ?, ?)",
                             (session_pk, compartment_id, event.kind, json.dumps(event.fields, ensure_ascii=False)))
                events += 1
            new = seen = 0
            if promote_facts and validated.promote_unanchored and project_id:
                new, seen = engine.promote_facts(conn, project_id, session_id or str(session_pk),
                                                 [(f.category, f.content) for f in validated.facts], now_ms)
            result = PublishResult(first_sequence, sequence, len(comps), comps[0].start, comps[-1].end,
                                   new, seen, events)
            set_state(conn, session_pk, LAST_PUBLISH_KEY, {
                "at": now_ms, "provider": provider, "model": model, "sequence_from": first_sequence,
                "sequence_to": sequence, "start": result.start, "end": result.end, "compartments": len(comps),
                "facts_new": new, "facts_seen": seen, "next_start": validated.next_start,
            }, now_ms)
            set_state(conn, session_pk, NOTE_TRIGGER_KEY, now_ms, now_ms)  # the deferred-notes nudge (§2.3)
    except sqlite3.Error as exc:
        raise classify(exc) from exc
    return result


__all__ = [
    "LAST_PUBLISH_KEY",
    "PublishResult",
    "StalePublish",
    "fact_hash",
    "last_compartment_end",
    "normalize_fact",
    "publish",
    "set_state",
    "transaction",
]
