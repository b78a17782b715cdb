"""OpenCode v1 codec: the `experimental.chat.messages.transform` array `[{info, parts}]`.

Decoding keeps a reference to every original `{info, parts}` object and part; encoding edits those
objects in place and rebuilds each message's `parts` from the blocks that remain, so fields mc does
not know survive. A `tool` part becomes two blocks (the call, then its result when the call ended)
that share the part: removing either removes the whole part, as OpenCode keeps both in one object.

Messages or blocks without `raw` (mc's own, or a session decoded from another format) are rendered
fresh; a fresh tool call picks up its fresh result from a later message (Pi/Anthropic/OpenAI keep
results apart), and a `tool` message left empty by that pairing is omitted.
"""

from __future__ import annotations

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.identity import content_hash

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

HARNESS = m.OPENCODE

#: What OpenCode sends the model instead of a pruned tool output (`state.time.compacted` set).
CLEARED_OUTPUT = "[Old tool result content cleared]"
#: Key suffix of the result block of a tool part (the call block's key is the part id).
RESULT_SUFFIX = ":out"
#: Session id for fresh messages when no message in the array carries one.
DEFAULT_SESSION = "ses_mc"

_ENDED = frozenset({"completed", "error"})
_REASONING_TYPES = frozenset({"reasoning", "thinking"})


def _bad(index: int, field: str, problem: str) -> BadInput:
    return BadInput(f"opencode message {index}: `{field}` {problem}")


def _kind_of(value: Any) -> str:
    return type(value).__name__


def _has_result(state: dict[str, Any]) -> bool:
    return state.get("status") in _ENDED


def _int_or_none(value: Any) -> int | None:
    return m.epoch_ms(value)


# ----------------------------------------------------------------------------------------- decode


def decode(messages: list, *, skim: int = 0) -> list[m.Message]:
    """OpenCode `[{info, parts}]` → canonical messages (raw references kept for `encode`).

    The first `skim` messages that are not the harness's own compaction get only their id, role and
    times (no blocks): see "Skimmed messages" in `wire.model`.
    """
    if not isinstance(messages, list):
        raise BadInput(f"opencode input must be an array of {{info, parts}} (got {_kind_of(messages)})")
    return [_skim_message(i, item) or _decode_message(i, item) if i < skim else _decode_message(i, item)
            for i, item in enumerate(messages)]


def _skim_message(index: int, item: Any) -> m.Message | None:
    info = item.get("info") if isinstance(item, dict) else None
    parts = item.get("parts") if isinstance(item, dict) else None
    if not isinstance(info, dict) or not isinstance(parts, list) or not isinstance(info.get("id"), str) \
            or info.get("role") not in ("user", "assistant") or info.get("summary") is True \
            or any(isinstance(part, dict) and part.get("type") == "compaction" for part in parts):
        return None  # anything unusual gets the full decode (and its checks)
    time = m.obj(info.get("time"))
    return m.Message(info["id"], m.USER if info["role"] == "user" else m.ASSISTANT, ordinal=index,
                     created_at=_int_or_none(time.get("created")), completed_at=_int_or_none(time.get("completed")),
                     raw=item)


def _decode_message(index: int, item: Any) -> m.Message:
    if not isinstance(item, dict):
        raise _bad(index, "message", f"must be an object with info and parts (got {_kind_of(item)})")
    info = item.get("info")
    parts = item.get("parts")
    if not isinstance(info, dict):
        raise _bad(index, "info", f"must be an object (got {_kind_of(info)})")
    if not isinstance(parts, list):
        raise _bad(index, "parts", f"must be an array (got {_kind_of(parts)})")
    msg_id = info.get("id")
    if not isinstance(msg_id, str):
        raise _bad(index, "info.id", f"must be a string (got {_kind_of(msg_id)})")
    role = info.get("role")
    if role not in ("user", "assistant"):
        raise _bad(index, "info.role", f'must be "user" or "assistant" (got {role!r:.40})')

    blocks: list[m.Block] = []
    request = False
    for p, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _bad(index, f"parts[{p}]", f"must be an object (got {_kind_of(part)})")
        ptype = part.get("type")
        if not isinstance(ptype, str):
            raise _bad(index, f"parts[{p}].type", f"must be a string (got {_kind_of(ptype)})")
        request = request or ptype == "compaction"
        _decode_part(index, p, part, ptype, blocks)

    time = m.obj(info.get("time"))
    compaction = None
    if role == "user" and request:
        compaction = m.COMPACTION_REQUEST
    elif role == "assistant" and info.get("summary") is True:
        compaction = m.COMPACTION_SUMMARY
    texts = [b for b in blocks if b.kind == m.TEXT]
    return m.Message(
        id=msg_id,
        role=m.USER if role == "user" else m.ASSISTANT,
        blocks=blocks,
        ordinal=index,
        created_at=_int_or_none(time.get("created")),
        completed_at=_int_or_none(time.get("completed")),
        usage=_usage(info.get("tokens")),
        provider=info.get("providerID") if isinstance(info.get("providerID"), str) else None,
        model=info.get("modelID") if isinstance(info.get("modelID"), str) else None,
        compaction=compaction,
        synthetic=role == "user" and bool(texts) and all(b.synthetic for b in texts),
        raw=item,
    )


