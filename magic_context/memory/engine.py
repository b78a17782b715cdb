"""The memory lifecycle: add with exact de-dup, promote historian facts, edit, archive, restore, merge, remove.

Every write runs in one transaction (a savepoint when the caller already holds one, like the
historian publish) and validates everything before writing, so a refused call changes nothing.
Non-additive changes (update, archive, delete, superseded, restore) go to the mutation log that
m[1] reads as `<memory-updates>`; additions surface through m[0]'s max-id watermark.

`project_id`, when given to an id-based call, scopes it: a memory of another project is "not found"
(what the agent tools need). The CLI passes None: the user may touch any memory by id.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from magic_context.errors import BadInput, NotFound
from magic_context.memory import model
from magic_context.records import Factory, record
from magic_context.store import memories as store
from magic_context.store.db import atomic

MAX_MERGE = 20
#: How long the mutation log keeps a change for m[1]'s `<memory-updates>`; a session whose m[0] is older
#: (no HARD fold for a month) shows the current text only after its next fold.
MUTATION_RETENTION_MS = 30 * model.DAY_MS


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


@record(frozen=True)
class AddResult:
    memory: dict[str, Any]
    created: bool  # False: an exact duplicate existed and its seen_count went up

    def message(self) -> str:
        m = self.memory
        if self.created:
            return f"Saved memory [ID: {m['id']}] in {m['category']}."
        text = f"Memory already exists [ID: {m['id']}] in {m['category']} (seen count incremented)."
        if m.get("status") == model.ARCHIVED:
            text += f" It is archived: restore it (`mc memory restore {m['id']}`) to show it again."
        return text


@record(frozen=True)
class MergeResult:
    memory: dict[str, Any]
    superseded: list[int] = Factory(factory=list)

    def message(self) -> str:
        ids = ", ".join(str(i) for i in self.superseded)
        return (f"Merged memories [{ids}] into canonical memory [ID: {self.memory['id']}] in "
                f"{self.memory['category']}; superseded [{ids}].")


def get(conn: sqlite3.Connection, memory_id: int, *, project_id: str | None = None) -> dict[str, Any]:
    """One memory (any status); NotFound for an unknown id or one of another project."""
    row = store.get(conn, memory_id)
    if row is None or (project_id is not None and row["project_id"] != project_id):
        raise NotFound(f"memory #{memory_id} not found", fix="list ids with `mc memory list --status all`")
    return row


def _mutable(row: dict[str, Any], verb: str) -> None:
    if row["status"] == model.ARCHIVED or row["superseded_by"] is not None:
        raise BadInput(f"memory #{row['id']} is archived or superseded; restore it before {verb}",
                       fix=f"run `mc memory restore {row['id']}` first")


def add(conn: sqlite3.Connection, project_id: str, content: str, category: str, *, source_type: str = model.AGENT,
        source_session: str | None = None, importance: int | None = None, permanent: bool = False,
        now_ms: int | None = None) -> AddResult:
    """Write one fact; an exact duplicate (project, category, normalized hash) only bumps seen_count."""
    now = _now(now_ms)
    text = model.content(content)
    cat = model.category(category, legacy=source_type == model.HISTORIAN)
    source = model.source_type(source_type)
    weight = model.DEFAULT_IMPORTANCE if importance is None else model.importance(importance)
    digest = model.content_hash(text)
    expires = model.historian_expiry(cat, now) if source == model.HISTORIAN and not permanent else None
    with atomic(conn):
        existing = store.find_by_hash(conn, project_id, cat, digest)
        if existing is not None:
            store.bump_seen(conn, existing["id"], now, expires_at=expires)
            return AddResult(store.get(conn, existing["id"]) or existing, created=False)
        new_id = store.insert(conn, {
            "project_id": project_id, "category": cat, "content": text, "normalized_hash": digest,
            "status": model.PERMANENT if permanent else model.ACTIVE, "importance": weight,
            "source_session": source_session, "source_type": source, "seen_count": 1, "retrieval_count": 0,
            "created_at": now, "updated_at": now, "last_seen_at": now, "expires_at": expires})
        return AddResult(store.get(conn, new_id) or {}, created=True)


def promote_facts(conn: sqlite3.Connection, project_id: str, session_id: str | None,
                  facts: Iterable[tuple[str, str]], now_ms: int) -> tuple[int, int]:
    """Historian facts (category, content) into project memory with TTLs; returns (new, seen again).

    Blank or uncategorizable facts are skipped (the historian's output was already validated). A
    repeat only bumps counters, even on an archived row: the user's archive decision stands.
    """
    new = seen = 0
    with atomic(conn):
        store.prune_mutations(conn, now_ms - MUTATION_RETENTION_MS)  # publishes are regular: housekeeping rides them
        for category, content in facts:
            try:
                text = model.content(" ".join(str(content).split()))
                cat = model.category(category, legacy=True)
            except BadInput:
                continue
            result = add(conn, project_id, text, cat, source_type=model.HISTORIAN, source_session=session_id,
                         now_ms=now_ms)
            new, seen = (new + 1, seen) if result.created else (new, seen + 1)
    return new, seen


def list_memories(conn: sqlite3.Connection, project_id: str | None, *, statuses: Iterable[str] | None = None,
                  category: str | None = None, expired: bool | None = False, limit: int | None = None,
                  offset: int = 0, now_ms: int | None = None) -> list[dict[str, Any]]:
    """Memories by id; `statuses` None = active and permanent; `expired` False hides rows past their TTL."""
    wanted = [model.status(s) for s in statuses] if statuses is not None else [model.ACTIVE, model.PERMANENT]
    cat = model.category(category, legacy=True) if category else None
    return store.select(conn, project_id, statuses=wanted, category=cat, now_ms=_now(now_ms), expired=expired,
                        limit=limit, offset=offset)


def edit(conn: sqlite3.Connection, memory_id: int, *, content: str | None = None, category: str | None = None,
         importance: int | None = None, permanent: bool | None = None, project_id: str | None = None,
         now_ms: int | None = None) -> dict[str, Any]:
    """Change content, category, importance or the permanent flag; a person's edit clears a TTL."""
    now = _now(now_ms)
    if content is None and category is None and importance is None and permanent is None:
        raise BadInput("nothing to change", fix="give --content, --category, --importance or --permanent")
    text = model.content(content) if content is not None else None
    cat = model.category(category, legacy=True) if category is not None else None
    weight = model.importance(importance) if importance is not None else None
    with atomic(conn):
        row = get(conn, memory_id, project_id=project_id)
        _mutable(row, "editing")
        fields: dict[str, Any] = {}
        new_text, new_cat = text or row["content"], cat or row["category"]
        if new_text != row["content"] or new_cat != row["category"]:
            digest = model.content_hash(new_text)
            clash = store.find_by_hash(conn, row["project_id"], new_cat, digest)
            if clash is not None and clash["id"] != memory_id:
                raise BadInput(f"memory content already exists as #{clash['id']}",
                               fix=f"merge them (`mc memory merge {memory_id} {clash['id']}`) or archive one")
            fields.update(content=new_text, category=new_cat, normalized_hash=digest, expires_at=None)
        if weight is not None:
            fields["importance"] = weight
        if permanent is not None:
            fields["status"] = model.PERMANENT if permanent else model.ACTIVE
            if permanent:
                fields["expires_at"] = None
        if not fields:
            return row
        fields["updated_at"] = now
        store.update(conn, memory_id, **fields)
        if "content" in fields:
            store.log_mutation(conn, row["project_id"], memory_id, "update", now)
        return store.get(conn, memory_id) or row


def archive(conn: sqlite3.Connection, ids: Iterable[int], *, reason: str | None = None,
            project_id: str | None = None, now_ms: int | None = None) -> list[dict[str, Any]]:
    """Archive memories (all or none); the reason goes to metadata_json.archive_reason."""
    now = _now(now_ms)
    wanted = _distinct(ids, least=1)
    with atomic(conn):
        rows = [get(conn, i, project_id=project_id) for i in wanted]
        for row in rows:
            _mutable(row, "archiving")
        for row in rows:
            meta = _metadata(row)
            if reason:
                meta["archive_reason"] = reason
            store.update(conn, row["id"], status=model.ARCHIVED, updated_at=now,
                         metadata_json=json.dumps(meta, sort_keys=True) if meta else None)
            store.log_mutation(conn, row["project_id"], row["id"], "archive", now)
        return store.get_many(conn, wanted)


def restore(conn: sqlite3.Connection, memory_id: int, *, project_id: str | None = None,
            now_ms: int | None = None) -> dict[str, Any]:
    """Make an archived (or superseded, or expired) memory active again, with no TTL."""
    now = _now(now_ms)
    with atomic(conn):
        row = get(conn, memory_id, project_id=project_id)
        expired = row["expires_at"] is not None and row["expires_at"] <= now
        if row["status"] != model.ARCHIVED and row["superseded_by"] is None and not expired:
            raise BadInput(f"memory #{memory_id} is {row['status']}, not archived, superseded or expired")
        meta = _metadata(row)
        meta.pop("archive_reason", None)
        store.update(conn, memory_id, status=model.ACTIVE if row["status"] == model.ARCHIVED else row["status"],
                     superseded_by=None, expires_at=None, updated_at=now,
                     metadata_json=json.dumps(meta, sort_keys=True) if meta else None)
        store.log_mutation(conn, row["project_id"], memory_id, "restore", now)
        return store.get(conn, memory_id) or row


def merge(conn: sqlite3.Connection, ids: Iterable[int], *, content: str | None = None,
          source_type: str = model.AGENT, project_id: str | None = None, now_ms: int | None = None) -> MergeResult:
    """Fold two or more same-category memories into one canonical memory; the others are superseded.

    The canonical text is `content`, else the first id's. When it hashes to one of the sources that
    row is kept (its id survives); otherwise a new memory is written. Counters are summed, merged_from
    is the sorted union of the sources and their own merged_from, status is permanent if any source was.
    """
    now = _now(now_ms)
    wanted = _distinct(ids, least=2)
    if len(wanted) > MAX_MERGE:
        raise BadInput(f"ids: at most {MAX_MERGE} memories can be merged at once (got {len(wanted)})")
    text = model.content(content) if content is not None else None
    source = model.source_type(source_type)
    with atomic(conn):
        rows = [get(conn, i, project_id=project_id) for i in wanted]
        for row in rows:
            _mutable(row, "merging")
        projects = sorted({r["project_id"] for r in rows})
        if len(projects) > 1:
            raise BadInput("cannot merge memories of different projects (" + ", ".join(projects) + ")")
        categories = sorted({r["category"] for r in rows})
        if len(categories) > 1:
            raise BadInput(f"cannot merge memories from different categories ({', '.join(categories)})",
                           fix="if they are genuine duplicates, one is miscategorized: archive the redundant one")
        project, cat = projects[0], categories[0]
        text = text or next(r["content"] for r in rows if r["id"] == wanted[0])
        digest = model.content_hash(text)
        keep = next((r for r in rows if r["normalized_hash"] == digest), None)
        clash = store.find_by_hash(conn, project, cat, digest)
        if keep is None and clash is not None:
            raise BadInput(f"memory content already exists as #{clash['id']}",
                           fix=f"include #{clash['id']} in the merge, or restore it and merge again")
        merged_from = sorted({i for r in rows for i in [r["id"], *r["merged_from"]]} - {keep["id"] if keep else 0})
        fields = {
            "seen_count": sum(r["seen_count"] for r in rows),
            "retrieval_count": sum(r["retrieval_count"] for r in rows),
            "importance": max(r["importance"] for r in rows),
            "status": model.PERMANENT if any(r["status"] == model.PERMANENT for r in rows) else model.ACTIVE,
            "merged_from": merged_from, "expires_at": None, "updated_at": now,
            "last_seen_at": max(r["last_seen_at"] or 0 for r in rows) or now,
        }
        if keep is not None:
            canonical = keep["id"]
            if text != keep["content"]:
                fields["content"] = text
                store.log_mutation(conn, project, canonical, "update", now)
            store.update(conn, canonical, **fields)
        else:
            canonical = store.insert(conn, {
                "project_id": project, "category": cat, "content": text, "normalized_hash": digest,
                "source_type": source, "source_session": None, "created_at": now, **fields})
        superseded = [r["id"] for r in rows if r["id"] != canonical]
        for mid in superseded:
            store.update(conn, mid, status=model.ARCHIVED, superseded_by=canonical, updated_at=now)
            store.log_mutation(conn, project, mid, "superseded", now, superseded_by=canonical)
        return MergeResult(store.get(conn, canonical) or {}, superseded)


def prune(conn: sqlite3.Connection, *, now_ms: int | None = None) -> int:
    """Drop mutation-log rows past `MUTATION_RETENTION_MS`; how many went."""
    with atomic(conn):
        return store.prune_mutations(conn, _now(now_ms) - MUTATION_RETENTION_MS)


def remove(conn: sqlite3.Connection, ids: Iterable[int], *, project_id: str | None = None,
           now_ms: int | None = None) -> list[int]:
    """Delete memories for good (all or none); rows they superseded keep their archived status."""
    now = _now(now_ms)
    wanted = _distinct(ids, least=1)
    with atomic(conn):
        rows = [get(conn, i, project_id=project_id) for i in wanted]
        for row in rows:
            store.delete(conn, row["id"])
            store.log_mutation(conn, row["project_id"], row["id"], "delete", now)
    return wanted


def record_retrieval(conn: sqlite3.Connection, ids: Iterable[int], *, now_ms: int | None = None) -> int:
    """Count an explicit search returning these memories (never call it for automatic hints)."""
    with atomic(conn):
        return store.record_retrieval(conn, ids, _now(now_ms))


def counts(conn: sqlite3.Connection, project_id: str, *, now_ms: int | None = None) -> dict[str, int]:
    """{active, permanent, archived, expired, superseded, total} for `mc status`."""
    return store.counts(conn, project_id, _now(now_ms))


def public(row: dict[str, Any], *, now_ms: int | None = None) -> dict[str, Any]:
    """A memory as commands and tools show it: no hash, metadata decoded, `expired` spelled out."""
    out = {k: v for k, v in row.items() if k not in ("normalized_hash", "metadata_json")}
    out["metadata"] = _metadata(row) or None
    out["expired"] = row["expires_at"] is not None and row["expires_at"] <= _now(now_ms)
    return out


def _distinct(ids: Iterable[int], *, least: int) -> list[int]:
    wanted = list(dict.fromkeys(int(i) for i in ids))
    if len(wanted) < least:
        raise BadInput(f"ids: give at least {least} distinct memory id{'s' if least > 1 else ''}")
    return wanted


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    try:
        meta = json.loads(row["metadata_json"]) if row["metadata_json"] else {}
    except ValueError:
        meta = {}
    return meta if isinstance(meta, dict) else {}


__all__ = [
    "AddResult",
    "MergeResult",
    "add",
    "archive",
    "counts",
    "edit",
    "get",
    "list_memories",
    "merge",
    "promote_facts",
    "prune",
    "public",
    "record_retrieval",
    "remove",
    "restore",
]
