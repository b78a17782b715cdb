"""Export and import memories as JSON Lines: one memory per line, every column, round-trip exact.

Import validates the whole input first and names the first bad line and field; only then does it
write, in one transaction, into the target project (so a file exported from one project identity can
re-home its memories into another). Ids are assigned afresh; `superseded_by` and `merged_from` are
re-pointed through the old→new id map. A line whose (category, normalized content) already exists
in the target project is skipped, so importing the same file twice changes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from magic_context.errors import BadInput
from magic_context.memory import model
from magic_context.records import record
from magic_context.store import memories as store
from magic_context.store.db import atomic

FORMAT = "mc-memory/1"
EXPORTED = ("id", "category", "content", "status", "importance", "source_type", "source_session", "seen_count",
            "retrieval_count", "created_at", "updated_at", "last_seen_at", "last_retrieved_at", "expires_at",
            "superseded_by", "merged_from", "metadata")
_INTS = ("seen_count", "retrieval_count", "created_at", "updated_at", "last_seen_at", "last_retrieved_at",
         "expires_at", "superseded_by")


@record(frozen=True)
class ImportResult:
    imported: int
    existing: int
    ids: dict[int, int]  # exported id -> id in this database (new or the existing duplicate)


def export_lines(conn: sqlite3.Connection, project_id: str | None) -> Iterator[str]:
    """One JSON object per memory of the project (every status), by id; no trailing newlines."""
    for row in store.select(conn, project_id):
        item = {k: row[k] for k in EXPORTED if k != "metadata"}
        item["metadata"] = json.loads(row["metadata_json"]) if row["metadata_json"] else None
        item["project_id"] = row["project_id"]
        item["format"] = FORMAT
        yield json.dumps(item, ensure_ascii=False, sort_keys=True)


def _field_error(number: int, name: str, problem: str) -> BadInput:
    return BadInput(f"line {number}: field {name!r}: {problem}", fix="fix that line; nothing was imported")


def parse_line(text: str, number: int) -> dict[str, Any]:
    """One exported line, validated and normalized; BadInput names the line and field."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})",
                       fix="each line must be one JSON object; nothing was imported") from exc
    if not isinstance(item, dict):
        raise BadInput(f"line {number}: expected a JSON object, got {type(item).__name__}",
                       fix="each line must be one JSON object; nothing was imported")
    fmt = item.get("format", FORMAT)
    if fmt != FORMAT:
        raise _field_error(number, "format", f"unsupported {fmt!r} (this mc reads {FORMAT})")
    out: dict[str, Any] = {}
    required: dict[str, Callable[[Any], object]] = {
        "content": model.content, "category": lambda v: model.category(v, legacy=True)}
    optional: dict[str, tuple[Callable[[Any], object], object]] = {
        "status": (model.status, model.ACTIVE), "source_type": (model.source_type, model.USER),
        "importance": (model.importance, model.DEFAULT_IMPORTANCE)}
    for name, check in required.items():
        if name not in item:
            raise _field_error(number, name, "missing")
        try:
            out[name] = check(item[name])
        except BadInput as exc:
            raise _field_error(number, name, exc.message.split(": ", 1)[-1]) from exc
    for name, (check, default) in optional.items():
        value = item.get(name)
        try:
            out[name] = default if value is None else check(value)
        except BadInput as exc:
            raise _field_error(number, name, exc.message.split(": ", 1)[-1]) from exc
    for name in ("id", *_INTS):
        value = item.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _field_error(number, name, f"must be a non-negative integer, got {value!r}")
        out[name] = value
    merged = item.get("merged_from") or []
    if not isinstance(merged, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in merged):
        raise _field_error(number, "merged_from", f"must be a list of integer ids, got {merged!r}")
    out["merged_from"] = merged
    session = item.get("source_session")
    if session is not None and not isinstance(session, str):
        raise _field_error(number, "source_session", f"must be a string, got {session!r}")
    out["source_session"] = session
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _field_error(number, "metadata", f"must be an object, got {type(metadata).__name__}")
    out["metadata_json"] = json.dumps(metadata, sort_keys=True) if metadata else None
    return out


def parse(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every non-blank line parsed; BadInput at the first bad one (lines count from 1)."""
    items = [parse_line(text, n) for n, text in enumerate(lines, 1) if text.strip()]
    seen: dict[int, int] = {}
    for n, item in enumerate(items, 1):
        if item["id"] is not None:
            if item["id"] in seen:
                raise BadInput(f"id {item['id']} appears twice (memories {seen[item['id']]} and {n})",
                               fix="each exported memory must have its own id; nothing was imported")
            seen[item["id"]] = n
    return items


def import_lines(conn: sqlite3.Connection, project_id: str, lines: Iterable[str], *, now_ms: int,
                 dry_run: bool = False) -> ImportResult:
    """Validate all lines, then write them into `project_id` in one transaction (nothing on error)."""
    items = parse(lines)
    ids: dict[int, int] = {}
    imported = existing = 0
    with atomic(conn, commit=not dry_run):
        pending_links: list[tuple[int, dict[str, Any]]] = []
        for item in items:
            digest = model.content_hash(item["content"])
            found = store.find_by_hash(conn, project_id, item["category"], digest)
            if found is not None:
                existing += 1
                if item["id"] is not None:
                    ids[item["id"]] = found["id"]
                continue
            row = {k: item[k] for k in ("category", "content", "status", "importance", "source_type",
                                        "source_session", "seen_count", "retrieval_count", "last_seen_at",
                                        "last_retrieved_at", "expires_at", "metadata_json")}
            row.update(project_id=project_id, normalized_hash=digest,
                       seen_count=item["seen_count"] or 1, retrieval_count=item["retrieval_count"] or 0,
                       created_at=item["created_at"] or now_ms, updated_at=item["updated_at"] or now_ms)
            new_id = store.insert(conn, row)
            imported += 1
            if item["id"] is not None:
                ids[item["id"]] = new_id
            pending_links.append((new_id, item))
        for new_id, item in pending_links:
            by = ids.get(item["superseded_by"]) if item["superseded_by"] is not None else None
            merged = sorted({ids[i] for i in item["merged_from"] if i in ids})
            if by is not None or merged:
                store.update(conn, new_id, superseded_by=by, merged_from=merged)
    return ImportResult(imported, existing, ids)


def import_dry_run(conn: sqlite3.Connection, project_id: str, lines: Iterable[str], *, now_ms: int) -> ImportResult:
    """What `import_lines` would do, rolled back."""
    return import_lines(conn, project_id, lines, now_ms=now_ms, dry_run=True)


__all__ = ["EXPORTED", "FORMAT", "ImportResult", "export_lines", "import_dry_run", "import_lines", "parse",
           "parse_line"]