def _usage(tokens: Any) -> m.Usage | None:
    if not isinstance(tokens, dict):
        return None
    cache = m.obj(tokens.get("cache"))
    return m.Usage(
        input_tokens=_int_or_none(tokens.get("input")) or 0,
        output_tokens=_int_or_none(tokens.get("output")) or 0,
        cache_read_input_tokens=_int_or_none(cache.get("read")) or 0,
        cache_creation_input_tokens=_int_or_none(cache.get("write")) or 0,
    )


def _decode_part(index: int, p: int, part: dict[str, Any], ptype: str, blocks: list[m.Block]) -> None:
    key = part["id"] if isinstance(part.get("id"), str) else f"p{p}"
    if ptype == "text" and part.get("ignored") is not True:
        text = part.get("text")
        if not isinstance(text, str):
            raise _bad(index, f"parts[{p}].text", f"must be a string (got {_kind_of(text)})")
        meta = part.get("metadata") if isinstance(part.get("metadata"), dict) else None
        blocks.append(m.Block(m.TEXT, text=text, original=text, meta=meta,
                              synthetic=part.get("synthetic") is True, key=key, raw=part))
    elif ptype in _REASONING_TYPES:
        text = part.get("text")
        meta = part.get("metadata") if isinstance(part.get("metadata"), dict) else None
        blocks.append(m.Block(m.REASONING, text=text if isinstance(text, str) else "", meta=meta, key=key, raw=part))
    elif ptype == "tool":
        _decode_tool(index, p, part, key, blocks)
    elif ptype == "file":
        mime = part.get("mime")
        meta = {k: part[k] for k in ("url", "filename") if isinstance(part.get(k), str)}
        blocks.append(m.Block(m.MEDIA, media_type=mime if isinstance(mime, str) else None,
                              meta=meta or None, key=key, raw=part))
    else:  # ignored text, step-start/finish, snapshot, patch, agent, subtask, retry, compaction, unknown
        blocks.append(m.Block(m.OPAQUE, key=key, raw=part))


def _decode_tool(index: int, p: int, part: dict[str, Any], key: str, blocks: list[m.Block]) -> None:
    call_id, name, state = part.get("callID"), part.get("tool"), part.get("state")
    if not isinstance(call_id, str):
        raise _bad(index, f"parts[{p}].callID", f"must be a string (got {_kind_of(call_id)})")
    if not isinstance(name, str):
        raise _bad(index, f"parts[{p}].tool", f"must be a string (got {_kind_of(name)})")
    if not isinstance(state, dict):
        raise _bad(index, f"parts[{p}].state", f"must be an object (got {_kind_of(state)})")
    status = state.get("status")
    if status is not None and not isinstance(status, str):
        raise _bad(index, f"parts[{p}].state.status", f"must be a string (got {_kind_of(status)})")
    meta = part.get("metadata") if isinstance(part.get("metadata"), dict) else None
    blocks.append(m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input=state.get("input"),
                          meta=meta, key=key, raw=part))
    if not _has_result(state):
        return  # pending/running: an open call
    field, is_error = _result_field(state)
    text = _state_value(state, field)
    if not isinstance(text, str):
        raise _bad(index, f"parts[{p}].state.{field}", f"must be a string (got {_kind_of(text)})")
    result_meta = None
    compacted = _compacted(state)
    if compacted is not None:
        text, result_meta = CLEARED_OUTPUT, {"compacted": compacted}
    blocks.append(m.Block(m.TOOL_RESULT, text=text, original=text, tool_id=call_id, tool_name=name,
                          is_error=is_error, meta=result_meta, key=key + RESULT_SUFFIX, raw=part))


