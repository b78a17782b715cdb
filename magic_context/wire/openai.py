"""OpenAI Chat Completions codec: the `messages` array of a `POST /v1/chat/completions` body <-> canonical.

Decoding keeps a reference to every original message and content part (`raw`); encoding edits those objects
in place, so unknown fields (mini-swe-agent's `extra`, `provider_specific_fields`, a tool call's `index`)
survive and an unchanged array encodes to equal JSON. Tool-call `arguments` are parsed into `Block.input`
and written back as the original string while the parsed value is unchanged (byte-equal round trips).
Messages with `raw is None` are rendered fresh, also when rendering a session decoded by another codec.

Block keys: "c" string content (or a tool message's result), "p<j>" content part j, "t<j>" tool_calls[j],
"r" reasoning_content, "r:reasoning" / "r:reasoning_details" the OpenRouter fields, "f" legacy function_call.
"""

from __future__ import annotations

import json

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.identity import IdDeriver

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

try:  # orjson is optional (DESIGN §2); the fallback rejects NaN/Infinity as orjson does
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised only without orjson

    def _reject(token: str) -> Any:
        raise ValueError(token)

    def _loads(text: str | bytes) -> Any:  # type: ignore[misc]  # orjson's signature is narrower
        return json.loads(text, parse_constant=_reject)


