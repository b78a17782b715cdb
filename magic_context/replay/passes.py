"""A recorded session as the passes to replay: the uncompacted history and where each call ends.

Every strategy must see the same growth, so the replay rebuilds the history the harness would have
sent without managing it: the messages of all calls in order of first appearance (the importers
share message objects between calls), minus the harness's own compaction summaries and requests.
Call k's request is then a prefix of that history. Provider usage recorded in messages (Pi
assistant `usage`, OpenCode `info.tokens`) measured the original unmanaged context, so the copies
served to mc carry none.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

from magic_context.records import Factory, record
from magic_context.transform.protocol import CODECS
from magic_context.wire import model as m
from magic_context.wire.importers import RecordedSession

_HARNESS_COMPACTION = frozenset({m.COMPACTION_SUMMARY, m.COMPACTION_REQUEST})


@record(frozen=True)
class PassSpec:
    """One recorded LLM call: its request is `history[:end]`, sent at `at_ms` to `model`."""

    end: int
    at_ms: int | None
    model: str | None


@record
class Replayable:
    """The session prepared for replay (see the module doc)."""

    harness: str
    native: list[Any]  # uncompacted history in the harness's format, usage stripped
    canon: list[m.Message]  # the same messages decoded (one decode of the whole history)
    passes: list[PassSpec]
    system: str | None  # a system prompt that travels beside the messages (not OpenAI's system messages)
    meta: dict[str, Any] = Factory(factory=dict)


def strip_usage(message: Any) -> Any:
    """A copy of a native message without provider usage (the original is shared and left alone)."""
    if not isinstance(message, dict):
        return message
    if "usage" in message and message.get("role") == "assistant":
        message = {k: v for k, v in message.items() if k != "usage"}
    info = message.get("info")
    if isinstance(info, dict) and "tokens" in info:
        message = {**message, "info": {k: v for k, v in info.items() if k != "tokens"}}
    return message


def prepare(session: RecordedSession) -> Replayable:
    """Rebuild the uncompacted history and the pass boundaries of `session`."""
    native: list[Any] = []
    seen: set[int] = set()
    summaries: set[int] = set()
    ends: list[int] = []
    for call in session.calls:
        marks = (call.meta or {}).get("compact_summary") or []
        for index in marks:
            if isinstance(index, int) and 0 <= index < len(call.messages):
                summaries.add(id(call.messages[index]))
        for message in call.messages:
            if id(message) not in seen:
                seen.add(id(message))
                native.append(message)
        ends.append(len(native))

    codec = CODECS[session.harness]
    decoded = codec.decode(native) if native else []
    keep = [id(raw) not in summaries and msg.compaction not in _HARNESS_COMPACTION
            for raw, msg in zip(native, decoded, strict=True)]
    kept_before = [0, *accumulate(int(k) for k in keep)]
    kept_native = [strip_usage(raw) for raw, k in zip(native, keep, strict=True) if k]
    canon = [msg for msg, k in zip(decoded, keep, strict=True) if k]

    passes: list[PassSpec] = []
    model = None
    last_at = None
    for call, end in zip(session.calls, ends, strict=True):
        model = call.model or model
        last_at = call.timestamp_ms if call.timestamp_ms is not None else last_at
        passes.append(PassSpec(kept_before[end], last_at, model))
    passes = [p for p in passes if p.end > 0]
    system = session.system if session.harness != m.OPENAI and session.system else None
    meta = {"harness_compactions_removed": len(keep) - sum(keep), "messages": len(canon)}
    return Replayable(session.harness, kept_native, canon, passes, system, meta)


__all__ = ["PassSpec", "Replayable", "prepare", "strip_usage"]