def _result_field(state: dict[str, Any]) -> tuple[str, bool]:
    """Where the model-visible result lives: output, error, or an interrupted call's partial output."""
    if state.get("status") == "completed":
        return "output", False
    meta = state.get("metadata")
    if isinstance(meta, dict) and meta.get("interrupted") is True and isinstance(meta.get("output"), str):
        return "metadata.output", False  # OpenCode replays it as if the call had completed
    return "error", True


def _state_value(state: dict[str, Any], field: str) -> Any:
    if field == "metadata.output":
        return state["metadata"]["output"]
    return state.get(field, "")


def _compacted(state: dict[str, Any]) -> Any:
    time = state.get("time")
    if state.get("status") == "completed" and isinstance(time, dict) and time.get("compacted"):
        return time["compacted"]
    return None


# ----------------------------------------------------------------------------------------- encode


def encode(messages: list[m.Message]) -> list:
    """Canonical messages → OpenCode `[{info, parts}]`, editing the original objects in place."""
    session_id = _session_id(messages)
    pairs, consumed = _pair_fresh_results(messages)
    out: list = []
    for msg in messages:
        raw = msg.raw
        if _is_own(raw):
            raw["parts"] = _encode_parts(msg, raw, pairs, consumed)
            out.append(raw)
        else:
            rendered = _render_message(msg, session_id, pairs, consumed)
            if rendered is not None:
                out.append(rendered)
    return out


def _is_own(raw: Any) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("info"), dict) and isinstance(raw.get("parts"), list)


def _session_id(messages: list[m.Message]) -> str:
    for msg in messages:
        if _is_own(msg.raw) and isinstance(msg.raw["info"].get("sessionID"), str):
            return msg.raw["info"]["sessionID"]
    return DEFAULT_SESSION


def _fresh_blocks(msg: m.Message) -> list[m.Block]:
    return [b for b in msg.blocks if not isinstance(b.raw, dict)] if _is_own(msg.raw) else msg.blocks


def _pair_fresh_results(messages: list[m.Message]) -> tuple[dict[int, m.Block], set[int]]:
    """Match each fresh TOOL_RESULT to the latest earlier unanswered fresh TOOL_CALL with its id."""
    open_calls: dict[str | None, list[m.Block]] = {}
    pairs: dict[int, m.Block] = {}
    consumed: set[int] = set()
    for msg in messages:
        for b in _fresh_blocks(msg):
            if b.kind == m.TOOL_CALL:
                open_calls.setdefault(b.tool_id, []).append(b)
            elif b.kind == m.TOOL_RESULT and open_calls.get(b.tool_id):
                pairs[id(open_calls[b.tool_id].pop())] = b
                consumed.add(id(b))
    return pairs, consumed


def _encode_parts(msg: m.Message, raw: dict[str, Any], pairs: dict[int, m.Block], consumed: set[int]) -> list:
    info = raw["info"]
    present: dict[int, int] = {}
    results: dict[int, m.Block] = {}
    for b in msg.blocks:
        if isinstance(b.raw, dict):
            present[id(b.raw)] = present.get(id(b.raw), 0) + 1
            if b.kind == m.TOOL_RESULT:
                results[id(b.raw)] = b
    parts: list = []
    done: set[int] = set()
    for b in msg.blocks:
        part = b.raw
        if not isinstance(part, dict):
            if id(b) in consumed:
                continue
            fresh = _render_block(b, msg, info.get("sessionID", DEFAULT_SESSION), len(parts), pairs)
            if fresh is not None:
                parts.append(fresh)
            continue
        if id(part) in done:
            continue
        done.add(id(part))
        if part.get("type") == "tool" and isinstance(part.get("state"), dict):
            if present[id(part)] < (2 if _has_result(part["state"]) else 1):
                continue  # call or result removed: the part goes as a whole
            result = results.get(id(part))
            if result is not None and result.changed:
                _write_result(part["state"], result.text)
        elif b.kind == m.TEXT and b.changed:
            part["text"] = b.text
        parts.append(part)
    return parts