def _dumps(value: Any) -> str:
    """Compact JSON, as providers emit arguments (only used when a call's input changed)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


HARNESS = m.OPENAI

_ROLES = {"system": m.SYSTEM, "developer": m.SYSTEM, "user": m.USER, "assistant": m.ASSISTANT, "tool": m.TOOL}
_REASONING = {"reasoning_content": "r", "reasoning": "r:reasoning", "reasoning_details": "r:reasoning_details"}
_OUT_ROLES = {m.SYSTEM: "system", m.USER: "user", m.ASSISTANT: "assistant"}


_kind = m.json_kind


def _bad(where: str, what: str) -> BadInput:
    return BadInput(f"openai {where}: {what}")


def _text_of(content: Any, where: str) -> str:
    """Text of a content value: the string, or its text parts joined by newlines."""
    return m.joined_text(content, where, _bad)


def data_url_type(url: Any) -> str | None:
    """The media type a `data:` URL declares (None for anything else)."""
    if isinstance(url, str) and url.startswith("data:"):
        head = url[5:].split(",", 1)[0].split(";", 1)[0]
        return head or None
    return None


def _content_blocks(content: Any, where: str) -> list[m.Block]:
    if content is None:
        return []
    if isinstance(content, str):
        return [m.Block(m.TEXT, text=content, original=content, key="c", raw=content)] if content else []
    if not isinstance(content, list):
        raise _bad(f"{where}.content", f"expected a string, an array of parts or null, got {_kind(content)}")
    blocks = []
    for j, part in enumerate(content):
        here, key = f"{where}.content[{j}]", f"p{j}"
        if not isinstance(part, dict):
            raise _bad(here, f"expected an object, got {_kind(part)}")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise _bad(f"{here}.text", f"expected a string, got {_kind(text)}")
            blocks.append(m.Block(m.TEXT, text=text, original=text, key=key, raw=part))
        elif kind in ("image_url", "input_audio", "file"):
            inner = part.get(kind)
            inner = inner if isinstance(inner, dict) else {}
            meta = None
            if kind == "image_url":
                media_type = data_url_type(inner.get("url"))
                meta = {"url": inner["url"]} if isinstance(inner.get("url"), str) else None
            elif kind == "input_audio":
                media_type = f"audio/{inner['format']}" if isinstance(inner.get("format"), str) else None
            else:
                media_type = data_url_type(inner.get("file_data"))
            blocks.append(m.Block(m.MEDIA, media_type=media_type, meta=meta, key=key, raw=part))
        else:
            blocks.append(m.Block(m.OPAQUE, key=key, raw=part))
    return blocks


def _decode_call(call: Any, where: str, key: str, names: dict[str, str]) -> m.Block:
    if not isinstance(call, dict):
        raise _bad(where, f"expected a tool call object, got {_kind(call)}")
    call_id = call.get("id")
    if not isinstance(call_id, str):
        raise _bad(f"{where}.id", f"expected a string, got {_kind(call_id)}")
    field = "function" if "function" in call or "custom" not in call else "custom"
    spec = call.get(field)
    if not isinstance(spec, dict):
        raise _bad(f"{where}.{field}", f"expected an object, got {_kind(spec)}")
    name = spec.get("name")
    if not isinstance(name, str):
        raise _bad(f"{where}.{field}.name", f"expected a string, got {_kind(name)}")
    names[call_id] = name
    value = spec.get("arguments" if field == "function" else "input")
    if field == "function":
        value = parse_arguments(value)
    return m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input=value, key=key, raw=call)


def decode(messages: list, *, skim: int = 0) -> list[m.Message]:
    """Canonical messages for an OpenAI chat `messages` array (ids derived, ordinal = index).

    The first `skim` messages other than system ones get only their id, digest and role (no blocks):
    see "Skimmed messages" in `wire.model`.
    """
    if not isinstance(messages, list):
        raise _bad("messages", f"expected an array, got {_kind(messages)}")
    ids = IdDeriver()
    names: dict[str, str] = {}  # tool call id -> tool name, to name the results that answer it
    out: list[m.Message] = []
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise _bad(where, f"expected a message object, got {_kind(raw)}")
        role = raw.get("role")
        canonical = _ROLES.get(role) if isinstance(role, str) else None
        if i < skim and canonical is not None and canonical != m.SYSTEM:
            msg_id, digest = ids.next(raw)
            out.append(m.Message(msg_id, canonical, ordinal=i, raw=raw, digest=digest))
            continue
        if canonical is None:
            shown = repr(role[:40]) if isinstance(role, str) else _kind(role)
            raise _bad(f"{where}.role", f"unknown role {shown} (expected system, developer, user, assistant or tool)")
        if canonical == m.TOOL:
            call_id = raw.get("tool_call_id")
            if not isinstance(call_id, str):
                raise _bad(f"{where}.tool_call_id", f"expected a string, got {_kind(call_id)}")
            text = _text_of(raw.get("content"), where)
            name = names.get(call_id) or (raw["name"] if isinstance(raw.get("name"), str) else None)
            blocks = [m.Block(m.TOOL_RESULT, text=text, original=text, tool_id=call_id, tool_name=name,
                              key="c", raw=raw)]
        elif canonical == m.ASSISTANT:
            blocks = [m.Block(m.REASONING, text=_reasoning_text(raw[f]), meta={"field": f, "value": raw[f]},
                              key=key, raw=raw[f])
                      for f, key in _REASONING.items() if raw.get(f) is not None]
            blocks += _content_blocks(raw.get("content"), where)
            calls = raw.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    raise _bad(f"{where}.tool_calls", f"expected an array, got {_kind(calls)}")
                blocks += [_decode_call(c, f"{where}.tool_calls[{j}]", f"t{j}", names) for j, c in enumerate(calls)]
            if raw.get("function_call") is not None:
                blocks.append(m.Block(m.OPAQUE, key="f", raw=raw["function_call"]))
        else:
            blocks = _content_blocks(raw.get("content"), where)
        msg_id, digest = ids.next(raw)
        out.append(m.Message(id=msg_id, role=canonical, blocks=blocks, ordinal=i, raw=raw, digest=digest))
    return out


def _reasoning_text(value: Any) -> str:
    """Readable text of a reasoning field (a string, or OpenRouter's reasoning_details entries)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for entry in value:
            if isinstance(entry, dict):
                text = entry.get("text") if isinstance(entry.get("text"), str) else entry.get("summary")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""


def parse_arguments(value: Any) -> Any:
    """A call's JSON-string arguments parsed; the value itself when it is not a string of valid JSON."""
    if isinstance(value, str):
        try:
            return _loads(value)
        except ValueError:
            pass  # not JSON (a model's malformed call): keep the string, written back as it was
    return value


def arguments_for(old: Any, value: Any) -> Any:
    """What a call's arguments field holds for the parsed input `value`.

    `old` itself while it still parses to `value` (byte-equal round trips); else `value` as compact JSON
    when `old` was a JSON string, or `value` as it is.
    """
    if value is old or (isinstance(value, str) and value == old):
        return old
    if isinstance(old, str) and not isinstance(value, str):
        try:
            if _loads(old) == value:
                return old
        except ValueError:
            pass
        return _dumps(value)
    return value


def _encode_call(block: m.Block) -> dict:
    """A kept tool call: its original dict, `arguments` rewritten only when the parsed input changed."""
    call = block.raw
    spec = call.get("function") if isinstance(call.get("function"), dict) else call.get("custom")
    if not isinstance(spec, dict):
        return call
    field = "arguments" if spec is call.get("function") else "input"
    old = spec.get(field)
    new = arguments_for(old, block.input)
    if new is not old:
        spec[field] = new
    return call


def render_arguments(value: Any) -> str:
    """Arguments for a call rendered fresh: a string as it is, anything else as compact JSON (None as `{}`)."""
    return value if isinstance(value, str) else _dumps({} if value is None else value)


def _render_call(block: m.Block) -> dict:
    arguments = render_arguments(block.input)
    return {"id": block.tool_id, "type": "function", "function": {"name": block.tool_name, "arguments": arguments}}


def _render_result(block: m.Block) -> dict:
    return {"role": "tool", "tool_call_id": block.tool_id, "content": block.text}


def _render_part(block: m.Block, images: bool = True) -> dict | None:
    """Fresh content part; an image comes from its payload in meta (`url`, or Pi-style base64 `data`)."""
    if block.kind == m.TEXT:
        return {"type": "text", "text": block.text}
    if block.kind != m.MEDIA:
        return None
    meta = block.meta or {}
    media_type, url, data = block.media_type or "", meta.get("url"), meta.get("data")
    if images and (media_type.startswith("image/") or (isinstance(url, str) and url.startswith("data:image/"))):
        if isinstance(url, str) and url.startswith(("https://", "http://", "data:")):
            return {"type": "image_url", "image_url": {"url": url}}
        if isinstance(data, str):
            return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}
    return {"type": "text", "text": f"[{block.media_type or 'media'} attachment omitted]"}


