"""Pi codec: the `AgentMessage[]` payload of Pi's `context` event (the `message` of session entries).

Roles map to canonical messages as follows; every original object is kept in `raw` and edited in
place by `encode`, so round trips are exact:

* `user` / `custom` (`hookMessage` before v3) → USER, content string or text/image blocks
  (`custom` is marked synthetic: an extension injected it);
* `assistant` → ASSISTANT with text / thinking / toolCall blocks;
* `toolResult` → TOOL with one TOOL_RESULT block (key "out"; its text parts joined by "\\n"),
  followed by MEDIA/OPAQUE blocks for its images and unknown parts;
* `bashExecution` (a user `!cmd`) → USER with one TEXT block (key "output") holding the command
  output, the command and exit code in `meta`. The model sees it as user text, so tagging and
  drop/placeholder work as for any text; pairing checks are unaffected because it answers no call.
  With `excludeFromContext` Pi never sends it, so the block is OPAQUE;
* `branchSummary` / `compactionSummary` → USER with one TEXT block (key "summary") and the
  BRANCH_SUMMARY / COMPACTION_SUMMARY mark;
* any other role → USER with one OPAQUE block carrying the whole message untouched.

Pi messages carry no id: ids come from one `IdDeriver` per decode over the raw message objects.
"""

from __future__ import annotations

from datetime import datetime

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.identity import IdDeriver

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

HARNESS = m.PI

_CONTENT_ROLES = frozenset({"user", "custom", "hookMessage"})
_SUMMARIES = {"branchSummary": m.BRANCH_SUMMARY, "compactionSummary": m.COMPACTION_SUMMARY}


def _bad(index: int, field: str, problem: str) -> BadInput:
    return BadInput(f"pi message {index}: `{field}` {problem}")


def _kind_of(value: Any) -> str:
    return type(value).__name__


