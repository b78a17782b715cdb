"""Which requests the proxy rewrites, where it sends them, and what it reads from their headers and body.

Model routes (POST only; matched on the path's end so a client base URL with or without a prefix works):
`…/messages` (Anthropic Messages, incl. `?beta=true`), `…/chat/completions` (OpenAI Chat Completions)
and `…/responses` (OpenAI Responses). Everything else — `/v1/models`, `/v1/messages/count_tokens`,
`HEAD /` … — passes through to the upstream its headers point at.
"""

from __future__ import annotations

import json
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
# Session ids the clients send: Claude Code, Codex, OpenCode (after mc's own header).
SESSION_HEADERS = (SESSION_HEADER, "x-claude-code-session-id", "session-id", "x-session-id")
# Headers whose values are secrets: forwarded untouched, registered for redaction, never stored.
AUTH_HEADERS = ("x-api-key", "authorization", "api-key", "proxy-authorization")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,})")


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


def project_dir(headers: Mapping[str, str], default: str) -> str:
    value = headers.get(PROJECT_HEADER)
    return unquote(value) if value else default


def context_limit(headers: Mapping[str, str]) -> str | None:
    value = (headers.get(LIMIT_HEADER) or "").strip()
    return value if value.isdigit() and int(value) > 0 else None


__all__ = ["ANTHROPIC", "AUTH_HEADERS", "CHAT", "LIMIT_HEADER", "PROJECT_HEADER", "RESPONSES", "SESSION_HEADER",
           "SESSION_HEADERS", "Route", "context_limit", "forward_headers", "model_route", "project_dir",
           "response_headers", "secrets", "session_from_body", "session_from_headers", "upstream_for",
           "upstream_url"]