def _is_part(block: m.Block) -> bool:
    return block.kind in (m.TEXT, m.MEDIA) or (block.kind == m.OPAQUE and block.key != "f")


def _render_message(msg: m.Message) -> list[dict]:
    """Fresh JSON: tool results become `role: "tool"` messages ahead of whatever else the message holds."""
    out = [_render_result(b) for b in msg.blocks if b.kind == m.TOOL_RESULT]
    if msg.role == m.TOOL:
        return out
    images = msg.role == m.USER  # only user content may carry image parts
    parts = [p for b in msg.blocks if _is_part(b) and (p := _render_part(b, images)) is not None]
    calls = [_render_call(b) for b in msg.blocks if b.kind == m.TOOL_CALL] if msg.role == m.ASSISTANT else []
    if out and not parts and not calls:
        return out  # an Anthropic-style user turn holding only tool results
    role = _OUT_ROLES.get(msg.role, "user")
    content: Any
    if msg.role == m.USER and (len(parts) > 1 or any(p["type"] != "text" for p in parts)):
        content = parts
    elif parts:
        content = "\n".join(p["text"] for p in parts)
    else:
        content = None if calls else ""
    fresh: dict[str, Any] = {"role": role, "content": content}
    if msg.role == m.ASSISTANT:
        for b in msg.blocks:
            meta = b.meta or {}
            if b.kind == m.REASONING and meta.get("field") in _REASONING:  # other providers' reasoning is dropped
                fresh[meta["field"]] = meta.get("value", b.text)
    if calls:
        fresh["tool_calls"] = calls
    out.append(fresh)
    return out


def _encode_content(msg: m.Message, raw: dict) -> None:
    """Rebuild `content` from the remaining text/media/opaque parts, keeping a string a string where possible."""
    parts = [b for b in msg.blocks if _is_part(b)]
    old = raw.get("content")
    if len(parts) == 1 and parts[0].kind == m.TEXT and (isinstance(parts[0].raw, str) or not isinstance(old, list)):
        if old != parts[0].text:
            raw["content"] = parts[0].text
    elif not parts:
        if old:  # every part was removed
            raw["content"] = None if msg.role == m.ASSISTANT else ""
    else:
        content = []
        for b in parts:
            if isinstance(b.raw, dict):
                if b.kind == m.TEXT and b.changed:
                    b.raw["text"] = b.text
                content.append(b.raw)
            elif isinstance(b.raw, str) and b.kind == m.TEXT:  # string content that gained siblings
                content.append({"type": "text", "text": b.text})
            elif (part := _render_part(b, msg.role == m.USER)) is not None:
                content.append(part)
        raw["content"] = content


