"""The transform's input and output documents (DESIGN §3.1–3.2).

Three input shapes: an envelope `{"messages": …, harness?, session_id?, …}`, a provider request
body (Anthropic Messages / OpenAI Chat Completions / OpenAI Responses), or a bare OpenCode / Pi
message array. An OpenAI Responses body or envelope carries its items in `input` (a string `input` is
one user message) and its system text in `instructions`; the output writes them back under the same
keys. The output has the same shape; fields mc does not change pass through untouched.
"""

from __future__ import annotations

import os
import time

from magic_context.errors import BadInput
from magic_context.records import record
from magic_context.wire import anthropic, detect, identity, openai, opencode, pi, responses
from magic_context.wire import model as m
from magic_context.wire.jsonio import MAX_DEPTH, dumps, loads

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

    from magic_context.protocols import Codec

try:
    from orjson import JSONDecodeError as _DecodeError
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _DecodeError = ValueError  # type: ignore[assignment,misc]

#: The latest `now` accepted (9999-12-31T23:59:59.999Z in epoch ms): past it no date can be stored or shown.
MAX_NOW_MS: Final = 253_402_300_799_999

CODECS: Final[dict[str, Codec]] = {m.OPENCODE: opencode, m.PI: pi, m.ANTHROPIC: anthropic, m.OPENAI: openai,
                  m.OPENAI_RESPONSES: responses}


@record
class PassInput:
    """Everything a pass needs from the input document and the flags."""

    document: Any
    shape: str  # "envelope" | "body" | "array"
    harness: str
    messages_json: list
    session_id: str
    project_dir: str
    model_key: str | None
    context_limit: int | None
    usage: m.Usage | None
    agent: str
    now_ms: int
    system: Any = None  # envelope `system`, Anthropic body `system`, or Responses `instructions`
    tools: list[str] | None = None
    report: bool = False
    dry_run: bool = False
    messages_key: str = "messages"  # where the messages live in the document ("input" for Responses)
    system_key: str = "system"  # where `system` lives ("instructions" for Responses)


def parse_document(data: bytes) -> Any:
    """Parse stdin as one JSON document; BadInput naming the problem and position."""
    if not data.strip():
        raise BadInput("empty input on stdin", fix="pipe one JSON document (envelope, request body or message array)")
    try:
        return loads(data)
    except (_DecodeError, RecursionError, UnicodeDecodeError, ValueError) as exc:
        if "depth limit" in str(exc) or isinstance(exc, RecursionError):
            raise BadInput(f"stdin nests JSON deeper than {MAX_DEPTH} levels ({exc})",
                           fix="no harness sends this: check what produced the request") from exc
        raise BadInput(f"stdin is not valid JSON: {exc}", fix="pipe one JSON document") from exc


def _usage(value: Any) -> m.Usage | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadInput("usage must be an object with input_tokens, output_tokens, cache_* fields")
    fields = {}
    for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        raw = value.get(name, 0) or 0
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise BadInput(f"usage.{name} must be a non-negative integer")
        fields[name] = raw
    return m.Usage(**fields)


def _model(value: Any, flag: str | None, body_model: Any) -> tuple[str | None, int | None]:
    limit = None
    key = None
    if isinstance(value, dict):
        provider, model_id = value.get("provider"), value.get("id")
        for name, part in (("provider", provider), ("id", model_id)):
            if part is not None and not isinstance(part, str):
                raise BadInput(f"model.{name} must be a string")
        key = f"{provider}/{model_id}" if provider and model_id else (model_id or None)
        raw_limit = value.get("context_limit")
        if raw_limit is not None:
            if isinstance(raw_limit, bool) or not isinstance(raw_limit, int):
                raise BadInput("model.context_limit must be an integer")
            limit = raw_limit
    elif isinstance(body_model, str):
        key = body_model
    if flag:
        key = flag
    return key, limit


def _first_user_text(harness: str, messages: list) -> str:
    for message in messages:
        if not isinstance(message, dict):
            continue
        if harness == m.OPENCODE:
            info, parts = message.get("info"), message.get("parts")
            if isinstance(info, dict) and info.get("role") == "user" and isinstance(parts, list):
                return "".join(t for p in parts if isinstance(p, dict) and isinstance(t := p.get("text", ""), str))
        elif message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(t for b in content if isinstance(b, dict) and isinstance(t := b.get("text", ""), str))
    return ""


def _session_id(doc: dict | None, harness: str, messages: list, flag: str | None, project: str) -> str:
    if doc is not None and doc.get("session_id") is not None:
        if not isinstance(doc["session_id"], str) or not doc["session_id"]:
            raise BadInput("session_id must be a non-empty string")
        return doc["session_id"]
    if harness == m.OPENCODE and messages and isinstance(messages[0], dict):
        info = messages[0].get("info")
        if isinstance(info, dict) and isinstance(info.get("sessionID"), str):
            return info["sessionID"]
    if flag:
        return flag
    text = _first_user_text(harness, messages)
    mark = _session_mark(doc)
    seed = f"{project}\x00{mark}\x00{text}" if mark else f"{project}\x00{text}"
    return "fp-" + identity.digest(seed.encode("utf-8", "replace"), 8)


def _session_mark(doc: dict | None) -> str | None:
    """What a provider body says about its conversation: Codex's `prompt_cache_key` (its thread id), Claude
    Code's `metadata.user_id` (which names its session). Codex's first user item is only its environment
    context (directory and date), so without this mark its sessions of one day in one project would meet."""
    if doc is None:
        return None
    key = doc.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return key
    metadata = doc.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    return user if isinstance(user, str) and user else None