def _write_result(state: dict[str, Any], text: str) -> None:
    """Write a changed result; a pruned output is replaced whole and un-pruned so the model sees `text`."""
    time = state.get("time")
    if _compacted(state) is not None and isinstance(time, dict):
        del time["compacted"]
        state["output"] = text
        return
    field, _ = _result_field(state)
    if field == "metadata.output":
        state["metadata"]["output"] = text
    else:  # one string: "insert the prefix" and "replace the whole output" both give `text`
        state[field] = text


# ------------------------------------------------------------------------------------ fresh render


def _part_id(msg_id: str, index: int) -> str:
    return f"prt_mc{content_hash(msg_id)[:12]}{index:04d}"


def _render_message(msg: m.Message, session_id: str, pairs: dict[int, m.Block], consumed: set[int]) -> dict | None:
    assistant = msg.role == m.ASSISTANT
    time: dict[str, Any] = {"created": msg.created_at or 0}
    info: dict[str, Any] = {"id": msg.id, "sessionID": session_id, "role": "assistant" if assistant else "user",
                            "time": time}
    if assistant:
        if msg.completed_at is not None:
            time["completed"] = msg.completed_at
        if msg.provider:
            info["providerID"] = msg.provider
        if msg.model:
            info["modelID"] = msg.model
        if msg.usage is not None:
            u = msg.usage
            info["tokens"] = {"input": u.input_tokens, "output": u.output_tokens, "reasoning": 0,
                              "cache": {"read": u.cache_read_input_tokens, "write": u.cache_creation_input_tokens}}
        if msg.compaction == m.COMPACTION_SUMMARY:
            info["summary"] = True
    parts: list = []
    for b in msg.blocks:
        if id(b) in consumed:
            continue
        part = _render_block(b, msg, session_id, len(parts), pairs)
        if part is not None:
            parts.append(part)
    if msg.role == m.TOOL and not parts:
        return None  # every result went into its call's tool part
    return {"info": info, "parts": parts}


def _render_block(b: m.Block, msg: m.Message, session_id: str, index: int, pairs: dict[int, m.Block]) -> dict | None:
    msg_id = msg.raw["info"]["id"] if _is_own(msg.raw) else msg.id
    base = {"id": _part_id(msg_id, index), "sessionID": session_id, "messageID": msg_id}
    if b.kind in (m.TEXT, m.TOOL_RESULT):  # an unpaired result can only travel as text
        part = {**base, "type": "text", "text": b.text}
        if b.synthetic or b.kind == m.TOOL_RESULT:
            part["synthetic"] = True
        return part
    if b.kind == m.REASONING:
        part = {**base, "type": "reasoning", "text": b.text, "time": {"start": msg.created_at or 0}}
        if b.meta and all(isinstance(v, dict) for v in b.meta.values()):  # OpenCode's own provider-keyed shape
            part["metadata"] = b.meta
        return part
    if b.kind == m.TOOL_CALL:
        return _render_tool(b, base, msg, pairs.get(id(b)))
    if b.kind == m.MEDIA:
        return _render_file(b, base)
    return None  # an OPAQUE block of another format cannot be rendered


def _render_tool(call: m.Block, base: dict, msg: m.Message, result: m.Block | None) -> dict:
    args = call.input if call.input is not None else {}
    now = msg.created_at or 0
    if result is None:
        state: dict[str, Any] = {"status": "pending", "input": args, "raw": ""}
    elif result.is_error:
        state = {"status": "error", "input": args, "error": result.text, "time": {"start": now, "end": now}}
    else:
        state = {"status": "completed", "input": args, "output": result.text, "title": "", "metadata": {},
                 "time": {"start": now, "end": now}}
    name = call.tool_name if call.tool_name is not None else result.tool_name if result is not None else None
    return {**base, "type": "tool", "callID": call.tool_id or "", "tool": name if name is not None else "unknown",
            "state": state}


def _render_file(b: m.Block, base: dict) -> dict:
    mime = b.media_type or "application/octet-stream"
    meta = b.meta or {}
    url = meta.get("url")
    if not isinstance(url, str):
        data = meta.get("data")
        url = f"data:{mime};base64,{data}" if isinstance(data, str) else ""
    part = {**base, "type": "file", "mime": mime, "url": url}
    if isinstance(meta.get("filename"), str):
        part["filename"] = meta["filename"]
    return part


__all__ = ["CLEARED_OUTPUT", "DEFAULT_SESSION", "HARNESS", "RESULT_SUFFIX", "decode", "encode"]
