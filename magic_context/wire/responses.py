"""OpenAI Responses codec: the `input` items of a `POST /v1/responses` body <-> canonical messages.

Codex sends only this API. Every item is one canonical message, except that the items of one model
reply travel together: a run of consecutive reply items (`reasoning`, an assistant `message`,
`function_call`, `custom_tool_call` and the provider's other `*_call` items) is one ASSISTANT message
whose `raw` is the list of those items. A reply holding reasoning is `atomic`: the API ties every item
of a reply to its reasoning by id ("reasoning was provided without its required following item", "…
provided without its required 'reasoning' item" are 400s), so the reply is served whole or not at all
and its reasoning is never edited.

* `message` items (also the typeless `{role, content}` form): user → USER; developer and system →
  SYSTEM (kept in place, never tagged or folded). `input_text` / `output_text` parts are TEXT,
  `input_image` / `input_file` / `input_audio` MEDIA, anything else (refusal, …) OPAQUE.
* `function_call` / `custom_tool_call` → TOOL_CALL by `call_id` (JSON `arguments` parsed into `input`
  and written back as the original string while unchanged; a custom call's `input` is its string).
  `function_call_output` / `custom_tool_call_output` → a TOOL message holding one TOOL_RESULT (its
  `output`: a string, or an array whose `input_text` parts are its text).
* `reasoning` → REASONING (summary text), never edited: `encrypted_content` and ids stay as they are.
* Other items are kept verbatim as OPAQUE blocks: `*_call` items in their reply, `*_output` items as
  TOOL messages, anything else as user messages (`compaction` marked as the harness's own summary).

Block keys: "i<k>" for the item at index k of the message (0 outside replies), "i<k>.<j>" for content
part j of that item, "i<k>.c" for string content. Ids are derived from the raw item (or reply list).
`decode` also takes a reply list as one element, which is how stored messages come back from the raw
store. There are no timestamps and no per-message usage in a request. Messages without `raw` (mc's
own, or another format's) are rendered fresh; only reasoning with `encrypted_content` can be rendered.
"""

from __future__ import annotations

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.identity import IdDeriver
from magic_context.wire.openai import arguments_for, data_url_type, parse_arguments, render_arguments

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

HARNESS = m.OPENAI_RESPONSES

_ROLES = {"user": m.USER, "system": m.SYSTEM, "developer": m.SYSTEM}
_CALLS = frozenset({"function_call", "custom_tool_call"})
_RESULTS = frozenset({"function_call_output", "custom_tool_call_output"})
_REPLY_EXTRAS = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request"})  # reply items not named `*_call`
_COMPACTION = frozenset({"compaction", "compaction_summary"})
_TEXT_PARTS = frozenset({"input_text", "output_text"})
_MEDIA_PARTS = frozenset({"input_image", "input_file", "input_audio"})

_kind = m.json_kind


def _bad(where: str, what: str) -> BadInput:
    return BadInput(f"openai-responses {where}: {what}")


