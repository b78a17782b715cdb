"""Recorded-session importers: a harness's session file → the requests it sent, one per LLM call.

`load_session(path)` detects the format by content and returns a `RecordedSession` whose calls hold
the messages in the harness's native format (decode them with the matching codec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magic_context.errors import BadInput
from magic_context.wire.importers.base import (
    CLAUDE_CODE,
    FORMATS,
    MINI_SWE,
    OPENCODE_EXPORT,
    PI_SESSION,
    RecordedCall,
    RecordedSession,
    bad,
    first_line,
    parse_json,
    read_bytes,
)
from magic_context.wire.importers.claude_code import load_claude_code
from magic_context.wire.importers.mini_swe import load_mini_swe
from magic_context.wire.importers.opencode_export import load_opencode_export
from magic_context.wire.importers.pi_session import load_pi

# Other names accepted for `format` (the `mc replay --format` spellings).
ALIASES = {"opencode": OPENCODE_EXPORT, "openai": MINI_SWE, "mini-swe-agent": MINI_SWE, "claude": CLAUDE_CODE}

# Top-level `type`s of Claude Code transcript lines.
_CC_TYPES = frozenset({
    "user", "assistant", "system", "attachment", "progress", "summary", "custom-title", "ai-title",
    "file-history-snapshot", "queue-operation", "last-prompt", "mode", "tag", "agent-name",
})

_UNPARSED = object()


def detect_format(path: str | Path, data: bytes | None = None) -> str:
    """The format of a session file, judged by its content (see `load_session`)."""
    path = Path(path)
    return _sniff(path, read_bytes(path) if data is None else data)[0]


def _sniff(path: Path, data: bytes) -> tuple[str, Any]:
    """(format, parsed whole-file document or _UNPARSED for line formats)."""
    head = first_line(data)
    if isinstance(head, dict) and "messages" not in head:
        if head.get("type") == "session":
            return PI_SESSION, _UNPARSED
        if head.get("type") in _CC_TYPES or "uuid" in head or "parentUuid" in head or "sessionId" in head:
            return CLAUDE_CODE, _UNPARSED
    doc = parse_json(path, data)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        messages = doc["messages"]
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return MINI_SWE, doc
        first = messages[0] if messages else None
        v1 = isinstance(first, dict) and "info" in first and "parts" in first
        v2 = isinstance(first, dict) and "type" in first and "role" not in first  # refused with a clear error later
        if v1 or v2:
            return OPENCODE_EXPORT, doc
        if not messages and isinstance(doc.get("info"), dict) and "id" in doc["info"]:
            return OPENCODE_EXPORT, doc
        if isinstance(first, dict) and "role" in first:
            return MINI_SWE, doc
    raise bad(path, None, "unrecognised session format",
              fix=f"pass the format explicitly (one of {', '.join(FORMATS)})")


def load_session(path: str | Path, format: str = "auto") -> RecordedSession:
    """Load a recorded session. `format`: "auto" (detect by content) or one of FORMATS / ALIASES."""
    path = Path(path)
    fmt = ALIASES.get(format, format)
    if fmt != "auto" and fmt not in FORMATS:
        raise BadInput(f"unknown session format {format!r}", fix=f"use auto or one of {', '.join(FORMATS)}")
    data = read_bytes(path)
    doc: Any = _UNPARSED
    if fmt == "auto":
        fmt, doc = _sniff(path, data)
    if fmt == PI_SESSION:
        return load_pi(path, data)
    if fmt == CLAUDE_CODE:
        return load_claude_code(path, data)
    if doc is _UNPARSED:
        doc = parse_json(path, data)
    if fmt == MINI_SWE:
        return load_mini_swe(path, doc)
    return load_opencode_export(path, doc)


__all__ = [
    "ALIASES",
    "CLAUDE_CODE",
    "FORMATS",
    "MINI_SWE",
    "OPENCODE_EXPORT",
    "PI_SESSION",
    "RecordedCall",
    "RecordedSession",
    "detect_format",
    "load_claude_code",
    "load_mini_swe",
    "load_opencode_export",
    "load_pi",
    "load_session",
]
