"""The captured real request bodies (../shared/data/requests, beside the repo) and what each one really is.

`TRUE_FORMAT`: the API each client called, or for a hook's input its message format (the README there
says which). `METADATA_HOOKS`: Claude Code and Codex hook inputs, which carry ids and paths but never
the message array: they are not transform input.
"""

from __future__ import annotations

from pathlib import Path

from magic_context.wire import model as m

REQUESTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "requests"
TRUE_FORMAT = {
    "claude-code-2.1.197-1.json": m.ANTHROPIC,
    "claude-code-2.1.332-1.json": m.ANTHROPIC,
    "claude-code-2.1.332-2.json": m.ANTHROPIC,
    "codex-0.171.0-1.json": m.OPENAI_RESPONSES,
    "codex-0.171.0-2.json": m.OPENAI_RESPONSES,
    "opencode-1.18.33-1.json": m.ANTHROPIC,
    "opencode-1.18.33-2.json": m.ANTHROPIC,
    "opencode-1.18.33-3.json": m.OPENAI,
    "opencode-1.18.33-hook-1.json": m.OPENCODE,
    "pi-0.73.1-1.json": m.ANTHROPIC,
    "pi-0.73.1-2.json": m.OPENAI,
    "pi-0.73.1-hook-1.json": m.PI,
}
METADATA_HOOKS = ["claude-code-2.1.332-hook-1.json", "claude-code-2.1.332-hook-2.json", "codex-0.171.0-hook-1.json",
                  "codex-0.171.0-hook-2.json", "codex-0.171.0-hook-3.json", "codex-0.171.0-hook-4.json"]


def bodies(prefix: str) -> list[Path]:
    """The captured request bodies (not hook inputs) of one client, e.g. "codex"."""
    return [REQUESTS / name for name in sorted(TRUE_FORMAT) if name.startswith(prefix) and "-hook-" not in name]


__all__ = ["METADATA_HOOKS", "REQUESTS", "TRUE_FORMAT", "bodies"]