def _timestamp(value: Any) -> int | None:
    """Epoch milliseconds from a number or an ISO-8601 string; None when neither."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return m.epoch_ms(value)
    if isinstance(value, str):
        try:
            return m.epoch_ms(datetime.fromisoformat(value).timestamp() * 1000)
        except (ValueError, OverflowError, OSError):
            return None
    return None


def _is_text(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "text"


# ----------------------------------------------------------------------------------------- decode


_SKIM_ROLES = {"user": m.USER, "custom": m.USER, "assistant": m.ASSISTANT, "toolResult": m.TOOL}


def decode(messages: list, *, skim: int = 0) -> list[m.Message]:
    """Pi `AgentMessage[]` → canonical messages (raw references kept for `encode`).

    The first `skim` messages get only their id, digest, role and timestamp (no blocks): the pass
    asks for that on history it already folded away (see "Skimmed messages" in `wire.model`).
    """
    if not isinstance(messages, list):
        raise BadInput(f"pi input must be an array of AgentMessage objects (got {_kind_of(messages)})")
    ids = IdDeriver()
    out = []
    for i, item in enumerate(messages):
        role = _SKIM_ROLES.get(str(item.get("role"))) if i < skim and isinstance(item, dict) else None
        if role is None:
            out.append(_decode_message(i, item, ids))
        else:
            msg_id, digest = ids.next(item)
            out.append(m.Message(msg_id, role, ordinal=i, created_at=_timestamp(item.get("timestamp")), raw=item,
                                 digest=digest))
    return out


def _decode_message(index: int, item: Any, ids: IdDeriver) -> m.Message:
    if not isinstance(item, dict):
        raise _bad(index, "message", f"must be an object (got {_kind_of(item)})")
    role = item.get("role")
    if not isinstance(role, str):
        raise _bad(index, "role", f"must be a string (got {_kind_of(role)})")
    msg_id, digest = ids.next(item)
    msg = m.Message(id=msg_id, role=m.USER, ordinal=index, created_at=_timestamp(item.get("timestamp")), raw=item,
                    digest=digest)
    if role in _CONTENT_ROLES:
        msg.blocks = _decode_content(index, item.get("content"))
        msg.synthetic = role != "user"
    elif role == "assistant":
        content = item.get("content")
        if not isinstance(content, list):
            raise _bad(index, "content", f"must be an array (got {_kind_of(content)})")
        msg.role = m.ASSISTANT
        msg.blocks = [_decode_block(index, k, block) for k, block in enumerate(content)]
        msg.usage = _usage(item.get("usage"))
        msg.provider = item.get("provider") if isinstance(item.get("provider"), str) else None
        msg.model = item.get("model") if isinstance(item.get("model"), str) else None
    elif role == "toolResult":
        msg.role = m.TOOL
        msg.blocks = _decode_tool_result(index, item)
    elif role == "bashExecution":
        msg.blocks = [_decode_bash(index, item)]
    elif role in _SUMMARIES:
        summary = item.get("summary")
        if not isinstance(summary, str):
            raise _bad(index, "summary", f"must be a string (got {_kind_of(summary)})")
        msg.compaction = _SUMMARIES[role]
        msg.blocks = [m.Block(m.TEXT, text=summary, original=summary, key="summary", raw=item)]
    else:  # a role this codec does not know: carried whole, never tagged
        msg.blocks = [m.Block(m.OPAQUE, key="p0", raw=item)]
    return msg


def _usage(usage: Any) -> m.Usage | None:
    if not isinstance(usage, dict):
        return None

    def num(name: str) -> int:
        value = usage.get(name)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    return m.Usage(input_tokens=num("input"), output_tokens=num("output"),
                   cache_read_input_tokens=num("cacheRead"), cache_creation_input_tokens=num("cacheWrite"))


def _decode_content(index: int, content: Any) -> list[m.Block]:
    if isinstance(content, str):
        return [m.Block(m.TEXT, text=content, original=content, key="p0", raw=content)]
    if not isinstance(content, list):
        raise _bad(index, "content", f"must be a string or an array (got {_kind_of(content)})")
    return [_decode_block(index, k, block) for k, block in enumerate(content)]


def _decode_block(index: int, k: int, block: Any) -> m.Block:
    if not isinstance(block, dict):
        raise _bad(index, f"content[{k}]", f"must be an object (got {_kind_of(block)})")
    btype = block.get("type")
    key = f"p{k}"
    if btype == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise _bad(index, f"content[{k}].text", f"must be a string (got {_kind_of(text)})")
        return m.Block(m.TEXT, text=text, original=text, key=key, raw=block)
    if btype == "thinking":
        text = block.get("thinking")
        found = {name: block[name] for name in ("thinkingSignature", "redacted") if name in block}
        return m.Block(m.REASONING, text=text if isinstance(text, str) else "", meta=found or None, key=key, raw=block)
    if btype == "toolCall":
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str):
            raise _bad(index, f"content[{k}].id", f"must be a string (got {_kind_of(call_id)})")
        if not isinstance(name, str):
            raise _bad(index, f"content[{k}].name", f"must be a string (got {_kind_of(name)})")
        meta = {"thoughtSignature": block["thoughtSignature"]} if "thoughtSignature" in block else None
        return m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input=block.get("arguments"),
                       meta=meta, key=key, raw=block)
    if btype == "image":
        mime, data = block.get("mimeType"), block.get("data")
        return m.Block(m.MEDIA, media_type=mime if isinstance(mime, str) else None,
                       meta={"data": data} if isinstance(data, str) else None, key=key, raw=block)
    return m.Block(m.OPAQUE, key=key, raw=block)


def _decode_tool_result(index: int, item: dict[str, Any]) -> list[m.Block]:
    call_id, name, content = item.get("toolCallId"), item.get("toolName"), item.get("content")
    if not isinstance(call_id, str):
        raise _bad(index, "toolCallId", f"must be a string (got {_kind_of(call_id)})")
    others: list[m.Block] = []
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for k, block in enumerate(content):
            if _is_text(block):
                if not isinstance(block.get("text"), str):
                    raise _bad(index, f"content[{k}].text", f"must be a string (got {_kind_of(block.get('text'))})")
                texts.append(block["text"])
            else:
                others.append(_decode_block(index, k, block))
        text = "\n".join(texts)
    else:
        raise _bad(index, "content", f"must be an array (got {_kind_of(content)})")
    result = m.Block(m.TOOL_RESULT, text=text, original=text, tool_id=call_id,
                     tool_name=name if isinstance(name, str) else None, is_error=item.get("isError") is True,
                     key="out", raw=content)
    return [result, *others]


def _decode_bash(index: int, item: dict[str, Any]) -> m.Block:
    if item.get("excludeFromContext") is True:
        return m.Block(m.OPAQUE, key="output", raw=item)
    output = item.get("output", "")
    if not isinstance(output, str):
        raise _bad(index, "output", f"must be a string (got {_kind_of(output)})")
    meta = {"command": item.get("command"), "exitCode": item.get("exitCode")}
    return m.Block(m.TEXT, text=output, original=output, meta=meta, key="output", raw=item)


# ----------------------------------------------------------------------------------------- encode


def encode(messages: list[m.Message]) -> list:
    """Canonical messages → Pi `AgentMessage[]`, editing the original objects in place."""
    names: dict[str | None, str | None] | None = None  # call id → tool name, built once a fresh render needs it
    out: list = []
    for msg in messages:
        raw = msg.raw
        if not (isinstance(raw, dict) and isinstance(raw.get("role"), str)):
            if names is None:
                names = {b.tool_id: b.tool_name for x in messages for b in x.blocks if b.kind == m.TOOL_CALL}
            out.extend(_render_message(msg, names))
            continue
        role = raw["role"]
        if role in _CONTENT_ROLES or role == "assistant":
            _encode_content(msg, raw)
        elif role == "toolResult":
            _encode_tool_result(msg, raw)
        elif role == "bashExecution" or role in _SUMMARIES:
            field = "summary" if role in _SUMMARIES else "output"
            kept = next((b for b in msg.blocks if b.raw is raw), None)
            if kept is None and raw.get("excludeFromContext") is not True:
                raw[field] = ""  # the only block was dropped; the message stays where it was
            elif kept is not None and kept.changed:
                raw[field] = kept.text
        out.append(raw)
    return out


def _encode_content(msg: m.Message, raw: dict[str, Any]) -> None:
    content = raw.get("content")
    if isinstance(content, str) and len(msg.blocks) <= 1 and all(b.raw is content for b in msg.blocks):
        raw["content"] = msg.blocks[0].text if msg.blocks else ""
        return
    new: list = []
    for b in msg.blocks:
        if isinstance(b.raw, dict) and b.raw is not raw:
            if b.kind == m.TEXT and b.changed:
                b.raw["text"] = b.text
            new.append(b.raw)
        elif isinstance(b.raw, str) and b.kind == m.TEXT:  # was the whole string content
            new.append({"type": "text", "text": b.text})
        else:
            new.extend(_render_block(b))
    raw["content"] = new


def _encode_tool_result(msg: m.Message, raw: dict[str, Any]) -> None:
    content = raw.get("content")
    result = next((b for b in msg.blocks if b.kind == m.TOOL_RESULT and b.raw is content), None)
    fresh = [part for b in msg.blocks if not isinstance(b.raw, dict) and b is not result for part in _render_block(b)]
    if isinstance(content, str):
        if not fresh:
            raw["content"] = result.text if result is not None else ""
        else:
            raw["content"] = ([{"type": "text", "text": result.text}] if result is not None else []) + fresh
        return
    kept = {id(b.raw) for b in msg.blocks if isinstance(b.raw, dict)}
    new = [part for part in content or () if (result is not None if _is_text(part) else id(part) in kept)]
    if result is not None and result.changed:
        _write_joined(new, result.text)
    raw["content"] = new + fresh


def _write_joined(parts: list, text: str) -> None:
    """Write a changed result over its text parts: insert an added prefix into the first, else replace all."""
    texts = [p for p in parts if _is_text(p)]
    current = "\n".join(p["text"] for p in texts)
    if text == current:
        return
    if not texts:
        parts.insert(0, {"type": "text", "text": text})
    elif text.endswith(current):
        texts[0]["text"] = text[: len(text) - len(current)] + texts[0]["text"]
    else:
        texts[0]["text"] = text
        dropped = {id(p) for p in texts[1:]}
        parts[:] = [p for p in parts if id(p) not in dropped]


# ------------------------------------------------------------------------------------ fresh render


def _render_block(b: m.Block) -> list[dict[str, Any]]:
    """One content block for a block without raw (an empty list when it cannot be rendered)."""
    if b.kind in (m.TEXT, m.TOOL_RESULT):
        return [{"type": "text", "text": b.text}]
    if b.kind == m.REASONING:
        block: dict[str, Any] = {"type": "thinking", "thinking": b.text}
        meta = b.meta or {}
        nested = m.obj(meta.get("anthropic"))
        for signature in (meta.get("thinkingSignature"), meta.get("signature"), nested.get("signature")):
            if isinstance(signature, str):
                block["thinkingSignature"] = signature
                break
        if isinstance(meta.get("redacted"), bool):
            block["redacted"] = meta["redacted"]
        return [block]
    if b.kind == m.TOOL_CALL:
        args = b.input if isinstance(b.input, dict) else {} if b.input is None else {"input": b.input}
        name = b.tool_name if b.tool_name is not None else "unknown"
        return [{"type": "toolCall", "id": b.tool_id or "", "name": name, "arguments": args}]
    if b.kind == m.MEDIA:
        return [_render_media(b)]
    return []  # an OPAQUE block of another format cannot be rendered


def _render_media(b: m.Block) -> dict[str, Any]:
    meta = b.meta or {}
    mime = b.media_type or "application/octet-stream"
    data = meta.get("data")
    url = meta.get("url")
    if not isinstance(data, str) and isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        mime = b.media_type or head
    if isinstance(data, str):
        return {"type": "image", "data": data, "mimeType": mime}
    label = meta.get("filename") or url or mime
    return {"type": "text", "text": f"[attachment: {label}]"}


def _render_result(b: m.Block, ts: int, names: dict[str | None, str | None]) -> dict[str, Any]:
    name = b.tool_name if b.tool_name is not None else names.get(b.tool_id)
    return {"role": "toolResult", "toolCallId": b.tool_id or "", "toolName": name if name is not None else "",
            "content": [{"type": "text", "text": b.text}], "isError": b.is_error, "timestamp": ts}


def _render_message(msg: m.Message, names: dict[str | None, str | None]) -> list[dict[str, Any]]:
    """Pi messages for one canonical message: tool results travel as their own toolResult messages."""
    ts = msg.created_at or 0
    results = [_render_result(b, ts, names) for b in msg.blocks if b.kind == m.TOOL_RESULT]
    content = [part for b in msg.blocks if b.kind != m.TOOL_RESULT for part in _render_block(b)]
    if msg.role == m.TOOL:
        if results and content:
            results[-1]["content"].extend(content)
        return results if results else [{"role": "user", "content": content, "timestamp": ts}] if content else []
    if msg.role == m.ASSISTANT:
        u = msg.usage or m.Usage()
        usage = {"input": u.input_tokens, "output": u.output_tokens, "cacheRead": u.cache_read_input_tokens,
                 "cacheWrite": u.cache_creation_input_tokens, "totalTokens": u.total_input + u.output_tokens,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if msg.provider:
            message["provider"] = msg.provider
        if msg.model:
            message["model"] = msg.model
        stop = "toolUse" if any(b.kind == m.TOOL_CALL for b in msg.blocks) else "stop"
        message.update(usage=usage, stopReason=stop, timestamp=ts)
        return [message, *results]
    if msg.compaction in (m.COMPACTION_SUMMARY, m.BRANCH_SUMMARY) and not results:
        if msg.compaction == m.COMPACTION_SUMMARY:
            return [{"role": "compactionSummary", "summary": msg.text(), "tokensBefore": 0, "timestamp": ts}]
        return [{"role": "branchSummary", "summary": msg.text(), "fromId": "", "timestamp": ts}]
    return results + ([{"role": "user", "content": content, "timestamp": ts}] if content else [])


__all__ = ["HARNESS", "decode", "encode"]