def _type(item: dict) -> str:
    """An item's type; the typeless `{role, content}` form is a message."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else ""


def _in_reply(item: Any) -> bool:
    """Whether an item is output of a model reply (it travels with the reply's other items)."""
    if not isinstance(item, dict):
        return False
    kind = _type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind.endswith("_call") or kind in _REPLY_EXTRAS


def _units(items: list) -> list[tuple[Any, list[tuple[str, Any]]]]:
    """(raw, [(where, item)…]) per canonical message: a reply's raw is the list of its items."""
    out: list[tuple[Any, list[tuple[str, Any]]]] = []
    run: list[tuple[str, Any]] = []
    for i, element in enumerate(items):
        if _in_reply(element):
            run.append((f"input[{i}]", element))
            continue
        if run:
            out.append(([item for _, item in run], run))
            run = []
        if isinstance(element, list):  # a reply as the raw store keeps it
            out.append((element, [(f"input[{i}][{j}]", item) for j, item in enumerate(element)]))
        else:
            out.append((element, [(f"input[{i}]", element)]))
    if run:
        out.append(([item for _, item in run], run))
    return out


def _role(raw: Any) -> tuple[str, str | None] | None:
    """(canonical role, compaction mark) of a unit, or None when it is malformed (decoding says why)."""
    if isinstance(raw, list):
        return m.ASSISTANT, None
    if not isinstance(raw, dict):
        return None
    kind = _type(raw)
    if kind == "message":
        role = _ROLES.get(name) if isinstance(name := raw.get("role"), str) else None
        return (role, None) if role is not None else None
    if not kind:
        return None
    if kind in _RESULTS or kind.endswith("_output"):
        return m.TOOL, None
    return m.USER, (m.COMPACTION_SUMMARY if kind in _COMPACTION else None)


# ----------------------------------------------------------------------------------------- decode


def _parts_text(parts: list, where: str) -> str:
    """Text of an array of parts: its `input_text` / `output_text` parts joined by newlines."""
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _bad(f"{where}[{j}]", f"expected an object, got {_kind(part)}")
        if isinstance(part.get("type"), str) and part["type"] in _TEXT_PARTS:
            if not isinstance(part.get("text"), str):
                raise _bad(f"{where}[{j}].text", f"expected a string, got {_kind(part.get('text'))}")
            texts.append(part["text"])
    return "\n".join(texts)


def _media(part: dict, kind: str, key: str) -> m.Block:
    meta: dict[str, Any] = {}
    if kind == "input_image":
        url = part.get("image_url")
        media_type = data_url_type(url)
        if isinstance(url, str):
            meta["url"] = url
    elif kind == "input_file":
        media_type = data_url_type(part.get("file_data"))
        meta = {k: part[k] for k in ("filename", "file_url") if isinstance(part.get(k), str)}
    else:
        audio = m.obj(part.get("input_audio"))
        media_type = f"audio/{audio['format']}" if isinstance(audio.get("format"), str) else None
    return m.Block(m.MEDIA, media_type=media_type, meta=meta or None, key=key, raw=part)


def _content_blocks(content: Any, where: str, k: int) -> list[m.Block]:
    if content is None:
        return []
    if isinstance(content, str):
        return [m.Block(m.TEXT, text=content, original=content, key=f"i{k}.c", raw=content)] if content else []
    if not isinstance(content, list):
        raise _bad(f"{where}.content", f"expected a string or an array of parts, got {_kind(content)}")
    blocks = []
    for j, part in enumerate(content):
        here, key = f"{where}.content[{j}]", f"i{k}.{j}"
        if not isinstance(part, dict):
            raise _bad(here, f"expected an object, got {_kind(part)}")
        kind = part.get("type") if isinstance(part.get("type"), str) else None
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise _bad(f"{here}.text", f"expected a string, got {_kind(text)}")
            blocks.append(m.Block(m.TEXT, text=text, original=text, key=key, raw=part))
        elif kind in _MEDIA_PARTS:
            blocks.append(_media(part, kind, key))
        else:
            blocks.append(m.Block(m.OPAQUE, key=key, raw=part))
    return blocks


def _string(item: dict, name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise _bad(f"{where}.{name}", f"expected a string, got {_kind(value)}")
    return value


def _call(item: dict, kind: str, where: str, key: str, names: dict[str, str]) -> m.Block:
    call_id = _string(item, "call_id", where)
    name = _string(item, "name", where)
    names[call_id] = name
    if kind == "function_call":
        return m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input=parse_arguments(item.get("arguments")),
                       key=key, raw=item)
    return m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input=item.get("input"), meta={"type": kind},
                   key=key, raw=item)


def _result(item: dict, kind: str, where: str, names: dict[str, str]) -> m.Block:
    call_id = _string(item, "call_id", where)
    output = item.get("output")
    if isinstance(output, str):
        text = output
    elif isinstance(output, list):
        text = _parts_text(output, f"{where}.output")
    else:
        raise _bad(f"{where}.output", f"expected a string or an array of parts, got {_kind(output)}")
    return m.Block(m.TOOL_RESULT, text=text, original=text, tool_id=call_id, tool_name=names.get(call_id),
                   meta={"type": kind} if kind != "function_call_output" else None, key="i0", raw=item)


