"""Which requests the proxy rewrites, where it sends them, and what it reads from their headers and body.

Model routes (POST only; matched on the path's end so a client base URL with or without a prefix works):
`…/messages` (Anthropic Messages, incl. `?beta=true`), `…/chat/completions` (OpenAI Chat Completions)
and `…/responses` (OpenAI Responses). Everything else — `/v1/models`, `/v1/messages/count_tokens`,
`HEAD /` … — passes through to the upstream its headers point at.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from urllib.parse import unquote

from magic_context.records import record
from magic_context.wire import model as m

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

ANTHROPIC = "anthropic"  # wire families of the model routes (also the shape of their errors)
CHAT = "chat"
RESPONSES = "responses"

# Request headers a client (or the `mc setup` installer) sets for mc; never forwarded upstream.
PROJECT_HEADER = "x-mc-project-dir"
SESSION_HEADER = "x-mc-session-id"
LIMIT_HEADER = "x-mc-context-limit"
UPSTREAM_HEADER = "x-mc-upstream"  # the base URL this client's requests go on to (its original provider)
# Claude Code names the subagent a request belongs to (and its parent); a subagent keeps its own history.
AGENT_HEADER = "x-claude-code-agent-id"
# Claude Code's side requests (memory extraction, compaction, side replies) reuse the session id with a
# message list of their own; when it labels them, they are filed apart too.
AUXILIARY_HEADER = "x-claude-code-auxiliary-type"
REQUEST_CLASS_HEADER = "x-claude-code-request-class"
SIDE_CLASSES = frozenset({"compaction", "auxiliary", "side_reply", "workflow"})
# Codex's per-turn metadata (JSON): `workspaces` names the directory it works in.
CODEX_TURN_HEADER = "x-codex-turn-metadata"
# Session ids the clients send: Claude Code, Codex, OpenCode (after mc's own header).
SESSION_HEADERS = (SESSION_HEADER, "x-claude-code-session-id", "session-id", "x-session-id")
# Headers whose values are secrets: forwarded untouched, registered for redaction, never stored.
AUTH_HEADERS = ("x-api-key", "authorization", "api-key", "proxy-authorization")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,})")
_AGENT_ID = re.compile(r"[0-9A-Za-z._-]{1,128}")
_CLAUDE_CWD = re.compile(r"Primary working directory: ([^\n]+)")
_EARLY = 8  # how many leading messages / input items may state the working directory
_CODEX_CWD = re.compile(r"<environment_context>\s*<cwd>([^<\n]+)</cwd>")


@record(frozen=True)
class Route:
    """A model route: its wire family, the upstream it goes to, and the transform harness of its bodies."""

    wire: str
    upstream: str  # "anthropic" | "openai"
    harness: str


_MODEL_ROUTES = (("/messages", Route(ANTHROPIC, "anthropic", m.ANTHROPIC)),
                 ("/chat/completions", Route(CHAT, "openai", m.OPENAI)),
                 ("/responses", Route(RESPONSES, "openai", m.OPENAI_RESPONSES)))


def model_route(method: str, path: str) -> Route | None:
    """The model route of a request, or None for a pass-through request."""
    if method != "POST":
        return None
    trimmed = path.rstrip("/")
    return next((route for suffix, route in _MODEL_ROUTES if trimmed.endswith(suffix)), None)


def upstream_for(path: str, headers: Mapping[str, str], route: Route | None) -> str:
    """"anthropic" or "openai": the route's, else Anthropic for its paths or an Anthropic client's headers."""
    if route is not None:
        return route.upstream
    if "/messages" in path or path.rstrip("/").endswith("/complete") or "anthropic-version" in headers \
            or "x-api-key" in headers:
        return "anthropic"
    return "openai"


def upstream_url(base: str, path: str, query: str) -> str:
    """Join the upstream base URL and the request path; a base ending in /v1 absorbs the path's /v1."""
    base = base.rstrip("/")
    if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    return f"{base}{path}" + (f"?{query}" if query else "")


def forward_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Request headers to send upstream: all but hop-by-hop ones, Host, Content-Length (recomputed) and
    mc's own; the answer is asked for uncompressed, so its usage can be read on the way back."""
    dropped = {*HOP_BY_HOP, "accept-encoding"}
    for name, value in headers:
        if name.lower() == "connection":
            dropped |= {token.strip().lower() for token in value.split(",")}
    out = [(name, value) for name, value in headers if name.lower() not in dropped
           and not name.lower().startswith("x-mc-")]
    return [*out, ("accept-encoding", "identity")]


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Upstream response headers to relay: all but hop-by-hop ones (Content-Length is kept: bytes pass unchanged)."""
    return [(name, value) for name, value in headers if name.lower() not in HOP_BY_HOP - {"content-length"}]


def secrets(headers: Mapping[str, str]) -> list[str]:
    """The secret values in the client's auth headers (a bearer token also on its own)."""
    found = []
    for name in AUTH_HEADERS:
        value = headers.get(name)
        if value:
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                found.append(token.strip())
    return found


