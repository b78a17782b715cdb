"""The proxy's settings: command-line flags over the user config tier (`proxy.*`), then the defaults.

The project tier may not set `proxy.*` at all (config.trust): a repository must not be able to
redirect where a user's requests and keys go.
"""

from __future__ import annotations

import os
import re

from magic_context.errors import BadInput
from magic_context.records import record

_URL = re.compile(r"^https?://[^/\s]+")


@record(frozen=True)
class ProxySettings:
    host: str
    port: int
    upstream_anthropic: str
    upstream_openai: str
    max_body_bytes: int
    connect_timeout_s: float
    read_timeout_s: float
    shutdown_grace_s: float
    project_dir: str  # for requests that name none (the proxy's working directory)

    @property
    def upstreams(self) -> dict[str, str]:
        return {"anthropic": self.upstream_anthropic, "openai": self.upstream_openai}


def _url(value: str, flag: str) -> str:
    if not _URL.match(value):
        raise BadInput(f"{flag} must be an http(s) URL, got {value!r}", fix=f"e.g. {flag} https://api.example.com")
    return value.rstrip("/")


def resolve(*, host: str | None = None, port: int | None = None, upstream_anthropic: str | None = None,
            upstream_openai: str | None = None) -> tuple[ProxySettings, list[str]]:
    """Effective settings and the config warnings met on the way (as printable lines)."""
    from magic_context.config.load import load_config

    loaded = load_config(None)
    conf = loaded.config.proxy
    if port is not None and not 0 <= port <= 65535:
        raise BadInput(f"--port must be between 0 and 65535, got {port}")
    settings = ProxySettings(
        host=host or conf.host,
        port=conf.port if port is None else port,
        upstream_anthropic=_url(upstream_anthropic, "--upstream-anthropic") if upstream_anthropic
        else conf.upstream_anthropic,
        upstream_openai=_url(upstream_openai, "--upstream-openai") if upstream_openai else conf.upstream_openai,
        max_body_bytes=conf.max_body_mb * 1024 * 1024,
        connect_timeout_s=conf.connect_timeout_s,
        read_timeout_s=conf.read_timeout_s,
        shutdown_grace_s=conf.shutdown_grace_s,
        project_dir=os.getcwd(),
    )
    return settings, [str(w) for w in loaded.warnings]


__all__ = ["ProxySettings", "resolve"]
