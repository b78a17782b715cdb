"""Pi session JSONL (versions 1-3) → the `AgentMessage[]` arrays Pi's `context` event saw.

Pi builds the context for each LLM call from the current branch: the path from the leaf (the last
entry) to the root. When a `compaction` entry is on the path the context is the summary message,
then the entries from `firstKeptEntryId` up to the compaction, then everything after it. A request
is sent before each assistant message, so call k holds the context just before the k-th assistant
message on the branch. Aborted/errored assistant messages count: a request was made for them.

Version handling (done conceptually, the file is never rewritten):
* v1 entries carry no ids: the entry at file index i (header = 0) gets id i and the previous entry
  as parent, and a compaction's `firstKeptEntryIndex` names that index;
* v2 role `hookMessage` is read as v3 role `custom` (a shallow copy with the new role).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from magic_context.wire import model
from magic_context.wire.importers.base import (
    PI_SESSION,
    RecordedCall,
    RecordedSession,
    bad,
    iso_ms,
    make_usage,
    parse_jsonl,
    read_bytes,
)

# Entry types that never become messages (extension state, settings, bookkeeping).
NON_MESSAGE_ENTRIES = frozenset({"custom", "model_change", "thinking_level_change", "label", "session_info"})


def load_pi(path: str | Path, data: bytes | None = None) -> RecordedSession:
    """Read a Pi session file; one RecordedCall per assistant message on the current branch."""
    path = Path(path)
    rows = parse_jsonl(path, read_bytes(path) if data is None else data)
    if not rows:
        raise bad(path, None, "empty file: expected a Pi session header line")
    header_line, header = rows[0]
    if header.get("type") != "session":
        raise bad(path, header_line, 'the first line is not a Pi session header (type "session")')
    version = header.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad(path, header_line, f"unsupported session version {version!r}")

    entries = rows[1:]
    path_entries = _linear_path(entries) if version < 2 else _branch_path(path, entries)
    calls, messages, stats = _build_calls(path, path_entries, version)

    types = Counter(str(e.get("type")) for _, e in entries)
    meta: dict[str, Any] = {
        "version": version,
        "header": header,
        "entry_types": dict(types),
        "branch_entries": len(path_entries),
        "off_branch_entries": len(entries) - len(path_entries),
        **stats,
    }
    return RecordedSession(path=path, format=PI_SESSION, harness=model.PI, system=None,
                           calls=calls, messages=messages, meta=meta)


# An entry on the path: (line, entry, key) where key is its id (v1: its file index).
_PathEntry = tuple[int, dict[str, Any], Any]


def _linear_path(entries: list[tuple[int, dict[str, Any]]]) -> list[_PathEntry]:
    """v1: the file is the branch; entry i (header = 0) has id i."""
    return [(line, entry, index) for index, (line, entry) in enumerate(entries, start=1)]


def _branch_path(path: Path, entries: list[tuple[int, dict[str, Any]]]) -> list[_PathEntry]:
    """v2/v3: walk parentId from the leaf (the last entry) to the root."""
    if not entries:
        return []
    by_id: dict[Any, tuple[int, dict[str, Any]]] = {}
    for line, entry in entries:
        entry_id = entry.get("id")
        if entry_id is None:
            raise bad(path, line, f"entry of type {entry.get('type')!r} has no id (required from version 2)")
        by_id[entry_id] = (line, entry)
    result: list[_PathEntry] = []
    seen: set[Any] = set()
    line, entry = entries[-1]
    while True:
        key = entry.get("id")
        if key in seen:
            raise bad(path, line, f"parentId cycle at entry {key!r}")
        seen.add(key)
        result.append((line, entry, key))
        parent = by_id.get(entry.get("parentId"))
        if parent is None:
            break
        line, entry = parent
    result.reverse()
    return result


def _build_calls(path: Path, path_entries: list[_PathEntry], version: int
                 ) -> tuple[list[RecordedCall], list[Any], dict[str, Any]]:
    """Replay Pi's context building entry by entry, recording the context before each assistant message."""
    position = {key: pos for pos, (_, _, key) in enumerate(path_entries)}
    produced: list[Any] = []  # per path position: the message it contributes, or None
    context: list[Any] = []
    calls: list[RecordedCall] = []
    compactions = 0
    for pos, (line, entry, _) in enumerate(path_entries):
        if entry.get("type") == "compaction":
            compactions += 1
            first = entry.get("firstKeptEntryId")
            if first is None and version < 2:
                first = entry.get("firstKeptEntryIndex")
            start = position.get(first, pos) if isinstance(first, str | int) else pos
            start = min(start, pos)  # a first-kept entry after the compaction keeps nothing
            summary = {
                "role": "compactionSummary",
                "summary": entry.get("summary", ""),
                "tokensBefore": entry.get("tokensBefore"),
                "timestamp": iso_ms(entry.get("timestamp")),
            }
            context = [summary, *(m for m in produced[start:pos] if m is not None)]
            produced.append(None)
            continue
        message = _entry_message(path, line, entry, version)
        produced.append(message)
        if message is None:
            continue
        if message.get("role") == "assistant":
            calls.append(RecordedCall(
                messages=list(context),
                response=message,
                usage=_usage(message.get("usage")),
                model=message.get("model") if isinstance(message.get("model"), str) else None,
                timestamp_ms=iso_ms(message.get("timestamp")) or iso_ms(entry.get("timestamp")),
            ))
        context.append(message)

    roles = Counter(str(m.get("role")) for m in produced if m is not None)
    tool_calls = sum(
        1 for m in produced if m is not None and m.get("role") == "assistant"
        for block in (m.get("content") or []) if isinstance(block, dict) and block.get("type") == "toolCall"
    )
    return calls, context, {"roles": dict(roles), "tool_calls": tool_calls, "compactions": compactions}


def _entry_message(path: Path, line: int, entry: dict[str, Any], version: int) -> dict[str, Any] | None:
    """The AgentMessage an entry contributes to the context (Pi's appendMessage), or None."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad(path, line, 'a "message" entry needs a "message" object with a "role"')
        if version < 3 and message["role"] == "hookMessage":
            return {**message, "role": "custom"}
        return message
    if kind == "custom_message":
        return {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content"),
            "display": entry.get("display"),
            "details": entry.get("details"),
            "timestamp": iso_ms(entry.get("timestamp")),
        }
    if kind == "branch_summary":
        if not entry.get("summary"):
            return None
        return {
            "role": "branchSummary",
            "summary": entry["summary"],
            "fromId": entry.get("fromId"),
            "timestamp": iso_ms(entry.get("timestamp")),
        }
    if kind in NON_MESSAGE_ENTRIES:
        return None
    return None  # unknown entry types (newer Pi) are not sent to the model


def _usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    return make_usage(usage.get("input"), usage.get("output"), usage.get("cacheRead"), usage.get("cacheWrite"))


__all__ = ["NON_MESSAGE_ENTRIES", "load_pi"]