def _project_dir(value: Any, flag: str | bool | None) -> str:
    """The project directory: envelope `project_dir`, else `--project`, else the current directory."""
    if value is not None and not isinstance(value, str):
        raise BadInput(f"project_dir must be a string path, got {m.json_kind(value)}")
    for name, candidate in (("project_dir", value), ("--project", flag)):
        if isinstance(candidate, str) and "\x00" in candidate:
            raise BadInput(f"{name} contains a NUL byte, which no path can hold")
    chosen = value or (flag if isinstance(flag, str) else None) or os.getcwd()
    return os.path.normpath(chosen)


def _now(value: Any) -> int | None:
    """The envelope's `now` (epoch ms) as an int; BadInput unless a number in [0, year 9999]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadInput(f"now must be epoch milliseconds (a number), got {m.json_kind(value)}")
    if not 0 <= value <= MAX_NOW_MS:  # NaN fails this too
        raise BadInput(f"now must be epoch milliseconds between 0 and {MAX_NOW_MS} (year 9999), got {value!r:.40}")
    return int(value)


def _tool_names(value: Any) -> list[str] | None:
    """Tool names from a tools list in any of the accepted forms (names, Anthropic, OpenAI definitions)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise BadInput("tools must be an array of tool definitions")
    names = [v for v in value if isinstance(v, str)]
    return names + anthropic.tool_names(value) + openai.tool_names(value) + responses.tool_names(value)


def read_input(document: Any, options: dict[str, str | bool]) -> PassInput:
    """Classify the document's shape and collect the pass inputs; BadInput on anything malformed."""
    messages: Any
    if isinstance(document, list):
        shape, doc, messages, messages_key = "array", None, document, "messages"
    elif isinstance(document, dict):
        messages_key, messages = "messages", document.get("messages")
        if messages is None and isinstance(document.get("input"), list | str):  # OpenAI Responses
            messages_key, messages = "input", document["input"]
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, list):
            raise BadInput("unknown shape: an object must carry a `messages` array (or a Responses `input`)")
        # A provider request body always names its model with a string; anything else is an envelope.
        shape, doc = ("body" if isinstance(document.get("model"), str) else "envelope"), document
    else:
        raise BadInput(f"expected a JSON object or array, got {type(document).__name__}")

    flag_harness = options.get("--harness")
    if isinstance(flag_harness, str) and flag_harness not in m.HARNESSES:
        raise BadInput(f"--harness must be one of {', '.join(m.HARNESSES)}, got {flag_harness!r}")
    harness = (doc or {}).get("harness") or flag_harness or detect.detect_harness(document)
    if not isinstance(harness, str) or harness not in m.HARNESSES:
        raise BadInput(f"unknown harness {str(harness)[:40]!r}", fix=f"use one of {', '.join(m.HARNESSES)}")

    project = _project_dir((doc or {}).get("project_dir"), options.get("--project"))
    flag_session = options.get("--session")
    if isinstance(flag_session, str) and (not flag_session or "\x00" in flag_session):
        raise BadInput("--session must be a non-empty string without NUL bytes")
    session_id = _session_id(doc, harness, messages, flag_session if isinstance(flag_session, str) else None, project)

    flag_model = options.get("--model")
    model_key, limit = _model((doc or {}).get("model") if shape == "envelope" else None,
                              flag_model if isinstance(flag_model, str) else None,
                              (doc or {}).get("model"))
    flag_limit = options.get("--context-limit")
    if isinstance(flag_limit, str):
        limit = int(flag_limit)

    now = _now((doc or {}).get("now") if shape == "envelope" else None)
    agent = (doc or {}).get("agent", "primary") if shape == "envelope" else "primary"
    if not isinstance(agent, str):
        raise BadInput("agent must be a string: primary or subagent")

    tools = _tool_names((doc or {}).get("tools"))

    system_key = "instructions" if harness == m.OPENAI_RESPONSES else "system"
    system = (doc or {}).get(system_key) if shape in ("envelope", "body") else None
    if system_key == "instructions" and system is not None and not isinstance(system, str):
        raise BadInput(f"instructions must be a string, got {m.json_kind(system)}")
    return PassInput(
        document=document, shape=shape, harness=harness, messages_json=messages, session_id=session_id,
        project_dir=project, model_key=model_key, context_limit=limit,
        usage=_usage((doc or {}).get("usage")) if shape == "envelope" else None,
        agent=agent, now_ms=now if now is not None else int(time.time() * 1000),
        system=system, tools=tools, report=bool(options.get("--report")), dry_run=bool(options.get("--dry-run")),
        messages_key=messages_key, system_key=system_key,
    )


def reduce_available(enabled: bool, tools: list[str] | None) -> bool:
    """ctx_reduce counts as available when enabled and no tool list is given or the list names it."""
    if not enabled:
        return False
    if tools is None:
        return True
    return any(name == "ctx_reduce" or name.endswith("__ctx_reduce") or name.endswith(".ctx_reduce") for name in tools)


def build_output(inp: PassInput, messages_out: list, system_out: Any) -> Any:
    """Put the rewritten messages (and system) back into a document of the input's shape."""
    if inp.shape == "array":
        return messages_out
    document = dict(inp.document)
    document[inp.messages_key] = messages_out
    if system_out is not None:
        document[inp.system_key] = system_out
    return document


__all__ = ["CODECS", "MAX_DEPTH", "MAX_NOW_MS", "PassInput", "build_output", "dumps", "loads", "parse_document",
           "read_input", "reduce_available"]
