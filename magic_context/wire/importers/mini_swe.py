"""mini-swe-agent trajectory JSON → the OpenAI chat messages the agent sent.

The trajectory's `messages` are OpenAI chat messages; mini-swe-agent stores its own bookkeeping under
an `extra` key (the raw provider response with usage on assistant messages, raw tool output on tool
messages) and strips it before each request. `RecordedCall.messages` therefore holds shallow copies
without `extra` (every other key, known or not, is kept, and the copies are shared between calls);
`strip_extra=False` keeps the file's objects as they are.

A call happens before each assistant message. A user message with `extra.interrupt_type ==
"FormatError"` answers a response mini-swe-agent could not parse and did not record: that call is
kept too, with `response=None`, so the call count matches `info.model_stats.api_calls`. The final
`exit` pseudo-message (the submission) is not a chat message: it is left out and summarized in `meta`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magic_context.wire import model
from magic_context.wire.importers.base import (
    MINI_SWE,
    RecordedCall,
    RecordedSession,
    bad,
    iso_ms,
    openai_usage,
    parse_json,
    read_bytes,
)


def load_mini_swe(path: str | Path, doc: Any = None, *, strip_extra: bool = True) -> RecordedSession:
    """Read a mini-swe-agent `.traj.json`; one RecordedCall per assistant message (plus lost responses)."""
    path = Path(path)
    if doc is None:
        doc = parse_json(path, read_bytes(path))
    raw = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(raw, list):
        raise bad(path, None, 'expected a JSON object with a "messages" list (a mini-swe-agent trajectory)')

    sent: list[Any] = []
    calls: list[RecordedCall] = []
    system: str | None = None
    exit_info: dict[str, Any] | None = None
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad(path, None, f'messages[{index}] is not a chat message (an object with a "role")')
        role = message["role"]
        extra = model.obj(message.get("extra"))
        if role == "exit":
            exit_info = {"status": extra.get("exit_status"), "submission": extra.get("submission")}
            continue
        native = {k: v for k, v in message.items() if k != "extra"} if strip_extra and "extra" in message else message
        if role == "system" and system is None and isinstance(message.get("content"), str):
            system = message["content"]
        if role == "assistant":
            response = model.obj(extra.get("response"))
            calls.append(RecordedCall(
                messages=list(sent),
                response=native,
                usage=openai_usage(response.get("usage")),
                model=response.get("model") if isinstance(response.get("model"), str) else None,
                timestamp_ms=_seconds_ms(extra.get("timestamp")),
            ))
        elif role == "user" and extra.get("interrupt_type") == "FormatError":
            calls.append(RecordedCall(messages=list(sent), timestamp_ms=_seconds_ms(extra.get("timestamp"))))
        sent.append(native)

    info = model.obj(doc.get("info"))
    stats = model.obj(info.get("model_stats"))
    meta: dict[str, Any] = {
        "trajectory_format": doc.get("trajectory_format"),
        "instance_id": doc.get("instance_id"),
        "mini_version": info.get("mini_version"),
        "api_calls": stats.get("api_calls"),
        "instance_cost": stats.get("instance_cost"),
        "exit": exit_info,
        "lost_responses": sum(1 for c in calls if c.response is None),
        "extra_stripped": strip_extra,
    }
    return RecordedSession(path=path, format=MINI_SWE, harness=model.OPENAI, system=system,
                           calls=calls, messages=sent, meta=meta)


def _seconds_ms(value: Any) -> int | None:
    """mini-swe-agent stores epoch seconds as floats."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(value * 1000)
    return iso_ms(value)


__all__ = ["load_mini_swe"]
