"""Load the effective config: defaults ← user `config.toml` ← project `.magic-context.toml`.

Config problems never disable mc: an invalid leaf falls back to its default and an unparseable
file to the defaults, each with a warning naming the file, the key and the reason. The project
tier passes the trust boundary (`config.trust`) first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from magic_context import paths
from magic_context.config.files import (
    ConfigWarning,
    deep_merge,
    note_loaded,
    project_config_path,
    read_toml,
)
from magic_context.config.model import MCConfig
from magic_context.config.trust import enforce_direction, strip_untrusted
from magic_context.records import Factory, record

_MAX_FIX_ROUNDS = 50


@record
class LoadedConfig:
    """The effective config, the warnings met on the way, and the files that were read."""

    config: MCConfig
    warnings: list[ConfigWarning] = Factory(factory=list)
    user_file: Path | None = None
    project_file: Path | None = None
    user_data: dict[str, Any] = Factory(factory=dict)
    project_data: dict[str, Any] = Factory(factory=dict)


def _leaf_path(data: dict[str, Any], loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The longest prefix of a pydantic error location that names real keys of `data`."""
    node: Any = data
    path: list[str] = []
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            path.append(part)
            node = node[part]
        else:
            break
    return tuple(path)


def _pop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node.pop(path[-1], None)


def validate_tier(data: dict[str, Any], file: str) -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Remove every invalid leaf of one tier (so it falls back to its default), warning for each."""
    clean = deep_merge({}, data)
    warnings: list[ConfigWarning] = []
    for _ in range(_MAX_FIX_ROUNDS):
        try:
            MCConfig.model_validate(clean)
            return clean, warnings
        except ValidationError as exc:
            reasons: dict[tuple[str, ...], str] = {}
            for error in exc.errors():
                path = _leaf_path(clean, tuple(error["loc"]))
                if not path:
                    continue
                unknown = error["type"] == "extra_forbidden"
                reason = "unknown key; ignored" if unknown else f"{error['msg']}; using the default"
                reasons.setdefault(path, reason)
            if not reasons:
                break
            for path, reason in reasons.items():
                warnings.append(ConfigWarning(file, ".".join(path), reason))
                _pop(clean, path)
    return {}, [*warnings, ConfigWarning(file, "", "could not be validated; using defaults")]


def load_config(project_dir: Path | None = None, *, user_file: Path | None = None) -> LoadedConfig:
    """Read, validate and merge both tiers. Never raises for config problems."""
    user_path = user_file or paths.user_config_path()
    user_raw, warnings = read_toml(user_path)
    user_clean, user_warnings = validate_tier(user_raw, str(user_path))
    warnings += user_warnings

    project_file = project_config_path(project_dir)
    project_path = Path(project_file) if project_file is not None else None
    project_clean: dict[str, Any] = {}
    if project_path is not None:
        project_raw, project_warnings = read_toml(project_path)
        warnings += project_warnings
        trusted, strip_warnings = strip_untrusted(project_raw, str(project_path))
        warnings += strip_warnings
        project_clean, tier_warnings = validate_tier(trusted, str(project_path))
        warnings += tier_warnings
        user_effective = MCConfig.model_validate(user_clean).model_dump()
        project_clean, raise_warnings = enforce_direction(project_clean, user_effective, str(project_path))
        warnings += raise_warnings

    try:
        config = MCConfig.model_validate(deep_merge(user_clean, project_clean))
    except ValidationError:
        warnings.append(ConfigWarning(str(project_path), "", "conflicts with the user config; project tier ignored"))
        config = MCConfig.model_validate(user_clean)
    note_loaded(warnings)
    return LoadedConfig(config, warnings, user_path, project_path, user_clean, project_clean)


__all__ = ["LoadedConfig", "load_config", "validate_tier"]