def session_from_headers(headers: Mapping[str, str]) -> str | None:
    return next((unquote(headers[name]) for name in SESSION_HEADERS if headers.get(name)), None)


def _label(value: str) -> str:
    return value if _AGENT_ID.fullmatch(value) else hashlib.sha256(value.encode()).hexdigest()[:16]


def agent_session(session: str | None, headers: Mapping[str, str]) -> str | None:
    """A Claude Code subagent's own session, `<session>/agent-<agent id>`: its requests carry the parent's
    session id but a history of their own, which must not be filed as the next turn of the parent's.
    Labelled side requests get `/aux-<type>` (x-claude-code-auxiliary-type) or `/<class>` (a side
    x-claude-code-request-class: compaction, auxiliary, side_reply, workflow) for the same reason."""
    if not session:
        return session
    parts = [session]
    agent = (headers.get(AGENT_HEADER) or "").strip()
    if agent:
        parts.append(f"agent-{_label(agent)}")
    auxiliary = (headers.get(AUXILIARY_HEADER) or "").strip()
    request_class = (headers.get(REQUEST_CLASS_HEADER) or "").strip().lower()
    if auxiliary:
        parts.append(f"aux-{_label(auxiliary)}")
    elif request_class in SIDE_CLASSES:
        parts.append(request_class)
    return "/".join(parts)


def session_from_body(document: Any, route: Route) -> str | None:
    """Claude Code's `metadata.user_id` (a JSON string with `session_id`, or `…_session_<id>` before 2.1),
    or an OpenAI body's `prompt_cache_key` (Codex sets it to its session id)."""
    if not isinstance(document, dict):
        return None
    if route.wire == ANTHROPIC:
        metadata = document.get("metadata")
        user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
        if not isinstance(user_id, str):
            return None
        if user_id.startswith("{"):
            try:
                parsed = json.loads(user_id)
            except ValueError:
                parsed = None
            session = parsed.get("session_id") if isinstance(parsed, dict) else None
            return session if isinstance(session, str) and session else None
        match = _SESSION_IN_USER_ID.search(user_id)
        return match.group(1) if match else None
    key = document.get("prompt_cache_key")
    return key if isinstance(key, str) and key else None


def project_dir(headers: Mapping[str, str], default: str, document: Any = None) -> str:
    """The installer's header, else the directory the client says it works in, else `default`."""
    value = headers.get(PROJECT_HEADER)
    if value:
        return unquote(value)
    declared = _declared_dir(headers, document)
    return declared if declared is not None and os.path.isabs(declared) and os.path.isdir(declared) else default


def _declared_dir(headers: Mapping[str, str], document: Any) -> str | None:
    """Codex: the first workspace of its turn metadata (git checkouts), else the `<cwd>` of its
    `<environment_context>` item; Claude Code: "Primary working directory:" in a `role: system` message or
    the system prompt (its environment section)."""
    metadata = headers.get(CODEX_TURN_HEADER)
    if metadata:
        try:
            workspaces = json.loads(metadata).get("workspaces")
        except (ValueError, AttributeError):
            workspaces = None
        if isinstance(workspaces, dict) and workspaces:
            return str(next(iter(workspaces)))
    if not isinstance(document, dict):
        return None
    texts: list[Any] = [document.get("system")]
    messages = document.get("messages")
    if isinstance(messages, list):  # Claude Code states it early: only the first few messages are read
        texts += [item.get("content") for item in messages[:_EARLY] if isinstance(item, dict)
                  and item.get("role") == "system"]
    items = document.get("input")
    if isinstance(items, list):  # Codex: its <environment_context> user item, among the first few
        texts += [item.get("content") for item in items[:_EARLY] if isinstance(item, dict)
                  and item.get("role") == "user"]
    for text in texts:
        for block in (text if isinstance(text, list) else [text]):
            value = block.get("text") if isinstance(block, dict) else block
            match = (_CLAUDE_CWD.search(value) or _CODEX_CWD.search(value)) if isinstance(value, str) else None
            if match:
                return match.group(1).strip()
    return None


def upstream_override(headers: Mapping[str, str]) -> str | None:
    """The installer's `x-mc-upstream` base URL (the client's own provider), when it is an http(s) URL."""
    value = unquote(headers.get(UPSTREAM_HEADER) or "").strip()
    return value.rstrip("/") if re.match(r"^https?://[^/\s]+", value) else None


def context_limit(headers: Mapping[str, str]) -> str | None:
    value = (headers.get(LIMIT_HEADER) or "").strip()
    return value if value.isdigit() and int(value) > 0 else None


__all__ = ["AGENT_HEADER", "ANTHROPIC", "AUTH_HEADERS", "AUXILIARY_HEADER", "CHAT", "LIMIT_HEADER", "PROJECT_HEADER",
           "REQUEST_CLASS_HEADER", "RESPONSES", "SESSION_HEADER", "SESSION_HEADERS", "UPSTREAM_HEADER", "Route",
           "agent_session", "context_limit", "forward_headers", "model_route", "project_dir", "response_headers",
           "secrets", "session_from_body", "session_from_headers", "upstream_for", "upstream_override", "upstream_url"]
