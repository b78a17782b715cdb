"""Claude Code transcript JSONL → the Anthropic Messages arrays Claude Code sent.

Reconstruction:
1. Index entries by `uuid`. An entry without a `parentUuid` key (very old or hand-made files) hangs
   off the previous indexed entry.
2. Pick the leaf: the last user/assistant entry of the thread (not `isMeta`). A main-thread file skips
   `isSidechain` entries; a file whose entries are ALL sidechain (a subagent transcript) is its own thread.
3. Walk `parentUuid` from the leaf to the root. `logicalParentUuid` is not followed unless asked
   (`follow_logical_parent=True` reaches the history before a compaction, for its calls only).
4. Parallel tool calls make the chain a DAG: each streamed tool_use block is its own entry sharing
   `message.id`, and each result hangs off its own tool_use entry, so a single-parent walk misses
   siblings. Off-chain entries with the chain's `message.id`s, and off-chain tool_result entries whose
   parent is one of them, are put back right after that response's last on-chain entry.
5. Build Anthropic `{role, content}` messages: entries of one response (same `message.id`) are merged,
   also across the tool_result entries that streaming tool execution wrote in between (those results move
   after the merged message, as the API requires); consecutive user entries are merged. A
   `compact_boundary` system entry starts a new context; the index of the user message holding the
   `isCompactSummary` entry is reported in `meta["compact_summary"]` so the caller can mark it (Claude
   Code merges the user text that follows into that message too, so the mark covers it).
6. A call happens before each merged assistant message; its response is the merged API message.

Skipped: `isMeta` entries, attachments, progress, system entries other than compact_boundary, and
lines outside the chain (summary, queue-operation, last-prompt, mode, file-history-snapshot, ...).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from magic_context.records import Factory, record
from magic_context.wire import model
from magic_context.wire.importers.base import (
    CLAUDE_CODE,
    RecordedCall,
    RecordedSession,
    anthropic_usage,
    bad,
    iso_ms,
    parse_jsonl,
    read_bytes,
)


@record
class _Node:
    line: int
    entry: dict[str, Any]
    uuid: str
    parent: str | None


@record
class _Out:
    """One merged message being built, plus what is needed to describe its call."""

    message: dict[str, Any]
    msg_id: str | None = None
    results_only: bool = False  # a user message holding only tool_result blocks
    compact_summary: bool = False
    entries: list[dict[str, Any]] = Factory(factory=list)


def load_claude_code(path: str | Path, data: bytes | None = None, *,
                     follow_logical_parent: bool = False) -> RecordedSession:
    """Read a Claude Code transcript; one RecordedCall per API response on the current chain."""
    path = Path(path)
    rows = parse_jsonl(path, read_bytes(path) if data is None else data)
    nodes, order, types = _index(path, rows)
    convo = [n for n in order if n.entry.get("type") in ("user", "assistant")]
    subagent = bool(convo) and all(n.entry.get("isSidechain") for n in convo)

    def eligible(node: _Node) -> bool:
        e = node.entry
        return (e.get("type") in ("user", "assistant") and not e.get("isMeta")
                and bool(e.get("isSidechain")) == subagent)

    leaf = next((n for n in reversed(order) if eligible(n)), None)
    chain = _walk(path, nodes, leaf, follow_logical_parent) if leaf else []
    chain, recovered = _recover_parallel(chain, [n for n in order if eligible(n)])

    segments: list[list[_Out]] = [[]]
    boundaries = 0
    for node in chain:
        e = node.entry
        if e.get("type") == "system" and e.get("subtype") == "compact_boundary":
            boundaries += 1
            segments.append([])
        elif eligible(node):
            _add(path, segments[-1], node)
    segments = [s for s in segments if s] or [[]]

    calls: list[RecordedCall] = []
    for seg in segments:
        messages = [o.message for o in seg]
        summaries = [i for i, o in enumerate(seg) if o.compact_summary]
        for j, out in enumerate(seg):
            if out.message["role"] == "assistant":
                calls.append(_call(messages[:j], out, [i for i in summaries if i < j]))
    final = segments[-1]
    meta: dict[str, Any] = {
        "subagent": subagent,
        "leaf": leaf.uuid if leaf else None,
        "session_id": (leaf.entry.get("sessionId") if leaf else None),
        "version": (leaf.entry.get("version") if leaf else None),
        "line_types": dict(types),
        "chain_entries": len(chain),
        "recovered_parallel_entries": recovered,
        "compact_boundaries": boundaries,
        "compact_summary": [i for i, o in enumerate(final) if o.compact_summary],
        "summaries": [e.get("summary") for _, e in rows if e.get("type") == "summary"],
    }
    return RecordedSession(path=path, format=CLAUDE_CODE, harness=model.ANTHROPIC, system=None,
                           calls=calls, messages=[o.message for o in final], meta=meta)


def _index(path: Path, rows: list[tuple[int, dict[str, Any]]]
           ) -> tuple[dict[str, _Node], list[_Node], Counter[str]]:
    nodes: dict[str, _Node] = {}
    order: list[_Node] = []
    types: Counter[str] = Counter()
    previous: str | None = None
    for line, entry in rows:
        kind = entry.get("type")
        types[str(kind)] += 1
        uuid = entry.get("uuid")
        if not isinstance(uuid, str):
            if kind in ("user", "assistant"):
                raise bad(path, line, f"a {kind} entry has no uuid")
            continue
        if kind in ("user", "assistant") and not isinstance(entry.get("message"), dict):
            raise bad(path, line, f'a {kind} entry needs a "message" object')
        parent = entry.get("parentUuid", previous)  # no key at all: hang off the previous entry
        node = _Node(line, entry, uuid, parent if isinstance(parent, str) else None)
        nodes[uuid] = node
        order.append(node)
        previous = uuid
    return nodes, order, types


def _walk(path: Path, nodes: dict[str, _Node], leaf: _Node, follow_logical: bool) -> list[_Node]:
    chain: list[_Node] = []
    seen: set[str] = set()
    node: _Node | None = leaf
    while node is not None:
        if node.uuid in seen:
            raise bad(path, node.line, f"parentUuid cycle at {node.uuid}")
        seen.add(node.uuid)
        chain.append(node)
        parent = node.parent
        if parent is None and follow_logical and node.entry.get("subtype") == "compact_boundary":
            logical = node.entry.get("logicalParentUuid")
            parent = logical if isinstance(logical, str) else None
        node = nodes.get(parent) if parent else None
    chain.reverse()
    return chain


def _msg_id(node: _Node) -> str | None:
    value = node.entry["message"].get("id") if node.entry.get("type") == "assistant" else None
    return value if isinstance(value, str) else None


def _has_result(node: _Node) -> bool:
    content = node.entry["message"].get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _recover_parallel(chain: list[_Node], thread: list[_Node]) -> tuple[list[_Node], int]:
    """Put back the sibling tool_use entries and tool results a single-parent walk skipped."""
    on_chain = {n.uuid for n in chain}
    groups: dict[str, list[_Node]] = {}
    results_by_parent: dict[str, list[_Node]] = {}
    for n in thread:
        mid = _msg_id(n)
        if mid is not None:
            groups.setdefault(mid, []).append(n)
        elif n.entry.get("type") == "user" and n.parent and _has_result(n):
            results_by_parent.setdefault(n.parent, []).append(n)
    anchors: dict[str, _Node] = {}  # message.id -> its last on-chain entry
    for n in chain:
        mid = _msg_id(n)
        if mid is not None:
            anchors[mid] = n
    inserts: dict[str, list[_Node]] = {}
    recovered = 0
    for mid, anchor in anchors.items():
        group = groups.get(mid, [])
        extra = [n for n in group if n.uuid not in on_chain]
        results = [r for member in group for r in results_by_parent.get(member.uuid, ()) if r.uuid not in on_chain]
        extra += sorted(results, key=lambda r: r.line)
        if extra:
            for n in extra:
                on_chain.add(n.uuid)
            inserts[anchor.uuid] = extra
            recovered += len(extra)
    if not inserts:
        return chain, 0
    out: list[_Node] = []
    for n in chain:
        out.append(n)
        out.extend(inserts.get(n.uuid, ()))
    return out, recovered


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return []


def _add(path: Path, seg: list[_Out], node: _Node) -> None:
    """Append one transcript entry to the segment, merging per the Anthropic API's rules."""
    e = node.entry
    content = e["message"].get("content")
    if e["type"] == "assistant":
        if not isinstance(content, list):
            raise bad(path, node.line, "an assistant entry's message.content must be a list")
        mid = _msg_id(node)
        target = None
        if mid is not None and seg:
            if seg[-1].msg_id == mid:
                target = seg[-1]
            elif len(seg) > 1 and seg[-1].results_only and seg[-2].msg_id == mid:
                target = seg[-2]  # streamed tool execution wrote results mid-response
        if target is not None:
            target.message["content"] = [*target.message["content"], *content]
            target.entries.append(e)
        else:
            seg.append(_Out({"role": "assistant", "content": list(content)}, msg_id=mid, entries=[e]))
        return
    if not isinstance(content, list | str):
        raise bad(path, node.line, "a user entry's message.content must be a string or a list")
    summary = bool(e.get("isCompactSummary"))
    results_only = isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    last = seg[-1] if seg else None
    if last is not None and last.message["role"] == "user":
        last.message["content"] = [*_as_blocks(last.message["content"]), *_as_blocks(content)]
        last.results_only = last.results_only and results_only
        last.compact_summary = last.compact_summary or summary
        last.entries.append(e)
        return
    seg.append(_Out({"role": "user", "content": content}, results_only=results_only,
                    compact_summary=summary, entries=[e]))


def _call(messages: list[Any], out: _Out, summaries: list[int]) -> RecordedCall:
    first = out.entries[0]["message"]
    usages = [x["message"].get("usage") for x in out.entries if isinstance(x["message"].get("usage"), dict)]
    # Streamed entries repeat the usage; the one with the most output tokens is the final count.
    usage = max(reversed(usages), key=lambda u: u.get("output_tokens") or 0) if usages else None
    response = {**first, "content": out.message["content"]}
    last = out.entries[-1]["message"]
    if "stop_reason" in last:
        response["stop_reason"] = last["stop_reason"]
    if usage is not None:
        response["usage"] = usage
    model_name = first.get("model")
    return RecordedCall(
        messages=messages,
        response=response,
        usage=anthropic_usage(usage),
        model=model_name if isinstance(model_name, str) else None,
        timestamp_ms=iso_ms(out.entries[0].get("timestamp")),
        meta={"compact_summary": summaries} if summaries else None,
    )


__all__ = ["load_claude_code"]
