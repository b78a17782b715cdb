"""`opencode export` JSON (1.x: `{info, messages: [{info, parts}]}`) → the `WithParts[]` arrays OpenCode
passed to its messages-transform hook.

OpenCode makes one assistant message per LLM call (step), so a call happens before each assistant
message. Its context is the history before it filtered the way OpenCode's `filterCompacted` does:
once a compaction request (a user message with a `compaction` part) has a finished, error-free
`summary: true` assistant answering it, the context restarts at that request:
[compaction request, its summary, the kept tail (`tail_start_id` … request), newer messages].
The summary call itself still sees the full history (its request is not complete yet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magic_context.wire import model
from magic_context.wire.importers.base import (
    OPENCODE_EXPORT,
    RecordedCall,
    RecordedSession,
    as_int,
    bad,
    make_usage,
    parse_json,
    read_bytes,
)


def load_opencode_export(path: str | Path, doc: Any = None) -> RecordedSession:
    """Read an `opencode export` document; one RecordedCall per assistant message."""
    path = Path(path)
    if doc is None:
        doc = parse_json(path, read_bytes(path))
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list):
        raise bad(path, None, 'expected an OpenCode export: a JSON object with "info" and a "messages" list')
    for index, item in enumerate(messages):
        _check(path, index, item)

    calls: list[RecordedCall] = []
    for index, item in enumerate(messages):
        info = item["info"]
        if info["role"] != "assistant":
            continue
        time = model.obj(info.get("time"))
        created = time.get("created")
        calls.append(RecordedCall(
            messages=filter_compacted(messages[:index]),
            response=item,
            usage=_usage(info.get("tokens")),
            model=info.get("modelID") if isinstance(info.get("modelID"), str) else None,
            timestamp_ms=created if isinstance(created, int) and not isinstance(created, bool) else None,
        ))
    session = model.obj(doc.get("info"))
    meta = {
        "session": session,
        "session_id": session.get("id"),
        "opencode_version": session.get("version"),
        "stored_messages": len(messages),
    }
    return RecordedSession(path=path, format=OPENCODE_EXPORT, harness=model.OPENCODE, system=None,
                           calls=calls, messages=filter_compacted(messages), meta=meta)


def _check(path: Path, index: int, item: Any) -> None:
    if isinstance(item, dict) and "info" not in item and "type" in item:
        raise bad(path, None, f"messages[{index}] is an OpenCode 2.x session message, which is not supported yet",
                  fix="export the session with OpenCode 1.x")
    info = item.get("info") if isinstance(item, dict) else None
    if not isinstance(info, dict) or not isinstance(item.get("parts"), list):
        raise bad(path, None, f'messages[{index}] is not an OpenCode message ({{"info", "parts"}})')
    if info.get("role") not in ("user", "assistant"):
        raise bad(path, None, f"messages[{index}].info.role must be user or assistant, got {info.get('role')!r}")


def _compaction_part(item: dict[str, Any]) -> dict[str, Any] | None:
    return next((p for p in item["parts"] if isinstance(p, dict) and p.get("type") == "compaction"), None)


def filter_compacted(messages: list[Any]) -> list[Any]:
    """The context OpenCode builds from stored messages (see the module docstring)."""
    completed: set[Any] = set()
    for c in range(len(messages) - 1, -1, -1):
        info = messages[c]["info"]
        if info["role"] == "assistant":
            if info.get("summary") and info.get("finish") and not info.get("error"):
                completed.add(info.get("parentID"))
            continue
        part = _compaction_part(messages[c]) if info.get("id") in completed else None
        if part is None:
            continue
        request_id = info.get("id")
        after = messages[c + 1:]
        summaries = [m for m in after if m["info"]["role"] == "assistant" and m["info"].get("summary")
                     and m["info"].get("parentID") == request_id]
        rest = [m for m in after if not any(m is s for s in summaries)]
        tail: list[Any] = []
        tail_id = part.get("tail_start_id")
        if tail_id is not None:
            start = next((i for i in range(c) if messages[i]["info"].get("id") == tail_id), None)
            if start is not None:
                tail = messages[start:c]
        return [messages[c], *summaries, *tail, *rest]
    return list(messages)


def _usage(tokens: Any) -> dict[str, int] | None:
    """OpenCode counts reasoning apart from output; providers bill it as output, so it is added back."""
    if not isinstance(tokens, dict):
        return None
    cache = model.obj(tokens.get("cache"))
    output = as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
    return make_usage(tokens.get("input"), output, cache.get("read"), cache.get("write"))


__all__ = ["filter_compacted", "load_opencode_export"]
