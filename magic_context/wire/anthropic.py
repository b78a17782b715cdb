"""Anthropic Messages codec: the `messages` array of a `POST /v1/messages` body <-> canonical messages.

Decoding keeps a reference to every original message and content block (`raw`); encoding edits those
objects in place and rebuilds each content list from the blocks that remain, so fields mc does not
understand (cache_control, citations, caller, ...) survive and an unchanged array encodes to equal JSON.
Messages with `raw is None` are rendered fresh, which is also how a session decoded by another codec is
rendered into this format (clear every `raw` first).

Block keys are "p<index in the original content list>"; string content is one TEXT block "p0" whose `raw`
is the original string (so it is written back as a string while it stays the only block).

Claude Code (default models) also puts `role: "system"` messages inside `messages` (environment,
agent types): they decode as canonical SYSTEM messages, which the transform keeps in place and never
tags, drops or folds, and they encode back unchanged. A SYSTEM message mc renders fresh (from another
format) still becomes a user turn: the public API accepts system text only in the top-level `system`.

Derived ids and digests hash a message without its `cache_control` marks, and a lone plain text block
as its string: clients move the marks to the newest blocks on every request and turn string content
into a block list to carry one (Claude Code, Pi, OpenCode), which is no change of history.
"""

from __future__ import annotations

from magic_context.errors import BadInput
from magic_context.wire import model as m
from magic_context.wire.identity import IdDeriver

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

HARNESS = m.ANTHROPIC

_ROLES = {"user": m.USER, "assistant": m.ASSISTANT, "system": m.SYSTEM}


_kind = m.json_kind


def _bad(where: str, what: str) -> BadInput:
    return BadInput(f"anthropic {where}: {what}")


def _string(block: dict, name: str, where: str) -> str:
    value = block.get(name)
    if not isinstance(value, str):
        raise _bad(f"{where}.{name}", f"expected a string, got {_kind(value)}")
    return value


def _result_text(content: Any, where: str) -> str:
    """Text of a content value: the string, or its text parts joined by newlines."""
    return m.joined_text(content, where, _bad)


def _decode_block(raw: Any, where: str, key: str, names: dict[str, str]) -> m.Block:
    if not isinstance(raw, dict):
        raise _bad(where, f"expected a content block object, got {_kind(raw)}")
    kind = raw.get("type")
    if kind == "text":
        text = _string(raw, "text", where)
        return m.Block(m.TEXT, text=text, original=text, key=key, raw=raw)
    if kind == "tool_use":
        tool_id = _string(raw, "id", where)
        name = _string(raw, "name", where)
        names[tool_id] = name
        return m.Block(m.TOOL_CALL, tool_id=tool_id, tool_name=name, input=raw.get("input"), key=key, raw=raw)
    if kind == "tool_result":
        tool_id = _string(raw, "tool_use_id", where)
        text = _result_text(raw.get("content"), where)
        return m.Block(m.TOOL_RESULT, text=text, original=text, tool_id=tool_id, tool_name=names.get(tool_id),
                       is_error=raw.get("is_error") is True, key=key, raw=raw)
    if kind == "thinking":  # carried verbatim: lenient about its fields, never edited
        thinking = raw.get("thinking")
        meta = {"signature": raw["signature"]} if "signature" in raw else None
        return m.Block(m.REASONING, text=thinking if isinstance(thinking, str) else "", meta=meta, key=key, raw=raw)
    if kind == "redacted_thinking":
        return m.Block(m.REASONING, meta={"redacted": raw.get("data")}, key=key, raw=raw)
    if kind in ("image", "document"):
        source = m.obj(raw.get("source"))
        media_type = source.get("media_type")
        payload = {k: source[k] for k in ("data", "url") if source.get("type") in ("base64", "url")
                   and isinstance(source.get(k), str)}  # lets another format render the media
        return m.Block(m.MEDIA, media_type=media_type if isinstance(media_type, str) else None, meta=payload or None,
                       key=key, raw=raw)
    return m.Block(m.OPAQUE, key=key, raw=raw)


def _identity(raw: dict) -> Any:
    """What a message's derived id and digest hash (see the module doc): `raw` itself unless it needs unmarking."""
    content = raw.get("content")
    if not isinstance(content, list) or not content:
        return raw
    marked = any(isinstance(b, dict) and "cache_control" in b for b in content)
    if not marked and len(content) != 1:
        return raw
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in content] \
        if marked else content
    lone = blocks[0] if len(blocks) == 1 else None
    if isinstance(lone, dict) and lone.get("type") == "text" and isinstance(lone.get("text"), str) and len(lone) == 2:
        return {**raw, "content": lone["text"]}
    return {**raw, "content": blocks} if marked else raw


