"""Codex CLI: routed through `mc proxy` by a model provider in its config (it has no hook that sees the input).

Codex reads providers only from its user config, `$CODEX_HOME/config.toml` (default
`~/.codex/config.toml`), so this install is always global. It adds `[model_providers.magic-context]`
(`base_url` = the proxy + `/v1`, `wire_api = "responses"`, the key variable and headers of the provider
used before) and selects it with the top-level `model_provider`. The provider sends
`x-mc-upstream: <the previous provider's base_url>` so the proxy forwards where Codex went before (none
for the built-in `openai` provider: the proxy's default OpenAI upstream). The project directory needs no
header: Codex names its workspace in every request (`x-codex-turn-metadata`), and the proxy reads it.

The file is edited with tomlkit, so comments and layout stay; `--uninstall` restores it (see `proxied`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from magic_context.errors import BadInput
from magic_context.integrations import base, proxied
from magic_context.integrations.base import Detection, Scope, ScopeKind, SetupResult, Verification

NAME = "codex"
BINARY = "codex"
TESTED_VERSIONS = ("0.171.0",)
GLOBAL_ONLY = True  # Codex reads model providers from its user config only
PROVIDER = "magic-context"
HOME_ENV = "CODEX_HOME"
# Keys of the previous provider the proxied one keeps (how Codex authenticates and retries).
_CARRIED = ("env_key", "env_key_instructions", "query_params", "env_http_headers", "request_max_retries",
            "stream_max_retries", "stream_idle_timeout_ms")
_BUILTIN_KEYS = {"openai": "OPENAI_API_KEY"}


def global_dir() -> Path:
    """Codex's home (`$CODEX_HOME`, default `~/.codex`)."""
    override = os.environ.get(HOME_ENV, "").strip()
    return Path(override).expanduser() if override else Path.home() / ".codex"


def config_file(_scope: Scope | None = None) -> Path:
    return global_dir() / "config.toml"


def install_dir(scope: Scope) -> Path:
    """Where the install record lives; a project scope has none (Codex has no project providers)."""
    if scope.kind != ScopeKind.GLOBAL:
        return proxied.record_dir(NAME, scope.root / ".codex" / "config.toml")
    return proxied.record_dir(NAME, config_file())


def _parse(data: bytes | None, path: Path) -> Any:
    import tomlkit

    try:
        return tomlkit.parse((data or b"").decode("utf-8"))
    except Exception as exc:  # tomlkit's ParseError, a decoding error
        raise BadInput(f"{path} is not valid TOML: {exc}", fix="fix the file, then rerun mc setup") from exc


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def detect(project: Path | None = None) -> Detection:
    return base.detect(NAME, BINARY, TESTED_VERSIONS, install_dir=install_dir, global_root=global_dir(),
                       project=project)


def _previous(doc: Any) -> dict[str, Any]:
    """The provider selected before the install, and what of it the proxied provider needs."""
    selected = _plain(doc.get("model_provider"))
    providers = _plain(doc.get("model_providers")) or {}
    table = providers.get(selected or "openai") if isinstance(providers, dict) else None
    return {"model_provider": selected, "provider": table if isinstance(table, dict) else None}


def install(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    import tomlkit

    if scope.kind != ScopeKind.GLOBAL:
        raise BadInput("Codex reads model providers only from its user config", fix="pass --global")
    path = config_file()
    record = base.read_manifest(install_dir(scope))
    previous = record["previous"] if record else _previous(_parse(proxied.files.read_bytes(path), path))
    if previous.get("model_provider") == PROVIDER:
        previous = {"model_provider": None, "provider": None}
    proxy = proxied.proxy_url()
    old = previous.get("provider") or {}
    selected = previous.get("model_provider") or "openai"
    notes = [n for n in base.version_warnings("Codex", shutil.which(BINARY), TESTED_VERSIONS) if "not on PATH" not in n]
    if not old and selected not in _BUILTIN_KEYS:
        notes.append(f"the provider {selected!r} is not defined in {path}: requests go to the proxy's OpenAI "
                     "upstream")
    if selected == "openai" and not old:
        notes.append("Codex authenticates with OPENAI_API_KEY through the proxy (a ChatGPT sign-in is not proxied)")

    def render(before: bytes | None) -> bytes:
        doc = _parse(before, path)
        provider = tomlkit.table()
        provider["name"] = "magic-context (mc proxy)"
        provider["base_url"] = f"{proxy}/v1"
        provider["wire_api"] = "responses"
        for key in _CARRIED:
            if key in old:
                provider[key] = old[key]
        if "env_key" not in provider and selected in _BUILTIN_KEYS:
            provider["env_key"] = _BUILTIN_KEYS[selected]
        headers = tomlkit.inline_table()
        headers.update({k: v for k, v in (old.get("http_headers") or {}).items() if not k.lower().startswith("x-mc-")})
        if old.get("base_url"):
            headers["x-mc-upstream"] = str(old["base_url"]).rstrip("/")
        if headers:
            provider["http_headers"] = headers
        doc["model_provider"] = PROVIDER
        if "model_providers" not in doc:
            doc["model_providers"] = tomlkit.table(is_super_table=True)
        doc["model_providers"][PROVIDER] = provider
        return tomlkit.dumps(doc).encode("utf-8")

    return proxied.install(NAME, scope, path, proxy=proxy, render=render, previous=previous, dry_run=dry_run,
                           notes=notes)


def _strip(current: bytes, previous: dict[str, Any]) -> bytes:
    """The config without mc's provider, the previous selection back."""
    import tomlkit

    doc = _parse(current, config_file())
    providers = doc.get("model_providers")
    if (providers is None or PROVIDER not in providers) and _plain(doc.get("model_provider")) != PROVIDER:
        return current
    if providers is not None and PROVIDER in providers:
        del providers[PROVIDER]
        if not providers:
            del doc["model_providers"]
    if _plain(doc.get("model_provider")) == PROVIDER:
        if previous.get("model_provider"):
            doc["model_provider"] = previous["model_provider"]
        else:
            del doc["model_provider"]
    return tomlkit.dumps(doc).encode("utf-8")


def uninstall(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    if scope.kind != ScopeKind.GLOBAL:
        raise BadInput("Codex reads model providers only from its user config", fix="pass --global")
    return proxied.uninstall(NAME, scope, config_file(), strip=_strip, dry_run=dry_run)


def _routed(data: bytes, url: str) -> str | None:
    try:
        doc = _parse(data, config_file())
    except BadInput as exc:
        return str(exc)
    if _plain(doc.get("model_provider")) != PROVIDER:
        return f"its model_provider is {_plain(doc.get('model_provider'))!r}, not {PROVIDER!r}"
    provider = (_plain(doc.get("model_providers")) or {}).get(PROVIDER) or {}
    if str(provider.get("base_url", "")).rstrip("/") != f"{url}/v1":
        return f"model_providers.{PROVIDER}.base_url is {provider.get('base_url')!r}, not {url}/v1"
    return None


def verify(scope: Scope) -> Verification:
    return proxied.verify(NAME, "Codex", scope, config_file(), routed=_routed, binary=shutil.which(BINARY),
                          tested=TESTED_VERSIONS)


__all__ = ["GLOBAL_ONLY", "NAME", "PROVIDER", "TESTED_VERSIONS", "config_file", "detect", "global_dir", "install",
           "install_dir", "uninstall", "verify"]
