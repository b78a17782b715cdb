"""Claude Code: routed through `mc proxy` by its settings file's `env` (it has no hook that sees the messages).

The install sets two variables in the `env` object of `.claude/settings.json` (project) or
`~/.claude/settings.json` (`--global`; `$CLAUDE_CONFIG_DIR` when set), which Claude Code applies to
itself at start-up:

- `ANTHROPIC_BASE_URL` = the proxy's address;
- `ANTHROPIC_CUSTOM_HEADERS` (one `Name: Value` per line; the user's own lines are kept) gains
  `x-mc-project-dir: <project>` for a project install and `x-mc-upstream: <url>` when the settings already
  named a base URL of their own (a gateway): the proxy forwards there instead of its default upstream.

Every other key of the file is kept; `--uninstall` restores it (see `proxied`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from magic_context.errors import BadInput
from magic_context.integrations import base, proxied
from magic_context.integrations.base import Detection, Scope, ScopeKind, SetupResult, Verification

NAME = "claude-code"
BINARY = "claude"
TESTED_VERSIONS = ("2.1.332",)
BASE_URL = "ANTHROPIC_BASE_URL"
HEADERS = "ANTHROPIC_CUSTOM_HEADERS"
CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"


def global_dir() -> Path:
    """Claude Code's user directory (`$CLAUDE_CONFIG_DIR`, default `~/.claude`)."""
    override = os.environ.get(CONFIG_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else Path.home() / ".claude"


def settings_file(scope: Scope) -> Path:
    return scope.root / ".claude" / "settings.json" if scope.kind == ScopeKind.PROJECT else scope.root / "settings.json"


def install_dir(scope: Scope) -> Path:
    """Where the install record lives (mc's data dir; nothing of mc's in the client's directories)."""
    return proxied.record_dir(NAME, settings_file(scope))


def _load(data: bytes | None, path: Path) -> dict[str, Any]:
    if data is None or not data.strip():
        return {}
    try:
        settings = json.loads(data)
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON: {exc}", fix="fix or move the file, then rerun mc setup") from exc
    if not isinstance(settings, dict) or not isinstance(settings.get("env", {}), dict):
        raise BadInput(f"{path}: expected a JSON object whose `env` is an object", fix="fix the file, then rerun")
    return settings


def _dump(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _user_header_lines(value: Any) -> list[str]:
    """The lines of ANTHROPIC_CUSTOM_HEADERS that are not mc's."""
    lines = str(value or "").splitlines()
    return [line for line in lines if line.strip() and not line.strip().lower().startswith("x-mc-")]


def detect(project: Path | None = None) -> Detection:
    return base.detect(NAME, BINARY, TESTED_VERSIONS, install_dir=install_dir, global_root=global_dir(),
                       project=project)


def install(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    path = settings_file(scope)
    current = _load(proxied.files.read_bytes(path), path)
    env = current.get("env", {})
    record = base.read_manifest(install_dir(scope))
    previous = record["previous"] if record else {BASE_URL: env.get(BASE_URL), HEADERS: env.get(HEADERS)}
    proxy = proxied.proxy_url()
    mc_headers = [f"x-mc-project-dir: {scope.root}"] if scope.kind == ScopeKind.PROJECT else []
    upstream = previous.get(BASE_URL)
    if upstream and str(upstream).rstrip("/") != proxy:
        mc_headers.append(f"x-mc-upstream: {str(upstream).rstrip('/')}")

    def render(before: bytes | None) -> bytes:
        settings = _load(before, path)
        env = dict(settings.get("env", {}))
        env[BASE_URL] = proxy
        lines = _user_header_lines(env.get(HEADERS)) + mc_headers
        if lines:
            env[HEADERS] = "\n".join(lines)
        else:
            env.pop(HEADERS, None)
        settings["env"] = env
        return _dump(settings)

    notes = [n for n in base.version_warnings("Claude Code", shutil.which(BINARY), TESTED_VERSIONS)
             if "not on PATH" not in n]
    return proxied.install(NAME, scope, path, proxy=proxy, render=render, previous=previous, dry_run=dry_run,
                           notes=notes)


def _strip(current: bytes, previous: dict[str, Any]) -> bytes:
    """The settings without mc's values: the previous base URL back, mc's header lines out; the bytes
    unchanged when they hold nothing of mc's (a base URL is mc's only when it is the proxy's address)."""
    path = Path("settings.json")
    settings = _load(current, path)
    env = dict(settings.get("env", {}))
    ours_url = str(env.get(BASE_URL, "")).rstrip("/") in {previous.get("proxy_url"), proxied.proxy_url()}
    if not ours_url and _user_header_lines(env.get(HEADERS)) == str(env.get(HEADERS) or "").splitlines():
        return current
    if previous.get(BASE_URL):
        env[BASE_URL] = previous[BASE_URL]
    elif ours_url:
        env.pop(BASE_URL, None)
    lines = _user_header_lines(env.get(HEADERS))
    if lines:
        env[HEADERS] = "\n".join(lines)
    else:
        env.pop(HEADERS, None)
    if env:
        settings["env"] = env
    else:
        settings.pop("env", None)
    return _dump(settings)


def uninstall(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    return proxied.uninstall(NAME, scope, settings_file(scope), strip=_strip, dry_run=dry_run)


def _routed(data: bytes, url: str) -> str | None:
    try:
        env = _load(data, Path("settings.json")).get("env", {})
    except BadInput as exc:
        return str(exc)
    if str(env.get(BASE_URL, "")).rstrip("/") != url:
        return f"its env.{BASE_URL} is {env.get(BASE_URL)!r}, not mc proxy ({url})"
    return None


def verify(scope: Scope) -> Verification:
    return proxied.verify(NAME, "Claude Code", scope, settings_file(scope), routed=_routed,
                          binary=shutil.which(BINARY), tested=TESTED_VERSIONS)


__all__ = ["NAME", "TESTED_VERSIONS", "detect", "global_dir", "install", "install_dir", "settings_file", "uninstall",
           "verify"]