def decode(messages: list, *, skim: int = 0) -> list[m.Message]:
    """Canonical messages for an Anthropic `messages` array (ids derived, ordinal = index).

    The first `skim` messages other than system ones get only their id, digest and role (no blocks): see
    "Skimmed messages" in `wire.model`.
    """
    if not isinstance(messages, list):
        raise _bad("messages", f"expected an array, got {_kind(messages)}")
    ids = IdDeriver()
    names: dict[str, str] = {}  # tool_use id -> tool name, to name the results that answer it
    out: list[m.Message] = []
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise _bad(where, f"expected a message object, got {_kind(raw)}")
        role = raw.get("role")
        canonical = _ROLES.get(role) if isinstance(role, str) else None
        if i < skim and canonical is not None and canonical != m.SYSTEM:
            msg_id, digest = ids.next(_identity(raw))
            out.append(m.Message(msg_id, canonical, ordinal=i, raw=raw, digest=digest))
            continue
        if canonical is None:
            shown = repr(role[:40]) if isinstance(role, str) else _kind(role)
            raise _bad(f"{where}.role", f"unknown role {shown} (expected user, assistant or system)")
        content = raw.get("content")
        if isinstance(content, str):
            blocks = [m.Block(m.TEXT, text=content, original=content, key="p0", raw=content)]
        elif isinstance(content, list):
            blocks = [_decode_block(b, f"{where}.content[{j}]", f"p{j}", names) for j, b in enumerate(content)]
        else:
            raise _bad(f"{where}.content", f"expected a string or an array of blocks, got {_kind(content)}")
        msg_id, digest = ids.next(_identity(raw))
        out.append(m.Message(id=msg_id, role=canonical, blocks=blocks, ordinal=i, raw=raw, digest=digest))
    return out


def _write_back(block: m.Block, raw: dict) -> None:
    """Apply a kept block's edits to its original JSON (reasoning, media and opaque blocks are never edited)."""
    if block.kind == m.TEXT:
        if block.changed:
            raw["text"] = block.text
    elif block.kind == m.TOOL_RESULT:
        if block.changed:  # a pure prefix goes into the first text sub-block, else the output is replaced
            m.set_text(raw, "content", block.text)
        if block.is_error != (raw.get("is_error") is True):
            raw["is_error"] = block.is_error
    elif block.kind == m.TOOL_CALL and block.input is not raw.get("input"):
        raw["input"] = block.input


def _render_block(block: m.Block) -> dict | None:
    """Fresh JSON for a block mc created (or one decoded from another format); None when it has no form here."""
    if block.kind == m.TEXT:
        return {"type": "text", "text": block.text}
    if block.kind == m.TOOL_CALL:
        value = block.input
        if value is None:
            value = {}
        elif not isinstance(value, dict):  # e.g. OpenAI arguments that were not valid JSON
            value = {"arguments": value}
        return {"type": "tool_use", "id": block.tool_id, "name": block.tool_name, "input": value}
    if block.kind == m.TOOL_RESULT:
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_id, "content": block.text}
        if block.is_error:
            out["is_error"] = True
        return out
    if block.kind == m.REASONING:
        return _render_reasoning(block.meta or {}, block.text)
    if block.kind == m.MEDIA:
        return _render_media(block)
    return None  # an OPAQUE block without its original JSON


def _render_reasoning(meta: dict, text: str) -> dict | None:
    """Signed thinking only: unsigned reasoning (other providers) would fail Anthropic's signature check.

    Reads this codec's meta and the signature keys other codecs keep: Pi `thinkingSignature`, OpenCode's
    AI SDK provider metadata `{"anthropic": {"signature" | "redactedData"}}`.
    """
    nested = m.obj(meta.get("anthropic"))
    redacted = meta.get("redacted") if isinstance(meta.get("redacted"), str) else nested.get("redactedData")
    if isinstance(redacted, str):
        return {"type": "redacted_thinking", "data": redacted}
    for signature in (meta.get("signature"), meta.get("thinkingSignature"), nested.get("signature")):
        if isinstance(signature, str) and signature:
            return {"type": "thinking", "thinking": text, "signature": signature}
    return None


def _render_media(block: m.Block) -> dict:
    """An image/PDF from its payload in meta (`data` base64 or `url`, incl. data: URLs), else a placeholder."""
    meta = block.meta or {}
    media_type, data, url = block.media_type or "", meta.get("data"), meta.get("url")
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        media_type = media_type or head
    kind = "image" if media_type.startswith("image/") else "document" if media_type == "application/pdf" else ""
    if kind and isinstance(data, str):
        return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": data}}
    if kind and isinstance(url, str) and url.startswith(("https://", "http://")):
        return {"type": kind, "source": {"type": "url", "url": url}}
    return {"type": "text", "text": f"[{block.media_type or 'media'} attachment omitted]"}


