"""Publish one validated historian answer in a single transaction (reference §4.3 "Publishing").

Writes compartments (p1–p4, importance, episode_type, ordinals, boundary message ids, times), their
events, facts promoted to project memories through `memory.engine.promote_facts` (exact
de-duplication on (project, category, normalized hash) — a repeat bumps `seen_count` — and the
historian TTLs), `session_state.historian_last_publish`, and the notes nudge trigger.

It queues NO drops: the transform removes raw messages at or below the last compartment's end on its
next cache-busting pass (the fold watermark), so a publish never forces a bust. The publish is
optimistic: it refuses (`StalePublish`) when another run moved the session's last compartment end
since the chunk was read. Stdlib only.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from magic_context.errors import MCError
from magic_context.memory import engine, model
from magic_context.records import record
from magic_context.store import compartments as compartment_store
from magic_context.store import state as state_store
from magic_context.store.db import atomic, classify

if TYPE_CHECKING:
    from magic_context.history.chunk import Chunk
    from magic_context.history.validate import ValidatedOutput

LAST_PUBLISH_KEY = "historian_last_publish"
NOTE_TRIGGER_KEY = "note_trigger_at"  # = transform.note_nudge.TRIGGER_KEY (a test checks)
DEFAULT_IMPORTANCE = 50


class StalePublish(MCError):
    """Raised when the session's compartments changed after the chunk was read (another run published)."""


@record(frozen=True)
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


transaction = atomic  # the old name; new code uses `store.db.atomic`


def last_compartment_end(conn: sqlite3.Connection, session_pk: int) -> int | None:
    """The highest published end ordinal of the session, or None before its first compartment."""
    return compartment_store.last_end(conn, session_pk)


set_state = state_store.set_state  # the old home of `store.state.set_state`


def publish(conn: sqlite3.Connection, session_pk: int, validated: ValidatedOutput, chunk: Chunk, *,
            provider: str, model: str | None, now_ms: int, project_id: str | None = None,
            session_id: str | None = None, promote_facts: bool = True) -> PublishResult:
    """Store `validated` (for `chunk`) in one transaction; raises `StalePublish` if the session moved on."""
    comps = validated.compartments
    try:
        with atomic(conn):
            last = last_compartment_end(conn, session_pk)
            if last is not None and last != chunk.start - 1:
                raise StalePublish(f"session compartments end at {last}, but this run read from {chunk.start}",
                                   fix="nothing to do: another historian run published first")
            sequence = compartment_store.last_sequence(conn, session_pk)
            first_sequence = sequence + 1
            ids: list[int] = []
            for c in comps:
                sequence += 1
                start_time, end_time = chunk.times(c.start, c.end)
                ids.append(compartment_store.insert(
                    conn, session_pk, sequence=sequence, start=c.start, end=c.end,
                    start_message_id=chunk.message_id(c.start), end_message_id=chunk.message_id(c.end),
                    title=c.title, p1=c.p1 or "", p2=c.p2 or "", p3=c.p3 or "", p4=c.p4 or "",
                    content=c.content or c.p1 or "",
                    importance=c.importance if c.importance is not None else DEFAULT_IMPORTANCE,
                    episode_type=c.episode_type, start_time=start_time, end_time=end_time, now_ms=now_ms))
            events = 0
            for event in validated.events:
                index = event.at_compartment
                compartment_id = ids[index - 1] if index is not None and 1 <= index <= len(ids) else None
                compartment_store.insert_event(conn, session_pk, compartment_id, event.kind, event.fields)
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
