"""Where mc keeps its data, config and logs (stdlib only: this runs on the transform hot path).

`MAGIC_CONTEXT_STORAGE_DIR` and `MAGIC_CONTEXT_CONFIG_DIR` override the defaults, which match
platformdirs' `user_data_dir("magic-context")` / `user_config_dir("magic-context")` without
importing platformdirs (a test asserts both computations agree).

The computations are plain strings (`*_file` / `*_dir_str` / `project_root_dir`) for the transform
hot path, where `pathlib` would cost ~4 ms of imports per LLM call; the `Path`-returning functions
the cold commands use wrap them and import pathlib on first use.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Final

    StrPath = str | os.PathLike[str]


APP_NAME: Final = "magic-context"
STORAGE_ENV: Final = "MAGIC_CONTEXT_STORAGE_DIR"
CONFIG_ENV: Final = "MAGIC_CONTEXT_CONFIG_DIR"
DB_FILENAME: Final = "context.db"
CONFIG_FILENAME: Final = "config.toml"
PROJECT_CONFIG_FILENAME: Final = ".magic-context.toml"
DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600


def _xdg(env_var: str) -> str | None:
    value = os.environ.get(env_var, "")
    return value if os.path.isabs(value) else None


def _home() -> str:
    return os.path.expanduser("~")


def _path(value: str) -> Path:
    from pathlib import Path

    return Path(value)


def _default_data_dir() -> str:
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(_home(), "AppData", "Local")
        return os.path.join(base, APP_NAME, APP_NAME)
    if xdg := _xdg("XDG_DATA_HOME"):
        return os.path.join(xdg, APP_NAME)
    if sys.platform == "darwin":
        return os.path.join(_home(), "Library", "Application Support", APP_NAME)
    return os.path.join(_home(), ".local", "share", APP_NAME)


def _default_config_dir() -> str:
    if sys.platform == "win32":
        return _default_data_dir()
    if xdg := _xdg("XDG_CONFIG_HOME"):
        return os.path.join(xdg, APP_NAME)
    if sys.platform == "darwin":
        return os.path.join(_home(), "Library", "Application Support", APP_NAME)
    return os.path.join(_home(), ".config", APP_NAME)


def data_dir_str() -> str:
    """The data directory: `$MAGIC_CONTEXT_STORAGE_DIR` or the platform default."""
    override = os.environ.get(STORAGE_ENV, "").strip()
    return os.path.expanduser(override) if override else _default_data_dir()


def config_dir_str() -> str:
    """The config directory: `$MAGIC_CONTEXT_CONFIG_DIR` or the platform default."""
    override = os.environ.get(CONFIG_ENV, "").strip()
    return os.path.expanduser(override) if override else _default_config_dir()


def db_file() -> str:
    return os.path.join(data_dir_str(), DB_FILENAME)


def log_file() -> str:
    return os.path.join(data_dir_str(), "logs", "mc.log")


def user_config_file() -> str:
    return os.path.join(config_dir_str(), CONFIG_FILENAME)


def default_data_dir() -> Path:
    """The platform's per-user data directory for mc (same answer as platformdirs)."""
    return _path(_default_data_dir())


def default_config_dir() -> Path:
    """The platform's per-user config directory for mc (same answer as platformdirs)."""
    return _path(_default_config_dir())


def data_dir() -> Path:
    return _path(data_dir_str())


def config_dir() -> Path:
    return _path(config_dir_str())


def db_path() -> Path:
    return _path(db_file())


def log_dir() -> Path:
    return _path(os.path.dirname(log_file()))


def log_path() -> Path:
    return _path(log_file())


def user_config_path() -> Path:
    return _path(user_config_file())


def storage_overridden() -> bool:
    """True when the data directory comes from the environment rather than the default."""
    return bool(os.environ.get(STORAGE_ENV, "").strip())


def config_overridden() -> bool:
    return bool(os.environ.get(CONFIG_ENV, "").strip())


def ensure_private_dir(path: StrPath) -> StrPath:
    """Create `path` (and parents) with mode 0700 for the directories mc creates; return it."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
        try:
            os.chmod(path, DIR_MODE)
        except OSError:
            pass
    return path


def secure_file(path: StrPath) -> None:
    """Restrict a file mc created to its owner (0600); silently skip where chmod is unsupported."""
    try:
        os.chmod(path, FILE_MODE)
    except OSError:
        pass


def project_root_dir(start: StrPath) -> str:
    """The git work tree root containing `start`, else `start` itself (no subprocess: walks for `.git`)."""
    current = start = os.path.realpath(start)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent


def project_root(start: StrPath) -> Path:
    return _path(project_root_dir(start))


def all_paths() -> dict[str, str]:
    """Every path mc uses, for `mc status` and `mc doctor`."""
    return {
        "data_dir": str(data_dir()),
        "config_dir": str(config_dir()),
        "database": str(db_path()),
        "user_config": str(user_config_path()),
        "log_file": str(log_path()),
    }


__all__ = [
    "APP_NAME",
    "CONFIG_ENV",
    "PROJECT_CONFIG_FILENAME",
    "STORAGE_ENV",
    "all_paths",
    "config_dir",
    "config_dir_str",
    "config_overridden",
    "data_dir",
    "data_dir_str",
    "db_file",
    "db_path",
    "default_config_dir",
    "default_data_dir",
    "ensure_private_dir",
    "log_dir",
    "log_file",
    "log_path",
    "project_root",
    "project_root_dir",
    "secure_file",
    "storage_overridden",
    "user_config_file",
    "user_config_path",
]