def _reasoning(item: dict, key: str) -> m.Block:
    """Summary (and any plain reasoning) text for reading; the item itself is never edited."""
    texts = [p["text"] for field in ("summary", "content") if isinstance(item.get(field), list)
             for p in item[field] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    meta = {k: item[k] for k in ("encrypted_content", "summary") if k in item}
    return m.Block(m.REASONING, text="\n".join(texts), meta=meta or None, key=key, raw=item)


def _reply_blocks(items: list[tuple[str, Any]], names: dict[str, str]) -> list[m.Block]:
    blocks: list[m.Block] = []
    for k, (where, item) in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(where, f"expected an item object, got {_kind(item)}")
        kind = _type(item)
        if kind == "message":
            blocks += _content_blocks(item.get("content"), where, k)
        elif kind in _CALLS:
            blocks.append(_call(item, kind, where, f"i{k}", names))
        elif kind == "reasoning":
            blocks.append(_reasoning(item, f"i{k}"))
        else:
            blocks.append(m.Block(m.OPAQUE, key=f"i{k}", raw=item))
    return blocks


def _item_blocks(where: str, item: Any, names: dict[str, str]) -> list[m.Block]:
    if not isinstance(item, dict):
        raise _bad(where, f"expected an item object, got {_kind(item)}")
    kind = _type(item)
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            shown = repr(role[:40]) if isinstance(role, str) else _kind(role)
            raise _bad(f"{where}.role", f"unknown role {shown} (expected user, assistant, system or developer)")
        return _content_blocks(item.get("content"), where, 0)
    if kind in _RESULTS:
        return [_result(item, kind, where, names)]
    if not kind:
        raise _bad(f"{where}.type", f"expected an item type (or a message `role`), got {_kind(item.get('type'))}")
    return [m.Block(m.OPAQUE, key="i0", raw=item)]


def _atomic(raw: Any) -> bool:
    return isinstance(raw, list) and any(isinstance(x, dict) and x.get("type") == "reasoning" for x in raw)


def decode(messages: list, *, skim: int = 0) -> list[m.Message]:
    """Canonical messages for a Responses `input` array (ids derived, ordinal = message index).

    The first `skim` messages other than system ones and the harness's own compaction get only their
    id, digest and role (no blocks): see "Skimmed messages" in `wire.model`.
    """
    if not isinstance(messages, list):
        raise _bad("input", f"expected an array of items, got {_kind(messages)}")
    ids = IdDeriver()
    names: dict[str, str] = {}  # call_id -> tool name, to name the outputs that answer it
    out: list[m.Message] = []
    for n, (raw, items) in enumerate(_units(messages)):
        found = _role(raw)
        msg_id, digest = ids.next(raw)
        if n < skim and found is not None and found[0] != m.SYSTEM and found[1] is None:
            out.append(m.Message(msg_id, found[0], ordinal=n, raw=raw, digest=digest, atomic=_atomic(raw)))
            continue
        blocks = _reply_blocks(items, names) if isinstance(raw, list) else _item_blocks(*items[0], names)
        role, compaction = found if found is not None else (m.USER, None)  # (_item_blocks raised otherwise)
        out.append(m.Message(msg_id, role, blocks, ordinal=n, compaction=compaction, raw=raw, digest=digest,
                             atomic=_atomic(raw)))
    return out


# ----------------------------------------------------------------------------------------- encode


def _item_index(key: str) -> int | None:
    """Which item of its message a block belongs to, from its key ("i3", "i3.1", "i3.1:dropped")."""
    if not key.startswith("i"):
        return None
    head = key[1:].split(".", 1)[0].split(":", 1)[0]
    return int(head) if head.isdigit() else None


def _had_blocks(item: dict) -> bool:
    """Whether decoding gave this item a block (a message with empty content gets none)."""
    return _type(item) != "message" or bool(item.get("content"))


def _render_part(block: m.Block, part_type: str, *, images: bool = True) -> dict | None:
    """A fresh content part; an image comes from its payload in meta (`url`, or Pi-style base64 `data`)."""
    if block.kind == m.TEXT:
        return {"type": part_type, "text": block.text}
    if block.kind != m.MEDIA:
        return None
    meta = block.meta or {}
    media_type, url, data = block.media_type or "", meta.get("url"), meta.get("data")
    if images and (media_type.startswith("image/") or (isinstance(url, str) and url.startswith("data:image/"))):
        if isinstance(url, str) and url.startswith(("https://", "http://", "data:")):
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        if isinstance(data, str):
            return {"type": "input_image", "image_url": f"data:{media_type};base64,{data}", "detail": "auto"}
    return {"type": part_type, "text": f"[{block.media_type or 'media'} attachment omitted]"}


def _write_content(item: dict, blocks: list[m.Block], part_type: str) -> None:
    """Rebuild a message item's content from its remaining blocks (a string stays a string where it can)."""
    old = item.get("content")
    if not blocks:
        return
    if isinstance(old, str) and len(blocks) == 1 and blocks[0].kind == m.TEXT and isinstance(blocks[0].raw, str):
        if old != blocks[0].text:
            item["content"] = blocks[0].text
        return
    content = []
    for b in blocks:
        if isinstance(b.raw, dict):
            if b.kind == m.TEXT and b.raw.get("text") != b.text:
                b.raw["text"] = b.text
            content.append(b.raw)
        elif (part := _render_part(b, part_type, images=part_type == "input_text")) is not None:
            content.append(part)
    if content != old:
        item["content"] = content


def _write_call(block: m.Block, item: dict) -> None:
    """A kept call: its `arguments` (or custom `input`) rewritten only when the parsed input changed."""
    field = "arguments" if _type(item) == "function_call" else "input"
    old = item.get(field)
    new = arguments_for(old, block.input)
    if new is not old:
        item[field] = new


def _encode_reply(msg: m.Message, out: list) -> None:
    """A reply's items, edited in place; items whose blocks were all removed go, and reasoning goes with the
    rest of its reply (never alone). Blocks that belong to no original item are rendered after it."""
    items: list = msg.raw
    owned: dict[int, list[m.Block]] = {}
    loose: list[m.Block] = []
    for block in msg.blocks:
        k = _item_index(block.key)
        if k is not None and k < len(items):
            owned.setdefault(k, []).append(block)
        else:
            loose.append(block)
    kept = []
    for k, item in enumerate(items):
        blocks = owned.get(k)
        if not blocks:
            if not _had_blocks(item):
                kept.append(item)
            continue
        kind = _type(item)
        if kind == "message":
            _write_content(item, blocks, "output_text")
        elif kind in _CALLS and blocks[0].kind == m.TOOL_CALL and blocks[0].raw is item:
            _write_call(blocks[0], item)
        kept.append(item)
    if not any(_type(x) != "reasoning" for x in kept) and any(_type(x) != "reasoning" for x in items):
        kept = []
    out.extend(kept)
    if loose:
        out.extend(_render_reply(loose))


def _encode_item(msg: m.Message, item: dict, out: list) -> None:
    kind = _type(item)
    if kind == "message":
        _write_content(item, msg.blocks, "output_text" if item.get("role") == "assistant" else "input_text")
    elif kind in _RESULTS:
        result = next((b for b in msg.blocks if b.kind == m.TOOL_RESULT), None)
        if result is None:
            return  # the call it answered was removed: the answer goes too
        if result.changed:  # a pure prefix goes into the first text part, else the output becomes the string
            m.set_text(item, "output", result.text, part_type="input_text")
    out.append(item)


def _render_reasoning(block: m.Block) -> dict | None:
    """Only this API's own encrypted reasoning can be replayed; other providers' reasoning is dropped."""
    meta = block.meta or {}
    encrypted = meta.get("encrypted_content")
    if not isinstance(encrypted, str):
        return None
    summary = meta.get("summary")
    return {"type": "reasoning", "summary": list(summary) if isinstance(summary, list) else [],
            "encrypted_content": encrypted}


def _render_call(block: m.Block) -> dict:
    name = block.tool_name if block.tool_name is not None else "unknown"
    if (block.meta or {}).get("type") == "custom_tool_call":
        value = block.input if isinstance(block.input, str) else render_arguments(block.input)
        return {"type": "custom_tool_call", "call_id": block.tool_id or "", "name": name, "input": value}
    return {"type": "function_call", "call_id": block.tool_id or "", "name": name,
            "arguments": render_arguments(block.input)}


def _render_result(block: m.Block) -> dict:
    kind = (block.meta or {}).get("type")
    return {"type": kind if kind in _RESULTS else "function_call_output", "call_id": block.tool_id or "",
            "output": block.text}


def _render_reply(blocks: list[m.Block]) -> list[dict]:
    """Reply items for fresh blocks: consecutive text/media form one assistant message, then calls in order."""
    out: list[dict] = []
    parts: list[dict] | None = None
    for block in blocks:
        if block.kind in (m.TEXT, m.MEDIA):
            part = _render_part(block, "output_text", images=False)
            if parts is None:
                parts = []
                out.append({"type": "message", "role": "assistant", "content": parts})
            if part is not None:  # always, for text and media
                parts.append(part)
            continue
        parts = None
        if block.kind == m.REASONING:
            item = _render_reasoning(block)
            if item is not None:
                out.append(item)
        elif block.kind == m.TOOL_CALL:
            out.append(_render_call(block))
    return out


def _render(msg: m.Message) -> list[dict]:
    """Fresh items for a message without raw: results after an assistant's calls, before a user's text."""
    results = [_render_result(b) for b in msg.blocks if b.kind == m.TOOL_RESULT]
    if msg.role == m.TOOL:
        return results
    if msg.role == m.ASSISTANT:
        return [*_render_reply([b for b in msg.blocks if b.kind != m.TOOL_RESULT]), *results]
    images = msg.role == m.USER
    parts = [p for b in msg.blocks if (p := _render_part(b, "input_text", images=images)) is not None]
    if results and not parts:
        return results  # an Anthropic-style user turn holding only tool results
    role = "developer" if msg.role == m.SYSTEM else "user"
    return [*results, {"type": "message", "role": role, "content": parts}]


def encode(messages: list[m.Message]) -> list:
    """The Responses `input` array for canonical messages (original items edited in place)."""
    out: list = []
    for msg in messages:
        if isinstance(msg.raw, list):
            _encode_reply(msg, out)
        elif isinstance(msg.raw, dict):
            _encode_item(msg, msg.raw, out)
        else:
            out.extend(_render(msg))
    return out


# ----------------------------------------------------------------------------------------- system, tools


def _system_items(items: Any) -> list[tuple[int, dict]]:
    if not isinstance(items, list):
        raise _bad("input", f"expected an array of items, got {_kind(items)}")
    return [(i, x) for i, x in enumerate(items)
            if isinstance(x, dict) and _type(x) == "message" and x.get("role") in ("system", "developer")]


def system_texts(items: Any) -> list[str]:
    """The text of each developer/system message item, in order (Codex sends its prompt this way)."""
    out = []
    for i, item in _system_items(items):
        content = item.get("content")
        if isinstance(content, list):
            out.append(_parts_text(content, f"input[{i}].content"))
        elif isinstance(content, str) or content is None:
            out.append(content or "")
        else:
            raise _bad(f"input[{i}].content", f"expected a string or an array of parts, got {_kind(content)}")
    return out


def apply_system(items: Any, texts: list[str]) -> list:
    """Set the i-th developer/system item's text to texts[i], in place (string or parts kept as such).

    Texts beyond the existing system items are appended (blank-line separated) to the last one; with no
    system item at all, a developer message is inserted at index 0. Call it on `encode`'s output.
    """
    return m.set_system_texts(items, _system_items(items), texts, _developer_message, part_type="input_text")


def _developer_message(text: str) -> dict:
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def tool_names(tools: Any) -> list[str]:
    """Names of the tools in a Responses `tools` list; a namespace's tools as `<namespace>__<name>`."""
    if not isinstance(tools, list):
        return []
    names = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            names += [f"{tool['name']}__{t['name']}" for t in tool["tools"]
                      if isinstance(t, dict) and isinstance(t.get("name"), str)]
        else:
            names.append(tool["name"])
    return names


__all__ = ["HARNESS", "apply_system", "decode", "encode", "system_texts", "tool_names"]
