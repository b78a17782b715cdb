"""A throwaway, offline environment for one real client run: its own HOME and XDG dirs, the clients'
offline switches (real-clients.md), no provider keys or proxies from the developer's shell, and mc's
isolated data/config dirs carried over from the test."""

from __future__ import annotations

import os
from pathlib import Path

# The switches each client needs to make no non-loopback connection (real-clients.md §2–§5).
OFFLINE_SWITCHES = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "NO_COLOR": "1", "CI": os.environ.get("CI", ""),
}
_KEEP = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT", "MAGIC_CONTEXT_STORAGE_DIR",
         "MAGIC_CONTEXT_CONFIG_DIR", "MAGIC_CONTEXT_HISTORIAN")


def client_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment for a client run rooted at `root` (created): HOME, XDG_*, PI_CODING_AGENT_DIR inside it."""
    dirs = {"HOME": root / "home", "XDG_CONFIG_HOME": root / "xdg-config", "XDG_DATA_HOME": root / "xdg-data",
            "XDG_CACHE_HOME": root / "xdg-cache", "XDG_STATE_HOME": root / "xdg-state",
            "PI_CODING_AGENT_DIR": root / "pi-agent", "CODEX_HOME": root / "codex-home"}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in _KEEP if k in os.environ}
    env.update({k: str(v) for k, v in dirs.items()})
    env.update({k: v for k, v in OFFLINE_SWITCHES.items() if v})
    env.update(extra)
    return env


__all__ = ["OFFLINE_SWITCHES", "client_env"]