def _encode_assistant_fields(blocks: list[m.Block], raw: dict) -> None:
    """Reasoning fields (verbatim; deleted with their block), tool_calls and the legacy function_call."""
    kept = {b.key for b in blocks if b.kind == m.REASONING and b.raw is not None}
    for name, key in _REASONING.items():
        if key not in kept and raw.get(name) is not None:
            del raw[name]
    for b in blocks:
        meta = b.meta or {}
        if b.kind == m.REASONING and b.raw is None and meta.get("field") in _REASONING:
            raw[meta["field"]] = meta.get("value", b.text)
    calls = [_encode_call(b) if isinstance(b.raw, dict) else _render_call(b) for b in blocks if b.kind == m.TOOL_CALL]
    if calls:
        raw["tool_calls"] = calls
    elif raw.get("tool_calls"):
        del raw["tool_calls"]
    if raw.get("function_call") is not None and not any(b.kind == m.OPAQUE and b.key == "f" for b in blocks):
        del raw["function_call"]


def _encode_message(msg: m.Message, out: list) -> None:
    raw = msg.raw
    if msg.role == m.TOOL:
        result = next((b for b in msg.blocks if b.kind == m.TOOL_RESULT), None)
        if result is not None and (result.changed or result.raw is not raw):
            m.set_text(raw, "content", result.text)  # a pure prefix into the first text part, else replaced
            if result.raw is not raw and result.tool_id is not None:
                raw["tool_call_id"] = result.tool_id
        out.append(raw)
        return
    out.extend(_render_result(b) for b in msg.blocks if b.kind == m.TOOL_RESULT)
    _encode_content(msg, raw)
    if msg.role == m.ASSISTANT:
        _encode_assistant_fields(msg.blocks, raw)
    out.append(raw)


def encode(messages: list[m.Message]) -> list:
    """The OpenAI `messages` array for canonical messages (original dicts edited in place).

    Tool results held by a non-tool message (Anthropic-style user turns) become `role: "tool"` messages
    placed before it, so every tool_calls[i] is answered by a tool message.
    """
    out: list[dict] = []
    for msg in messages:
        if isinstance(msg.raw, dict):
            _encode_message(msg, out)
        else:
            out.extend(_render_message(msg))
    return out


def _system_messages(messages: Any) -> list[tuple[int, dict]]:
    if not isinstance(messages, list):
        raise _bad("messages", f"expected an array, got {_kind(messages)}")
    return [(i, x) for i, x in enumerate(messages) if isinstance(x, dict) and x.get("role") in ("system", "developer")]


def system_texts(messages: Any) -> list[str]:
    """The text of each system/developer message, in order."""
    return [_text_of(x.get("content"), f"messages[{i}]") for i, x in _system_messages(messages)]


def apply_system(messages: Any, texts: list[str]) -> list:
    """Set the i-th system/developer message's text to texts[i], in place (string or list content kept as such).

    Texts beyond the existing system messages are appended (blank-line separated) to the last one; with no
    system message at all, one is inserted at index 0. Call it on `encode`'s output.
    """
    return m.set_system_texts(messages, _system_messages(messages), texts, _system_message)


def _system_message(text: str) -> dict:
    return {"role": "system", "content": text}


def tool_names(tools: Any) -> list[str]:
    """Names of the tools in an OpenAI `tools` list ({type:function, function:{name}}); junk is skipped."""
    if not isinstance(tools, list):
        return []
    names = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        spec = function if isinstance(function, dict) else tool
        if isinstance(spec.get("name"), str):
            names.append(spec["name"])
    return names


__all__ = ["HARNESS", "apply_system", "arguments_for", "data_url_type", "decode", "encode", "parse_arguments",
           "render_arguments", "system_texts", "tool_names"]
