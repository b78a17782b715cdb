"""Reading TOML config files and merging tiers (stdlib only: shared by the hot-path reader)."""

from __future__ import annotations

import os

from magic_context import paths
from magic_context.records import record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

    from magic_context.paths import StrPath


@record(frozen=True)
class ConfigWarning:
    """One config problem: the file, the dotted key (or "" for the whole file) and why it was ignored."""

    file: str
    key: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return f"{where}: {self.reason}"


class _Collector:
    """The config problems every load met while a CLI invocation runs (`collect`); None when nobody asked."""

    seen: dict[tuple[str, str], ConfigWarning] | None = None
    full_loads = 0  # loads that validated every key (the hot reader checks only the transform's keys)


_collector = _Collector()


def collect(on: bool = True) -> None:
    """Start (or, with `on=False`, stop) recording what the loaders meet: the CLI's boundary does this once per
    invocation so it can tell the user about each problem once, whichever engine part loaded the config."""
    _collector.seen = {} if on else None
    _collector.full_loads = 0


def note_loaded(warnings: list[ConfigWarning], *, full: bool = True) -> None:
    """Called by each loader on return: record its problems (one per file and key) when collecting. A full
    load's reason (the model's own message) replaces the hot reader's generic one for the same key."""
    seen = _collector.seen
    if seen is None:  # the transform hot path and library use: nothing is kept
        return
    _collector.full_loads += full
    for warning in warnings:
        if full:
            seen[(warning.file, warning.key)] = warning
        else:
            seen.setdefault((warning.file, warning.key), warning)


class _Paused:
    def __enter__(self) -> None:
        self._saved = (_collector.seen, _collector.full_loads)
        _collector.seen = None

    def __exit__(self, *exc: object) -> None:
        _collector.seen, _collector.full_loads = self._saved


def paused() -> _Paused:
    """`with paused():` loads record nothing, and what was recorded before is kept. `mc replay` runs mc on a
    temporary copy of the user's config.toml: its problems are told once under the user's own file name."""
    return _Paused()


def collected() -> tuple[list[ConfigWarning], int]:
    """The problems recorded since `collect()`, in the order met, and how many full loads ran."""
    return list((_collector.seen or {}).values()), _collector.full_loads


def read_toml(path: StrPath) -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Parse one TOML file; a missing file is empty, an unreadable or unparseable one warns and is empty."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}, []
    except OSError as exc:
        return {}, [ConfigWarning(str(path), "", f"cannot read ({exc.strerror}); using defaults")]
    import tomllib  # only when a config file exists: most passes have none to parse

    try:
        return tomllib.loads(data.decode("utf-8")), []
    except UnicodeDecodeError:
        return {}, [ConfigWarning(str(path), "", "not valid UTF-8; using defaults")]
    except tomllib.TOMLDecodeError as exc:
        return {}, [ConfigWarning(str(path), "", f"not valid TOML ({exc}); using defaults")]


def project_config_path(project_dir: StrPath | None) -> str | None:
    """`.magic-context.toml` at the project root (git work tree root, else the directory itself)."""
    if project_dir is None:
        return None
    return os.path.join(paths.project_root_dir(project_dir), paths.PROJECT_CONFIG_FILENAME)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge recursively; any other value in `over` replaces the one in `base`."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def get_path(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def delete_path(data: dict[str, Any], parts: tuple[str | int, ...]) -> None:
    """Remove the leaf at `parts` (a pydantic error location) if present; prune emptied tables."""
    node: Any = data
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(parts[-1], None)


__all__ = ["ConfigWarning", "collect", "collected", "deep_merge", "delete_path", "get_path", "note_loaded",
           "paused", "project_config_path", "read_toml"]
