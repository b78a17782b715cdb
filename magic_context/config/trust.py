"""The project tier's trust boundary (stdlib only: shared by the loader and the hot-path reader).

A project's `.magic-context.toml` comes with the repository, so it is untrusted: it may not
redirect mc (provider commands, endpoints, API-key variables, prompts, sqlite settings,
user-only switches) and may only raise thresholds, never lower them.
"""

from __future__ import annotations

from magic_context.config.files import ConfigWarning

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

# Whole subtrees and leaves the project tier may never set.
UNTRUSTED_PATHS: Final = frozenset({
    "sqlite",
    "proxy",
    "fail_closed_blocking",
    "output_reserve",
    "historian.provider",
    "historian.fallback",
    "historian.anthropic",
    "historian.openai",
    "historian.command",
    "historian.model",
    "embedding.provider",
    "embedding.endpoint",
    "embedding.model",
})
# Leaf names that are never allowed in the project tier, wherever they appear.
UNTRUSTED_LEAVES: Final = frozenset({"command", "argv", "endpoint", "base_url", "url", "prompt", "skip_signatures"})
UNTRUSTED_SUFFIXES: Final = ("_command", "_endpoint", "_url", "_prompt", "_env")
# Numeric thresholds the project may only raise (scalar or per-model map).
RAISE_ONLY: Final = ("execute_threshold_percentage", "execute_threshold_tokens", "protected_tags")


def _is_untrusted(dotted: str) -> bool:
    if any(dotted == p or dotted.startswith(p + ".") for p in UNTRUSTED_PATHS):
        return True
    leaf = dotted.rsplit(".", 1)[-1].lower()
    return leaf in UNTRUSTED_LEAVES or leaf.endswith(UNTRUSTED_SUFFIXES) or "api_key" in leaf


def strip_untrusted(data: dict[str, Any], file: str, prefix: str = "") -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Copy of `data` without the keys a project may not set, with one warning per stripped key."""
    clean: dict[str, Any] = {}
    warnings: list[ConfigWarning] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if _is_untrusted(dotted):
            warnings.append(ConfigWarning(file, dotted, "not allowed in a project config (set it in your user config)"))
            continue
        if isinstance(value, dict):
            sub, sub_warnings = strip_untrusted(value, file, dotted + ".")
            warnings.extend(sub_warnings)
            if sub:
                clean[key] = sub
        else:
            clean[key] = value
    return clean, warnings


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _resolve(value: Any, model_key: str) -> float | None:
    if isinstance(value, dict):
        return _as_number(value.get(model_key, value.get("default")))
    return _as_number(value)


def enforce_raise_only(
    project: dict[str, Any], user_effective: dict[str, Any], file: str
) -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Drop project thresholds that would lower the user's (or default) value, per key of a per-model map."""
    clean = dict(project)
    warnings: list[ConfigWarning] = []
    for key in RAISE_ONLY:
        if key not in clean:
            continue
        value = clean[key]
        base = user_effective.get(key)
        keys = set(value) if isinstance(value, dict) else {"default"}
        if isinstance(base, dict):
            keys |= set(base)
        for model_key in sorted(keys):
            mine = _resolve(value, model_key)
            theirs = _resolve(base, model_key)
            if mine is not None and theirs is not None and mine < theirs:
                warnings.append(ConfigWarning(
                    file, key, f"a project config may only raise this threshold ({mine:g} < {theirs:g}); ignored"
                ))
                del clean[key]
                break
    return clean, warnings


__all__ = ["RAISE_ONLY", "UNTRUSTED_PATHS", "enforce_raise_only", "strip_untrusted"]
