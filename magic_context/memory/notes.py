"""Notes (reference §2): things to come back to, for one session or for every session of a project.

A note with a `surface_condition` ("when the upstream fix is released") is stored `pending`; the
dreamer evaluates conditions later and marks it `ready` (`mark_ready`). The agent never sees note
text unasked: the transform appends a one-line count nudge (`nudge_text`) after a trigger, and the
agent reads them with `ctx_note read` / `mc note list`.
"""

from __future__ import annotations

import sqlite3
import time
from enum import StrEnum
from typing import Any

from magic_context.errors import BadInput, NotFound
from magic_context.store import notes as store
from magic_context.store import raw as raw_store
from magic_context.store.db import atomic


class NoteType(StrEnum):
    """`notes.type`: a session's note, or one every session of the project sees."""

    SESSION = "session"
    PROJECT = "project"


class NoteStatus(StrEnum):
    """`notes.status`: a conditional note is pending until the dreamer finds its condition met (ready)."""

    ACTIVE = "active"
    PENDING = "pending"
    READY = "ready"
    DISMISSED = "dismissed"


SESSION, PROJECT = NoteType.SESSION, NoteType.PROJECT
ACTIVE, PENDING, READY, DISMISSED = NoteStatus.ACTIVE, NoteStatus.PENDING, NoteStatus.READY, NoteStatus.DISMISSED
STATUSES = tuple(NoteStatus)
MAX_CONTENT_BYTES = 16 * 1024


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{field}: note {field.replace('_', ' ')} is empty", fix=f"give the {field} as text")
    text = value.strip()
    if len(text.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise BadInput(f"{field}: {len(text.encode('utf-8'))} bytes, over the {MAX_CONTENT_BYTES}-byte limit")
    return text


def add(conn: sqlite3.Connection, content: str, *, project_id: str, session_pk: int | None = None,
        scope: str = SESSION, surface_condition: str | None = None, now_ms: int | None = None) -> dict[str, Any]:
    """Write a note. `scope` session needs `session_pk`; project notes may name their writer session.

    A note written from a session is anchored at that session's last stored message (§2.1 `anchor_ordinal`,
    shown as `↳ @msg N` by the session's search, §3.6); one written outside any session has no anchor.
    """
    now = _now(now_ms)
    text = _text(content, "content")
    condition = _text(surface_condition, "surface_condition") if surface_condition is not None else None
    if scope not in (SESSION, PROJECT):
        raise BadInput(f"scope: unknown note scope {scope!r}", fix="use session or project")
    if scope == SESSION and session_pk is None:
        raise BadInput("a session note needs a session", fix="pass --session ID, or --project-note")
    with atomic(conn):
        anchor_ordinal = raw_store.last_ordinal(conn, session_pk) if session_pk is not None else None
        note_id = store.insert(conn, {
            "type": scope, "status": PENDING if condition else ACTIVE, "content": text, "session_pk": session_pk,
            "project_id": project_id, "surface_condition": condition, "created_at": now, "updated_at": now,
            "anchor_ordinal": anchor_ordinal})
        return store.get(conn, note_id) or {}


def list_notes(conn: sqlite3.Connection, *, session_pk: int | None = None, project_id: str | None = None,
               statuses: list[str] | None = None, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Newest first; `statuses` None = everything not dismissed."""
    wanted = statuses if statuses is not None else [ACTIVE, PENDING, READY]
    for status in wanted:
        if status not in STATUSES:
            raise BadInput(f"status: unknown note status {status!r}", fix="use one of " + ", ".join(STATUSES))
    return store.select(conn, session_pk=session_pk, project_id=project_id, statuses=wanted, limit=limit,
                        offset=offset)


def scope_label(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None) -> str:
    """How an error names the notes a caller sees: "session ses_x's notes and project git:…'s notes"."""
    from magic_context.store import sessions

    parts = []
    if session_pk is not None:
        info = sessions.session_info(conn, session_pk) or {}
        parts.append(f"session {info.get('session_id') or f'#{session_pk}'}'s notes")
    if project_id is not None:
        parts.append(f"project {project_id}'s " + ("notes" if session_pk is None else "project notes"))
    return " and ".join(parts)


def dismiss(conn: sqlite3.Connection, note_id: int, *, session_pk: int | None = None, project_id: str | None = None,
            now_ms: int | None = None) -> dict[str, Any]:
    """Mark a note dismissed, only if the caller's scope lists it (the same scope as `list_notes`).

    The scope is a session (its session notes, plus its project's project notes when `project_id` is given)
    or a project alone (all its notes): a caller never dismisses another project's or session's note by id.
    NotFound (exit 2), nothing written, when the note is unknown, out of scope or already dismissed.
    """
    if session_pk is None and project_id is None:
        raise BadInput(f"note #{note_id}: dismiss needs a scope", fix="give a session or a project")
    now = _now(now_ms)
    with atomic(conn):
        row = store.get_in_scope(conn, note_id, session_pk=session_pk, project_id=project_id)
        if row is None:
            raise NotFound(f"note #{note_id} not found among {scope_label(conn, session_pk, project_id)}",
                           fix="list them with `mc note list` (same --session/--project), or pass the note's "
                               "--session ID or --project DIR")
        if row["status"] == DISMISSED:
            raise NotFound(f"note #{note_id} is already dismissed")
        store.update(conn, note_id, status=DISMISSED, dismissed_at=now, updated_at=now)
        return store.get(conn, note_id) or {}


def mark_ready(conn: sqlite3.Connection, note_id: int, reason: str, *, now_ms: int | None = None) -> dict[str, Any]:
    """The dreamer found a pending note's condition met."""
    now = _now(now_ms)
    with atomic(conn):
        row = store.get(conn, note_id)
        if row is None or row["status"] != PENDING:
            raise NotFound(f"note #{note_id} is not a pending note with a condition")
        store.update(conn, note_id, status=READY, ready_at=now, ready_reason=reason, last_checked_at=now,
                     updated_at=now)
        return store.get(conn, note_id) or {}


def mark_checked(conn: sqlite3.Connection, note_id: int, *, now_ms: int | None = None) -> None:
    """The dreamer looked at a pending note and found its condition not met (yet)."""
    with atomic(conn):
        store.update(conn, note_id, last_checked_at=_now(now_ms))


def counts(conn: sqlite3.Connection, *, session_pk: int | None, project_id: str | None) -> dict[str, int]:
    return store.counts(conn, session_pk, project_id)


def nudge_text(deferred: int, ready: int) -> str:
    """The §2.3 count nudge appended to the newest user message ("" when there is nothing to read)."""
    from magic_context.transform import note_nudge

    return note_nudge.text(deferred, ready)


__all__ = ["ACTIVE", "DISMISSED", "PENDING", "PROJECT", "READY", "SESSION", "STATUSES", "NoteStatus", "NoteType",
           "add", "counts", "dismiss", "list_notes", "mark_checked", "mark_ready", "nudge_text", "scope_label"]
