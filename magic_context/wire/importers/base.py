"""Shared types and helpers for recorded-session importers.

An importer turns a harness's recorded session file into the sequence of requests the harness
sent, one `RecordedCall` per LLM call, in the harness's NATIVE message format. Calls share the
message objects (a call's list is a fresh list, its items are the same dicts as in the next call),
so a long session costs one copy of each message plus one pointer per message per call.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Final

from magic_context.errors import BadInput
from magic_context.records import Factory, record

try:  # orjson is optional; json parses the same documents, slower.
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - exercised only without orjson
    import json

    _loads = json.loads  # type: ignore[assignment]  # same documents; orjson's signature is narrower

# Format names (what `load_session(format=...)` and `mc replay --format` accept).
PI_SESSION: Final = "pi"
CLAUDE_CODE: Final = "claude-code"
MINI_SWE: Final = "mini-swe"
OPENCODE_EXPORT: Final = "opencode-export"
FORMATS: Final = (PI_SESSION, CLAUDE_CODE, MINI_SWE, OPENCODE_EXPORT)


@record
class RecordedCall:
    """One LLM call as the harness made it.

    messages      the native messages sent (shared with other calls; never deep-copied)
    response      the native assistant message that answered it, when known
    usage         that response's usage as {input_tokens, output_tokens, cache_read_input_tokens,
                  cache_creation_input_tokens}; input_tokens excludes cache reads and writes
    model         the model that answered
    timestamp_ms  when the response was recorded (epoch ms)
    meta          format-specific marks about `messages`, e.g. Claude Code's
                  {"compact_summary": [index, ...]} (indices of harness compaction summaries)
    """

    messages: list[Any]
    response: Any | None = None
    usage: dict[str, int] | None = None
    model: str | None = None
    timestamp_ms: int | None = None
    meta: dict[str, Any] | None = None


@record
class RecordedSession:
    """A recorded session: the calls in order plus the final history on the current branch.

    format    one of FORMATS (the file format)
    harness   the native message format of `messages` (model.PI / ANTHROPIC / OPENAI / OPENCODE)
    system    the system prompt when the file records it
    messages  the full history on the current branch after the last response (the next request's messages)
    meta      format-specific facts (header fields, counts, skipped entries, ...)
    """

    path: Path
    format: str
    harness: str
    system: str | None
    calls: list[RecordedCall]
    messages: list[Any]
    meta: dict[str, Any] = Factory(factory=dict)


def bad(path: Path, line: int | None, problem: str, fix: str | None = None) -> BadInput:
    """A BadInput naming `file:line` (or just the file when the line is unknown)."""
    where = f"{path}:{line}" if line is not None else str(path)
    return BadInput(f"{where}: {problem}", fix=fix)


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise bad(path, None, f"cannot read the session file ({exc.strerror or exc})") from exc


def parse_json(path: Path, data: bytes) -> Any:
    """Parse a whole-file JSON document; errors name the file, line and column."""
    try:
        return _loads(data)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        where = f"{line}" if col is None else f"{line}:{col}"
        msg = getattr(exc, "msg", str(exc))
        raise BadInput(f"{path}:{where}: invalid JSON ({msg})") from exc


def parse_jsonl(path: Path, data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Parse JSON Lines into (1-based line number, object) pairs, skipping blank lines."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = _loads(raw)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            raise bad(path, number, f"invalid JSON ({msg})", fix="the file must hold one JSON object per line") from exc
        if not isinstance(value, dict):
            raise bad(path, number, f"expected a JSON object, got {type(value).__name__}")
        rows.append((number, value))
    return rows


def first_line(data: bytes) -> Any:
    """The first non-blank line parsed as JSON, or None when it is not a JSON value on its own."""
    for raw in data.split(b"\n", 64):
        if raw.strip():
            try:
                return _loads(raw)
            except ValueError:
                return None
    return None


def iso_ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO-8601 timestamp (or of a number of ms); None when unparsable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return round(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        return None


def as_int(value: Any) -> int:
    """A token count: numbers are truncated to int, anything else is 0."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def make_usage(input_tokens: Any, output_tokens: Any, cache_read: Any = 0, cache_write: Any = 0) -> dict[str, int]:
    """The normalized usage dict (missing or non-numeric counts become 0)."""
    return {
        "input_tokens": as_int(input_tokens),
        "output_tokens": as_int(output_tokens),
        "cache_read_input_tokens": as_int(cache_read),
        "cache_creation_input_tokens": as_int(cache_write),
    }


def anthropic_usage(usage: Any) -> dict[str, int] | None:
    """Anthropic Messages usage (already split: input_tokens excludes cache)."""
    if not isinstance(usage, dict):
        return None
    return make_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                      usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens"))


def openai_usage(usage: Any) -> dict[str, int] | None:
    """OpenAI-compatible usage; prompt_tokens includes cached tokens, so they are split out of input."""
    if not isinstance(usage, dict):
        return None
    cached = usage.get("prompt_cache_hit_tokens")
    if cached is None:
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    cached = as_int(cached)
    return make_usage(max(as_int(usage.get("prompt_tokens")) - cached, 0), usage.get("completion_tokens"), cached, 0)


__all__ = [
    "CLAUDE_CODE",
    "FORMATS",
    "MINI_SWE",
    "OPENCODE_EXPORT",
    "PI_SESSION",
    "RecordedCall",
    "RecordedSession",
    "anthropic_usage",
    "as_int",
    "bad",
    "first_line",
    "iso_ms",
    "make_usage",
    "openai_usage",
    "parse_json",
    "parse_jsonl",
    "read_bytes",
]
