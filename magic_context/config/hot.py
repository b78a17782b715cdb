"""The transform hot path's config reader: tomllib + the same tiers, trust rules and defaults.

Reads only the keys a pass needs, without pydantic. Each key has a validator mirroring the
pydantic model (`config.model`); a test asserts both give the same effective values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from magic_context import paths
from magic_context.config.files import (
    ConfigWarning,
    deep_merge,
    get_path,
    note_loaded,
    project_config_path,
    read_toml,
)
from magic_context.config.trust import duration_ms, enforce_direction, strip_untrusted
from magic_context.records import Factory, record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

    from magic_context.paths import StrPath

_DURATION: Final = re.compile(r"^(?:never|\d+(?:\.\d+)?(?:ms|s|m|h|d))$")

Validator = Callable[[object], bool]


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _int_in(lo: float, hi: float = math.inf) -> Validator:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _num_in(lo: float, hi: float = math.inf) -> Validator:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi


def _duration(v: Any) -> bool:
    return isinstance(v, str) and bool(_DURATION.match(v.strip()))


def _scalar_or_map(check: Validator) -> Validator:
    return lambda v: check(v) or (isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items()))


def _map_of(check: Validator) -> Validator:
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items())


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _optional(check: Validator) -> Validator:
    return lambda v: v is None or check(v)


# dotted key -> (default, validator). Defaults and ranges mirror config.model.MCConfig.
HOT_KEYS: Final[dict[str, tuple[Any, Validator]]] = {
    "enabled": (True, _is_bool),
    "ctx_reduce_enabled": (True, _is_bool),
    "cache_ttl": ("5m", _scalar_or_map(_duration)),
    "execute_threshold_percentage": (40, _scalar_or_map(_num_in(20, 90))),
    "execute_threshold_tokens": (None, _optional(_map_of(_int_in(5000)))),
    "protected_tags": (20, _int_in(1, 100)),
    "nudge_interval_tokens": (10_000, _int_in(1000)),
    "auto_drop_tool_age": (100, _int_in(1)),
    "clear_reasoning_age": (50, _int_in(1)),
    "drop_tool_structure": (True, _is_bool),
    "history_budget_percentage": (0.10, _num_in(0.05, 0.5)),
    "temporal_awareness": (True, _is_bool),
    "smart_drops": (False, _is_bool),
    "compaction.enabled": (True, _is_bool),
    "caveman_text_compression.enabled": (False, _is_bool),
    "caveman_text_compression.min_chars": (500, _int_in(50)),
    "fail_closed_blocking": (True, _is_bool),
    "system_prompt_injection.enabled": (True, _is_bool),
    "system_prompt_injection.skip_signatures": (["<!-- magic-context: skip -->"], _str_list),
    "memory.enabled": (True, _is_bool),
    "dreamer.inject_docs": (True, _is_bool),
    "memory.injection_budget_tokens": (4000, _int_in(500, 20000)),
    "historian.timeout_ms": (300_000, _int_in(1000)),
    "output_reserve": (None, _optional(_int_in(0))),
    "sqlite.cache_size_mb": (64, _int_in(1, 4096)),
    "sqlite.mmap_size_mb": (0, _int_in(0, 65536)),
}


@record
class HotConfig:
    """Effective values of the hot keys plus the warnings met while reading them."""

    values: dict[str, Any]
    warnings: list[ConfigWarning] = Factory(factory=list)
    explicit: frozenset[str] = frozenset()  # the dotted keys a tier set (valid), for defaults that depend on the call
    user_set: frozenset[str] = frozenset()  # those the trusted user tier set (the rest only the project file set)
    user_values: dict[str, Any] = Factory(factory=dict)  # the user tier's own values of those keys

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def for_model(self, key: str, model_key: str | None) -> Any:
        """Resolve a per-model map (`{"default": …, "provider/id": …}`) for one model."""
        found = pick(self.values[key], model_key)
        return found if found is not None else HOT_KEYS[key][0] if not isinstance(HOT_KEYS[key][0], dict) else None

    def set_for_model(self, key: str, model_key: str | None, *, user_only: bool = False) -> Any:
        """The value a tier (the user's alone with `user_only`) sets for one model, or None when none does:
        for a default that depends on the call (the harness's execute threshold)."""
        if key not in (self.user_set if user_only else self.explicit):
            return None
        return pick(self.user_values[key] if user_only else self.values[key], model_key)


def pick(value: Any, model_key: str | None) -> Any:
    """A scalar, or a per-model map's entry for the model (by "provider/id", then "id"), else its
    "default", else None."""
    if not isinstance(value, dict):
        return value
    if model_key and model_key in value:
        return value[model_key]
    if model_key and "/" in model_key and model_key.split("/", 1)[1] in value:
        return value[model_key.split("/", 1)[1]]
    return value.get("default")


def _hot_subset(data: dict[str, Any], file: str) -> tuple[dict[str, Any], list[ConfigWarning]]:
    """The valid hot keys of one tier as a nested dict; invalid ones warn and fall back to defaults."""
    out: dict[str, Any] = {}
    warnings: list[ConfigWarning] = []
    for dotted, (_default, check) in HOT_KEYS.items():
        value = get_path(data, dotted)
        if value is None:
            continue
        if check(value):
            out = deep_merge(out, _nest(dotted, value))
        else:
            warnings.append(ConfigWarning(file, dotted, "invalid value; using the default"))
    return out, warnings


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    parts = dotted.split(".")
    node: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        node = {part: node}
    return node


def _flatten_defaults(tiers: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for dotted, (default, _check) in HOT_KEYS.items():
        value = get_path(tiers, dotted)
        values[dotted] = default if value is None else value
    return values


def load_hot(project_dir: StrPath | None = None, *, user_file: StrPath | None = None) -> HotConfig:
    """Read the hot keys from both tiers. Never raises for config problems."""
    user_path = user_file or paths.user_config_file()
    user_raw, warnings = read_toml(user_path)
    user, user_warnings = _hot_subset(user_raw, str(user_path))
    warnings += user_warnings
    merged = user
    project_path = project_config_path(project_dir)
    if project_path is not None:
        project_raw, project_warnings = read_toml(project_path)
        warnings += project_warnings
        trusted, stripped = strip_untrusted(project_raw, str(project_path))
        project, invalid = _hot_subset(trusted, str(project_path))
        user_effective: dict[str, Any] = {}
        for dotted, value in _flatten_defaults(user).items():
            user_effective = deep_merge(user_effective, _nest(dotted, value))
        project, wrong_way = enforce_direction(project, user_effective, str(project_path))
        warnings += stripped + invalid + wrong_way
        merged = deep_merge(user, project)
    explicit = frozenset(dotted for dotted in HOT_KEYS if get_path(merged, dotted) is not None)
    user_values = {dotted: get_path(user, dotted) for dotted in HOT_KEYS if get_path(user, dotted) is not None}
    note_loaded(warnings, full=False)
    return HotConfig(_flatten_defaults(merged), warnings, explicit, frozenset(user_values), user_values)


__all__ = ["HOT_KEYS", "HotConfig", "duration_ms", "load_hot", "pick"]