def _results_first(content: list[dict]) -> list[dict]:
    """tool_result blocks must open the user turn that answers a tool_use."""
    results = [b for b in content if b.get("type") == "tool_result"]
    if not results:
        return content
    return results + [b for b in content if b.get("type") != "tool_result"]


def _render_message(msg: m.Message, lead: list[dict]) -> dict:
    role = "assistant" if msg.role == m.ASSISTANT else "user"  # SYSTEM has no message form: a user turn
    content = [r for b in msg.blocks if (r := _render_block(b)) is not None]
    if role == "user":
        content = _results_first(lead + content)
    return {"role": role, "content": content}


def _encode_message(msg: m.Message) -> dict:
    raw = msg.raw
    blocks = msg.blocks
    if isinstance(raw.get("content"), str) and len(blocks) == 1 and blocks[0].kind == m.TEXT \
            and isinstance(blocks[0].raw, str):
        raw["content"] = blocks[0].text
        return raw
    content: list = []
    for block in blocks:
        if isinstance(block.raw, dict):
            _write_back(block, block.raw)
            content.append(block.raw)
        elif isinstance(block.raw, str) and block.kind == m.TEXT:  # string content that gained siblings
            content.append({"type": "text", "text": block.text})
        elif (fresh := _render_block(block)) is not None:
            content.append(fresh)
    raw["content"] = content
    return raw


def encode(messages: list[m.Message]) -> list:
    """The Anthropic `messages` array for canonical messages (original dicts edited in place).

    Canonical TOOL messages (OpenAI `tool`, Pi `toolResult`) have no Anthropic form: a run of them becomes
    one user turn of tool_result blocks, merged into the following user message when that one is new.
    """
    out: list[dict] = []
    pending: list[dict] = []
    for msg in messages:
        if msg.role == m.TOOL:
            pending.extend(r for b in msg.blocks if (r := _render_block(b)) is not None)
            continue
        if pending and msg.raw is None and msg.role == m.USER:
            out.append(_render_message(msg, pending))
            pending = []
            continue
        if pending:
            out.append({"role": "user", "content": _results_first(pending)})
            pending = []
        out.append(_encode_message(msg) if isinstance(msg.raw, dict) else _render_message(msg, []))
    if pending:
        out.append({"role": "user", "content": _results_first(pending)})
    return out


def system_texts(value: Any) -> list[str]:
    """The texts of a `system` value: a string, or a list of text blocks (plain strings tolerated)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _bad("system", f"expected a string or an array of text blocks, got {_kind(value)}")
    texts = []
    for j, entry in enumerate(value):
        if isinstance(entry, str):
            texts.append(entry)
        elif isinstance(entry, dict):
            if entry.get("type", "text") == "text" and isinstance(entry.get("text"), str):
                texts.append(entry["text"])
        else:
            raise _bad(f"system[{j}]", f"expected a text block, got {_kind(entry)}")
    return texts


BILLING_HEADER: Final = "x-anthropic-billing-header:"


def prompt_index(texts: list[str]) -> int:
    """Index of the first system entry that is prompt text (len(texts) when there is none).

    Claude Code opens `system` with a billing-header entry (`x-anthropic-billing-header: cc_version=…;`)
    the API reads as metadata: guidance is never appended to it, and the system hash skips it.
    """
    return next((i for i, text in enumerate(texts) if not text.startswith(BILLING_HEADER)), len(texts))


def apply_system(value: Any, texts: list[str]) -> Any:
    """`value` with its i-th text replaced by texts[i], in the same form; returns the (possibly new) value.

    A list is edited in place (cache_control and other keys kept); texts beyond its entries are appended
    as text blocks, entries beyond `texts` are left as they are. A string (or None) becomes the texts
    joined by a blank line.
    """
    if value is None or isinstance(value, str):
        if not texts:
            return value
        return "\n\n".join(texts)
    system_texts(value)  # validates the shape
    k = 0
    for j, entry in enumerate(value):
        if k >= len(texts):
            break
        if isinstance(entry, str):
            value[j] = texts[k]
            k += 1
        elif entry.get("type", "text") == "text" and isinstance(entry.get("text"), str):
            if entry["text"] != texts[k]:
                entry["text"] = texts[k]
            k += 1
    value.extend({"type": "text", "text": t} for t in texts[k:])
    return value


def tool_names(tools: Any) -> list[str]:
    """Names of the tools in an Anthropic `tools` list (client and server tools); junk entries are skipped."""
    if not isinstance(tools, list):
        return []
    return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]


__all__ = ["BILLING_HEADER", "HARNESS", "apply_system", "decode", "encode", "prompt_index", "system_texts",
           "tool_names"]
