"""Where mc keeps its data, config and logs (stdlib only: this runs on the transform hot path).

`MAGIC_CONTEXT_STORAGE_DIR` and `MAGIC_CONTEXT_CONFIG_DIR` override the defaults, which match
platformdirs' `user_data_dir("magic-context")` / `user_config_dir("magic-context")` without
importing platformdirs (a test asserts both computations agree).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final


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


def default_data_dir() -> Path:
    """The platform's per-user data directory for mc (same answer as platformdirs)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(_home(), "AppData", "Local")
        return Path(base) / APP_NAME / APP_NAME
    if xdg := _xdg("XDG_DATA_HOME"):
        return Path(xdg) / APP_NAME
    if sys.platform == "darwin":
        return Path(_home()) / "Library" / "Application Support" / APP_NAME
    return Path(_home()) / ".local" / "share" / APP_NAME


def default_config_dir() -> Path:
    """The platform's per-user config directory for mc (same answer as platformdirs)."""
    if sys.platform == "win32":
        return default_data_dir()
    if xdg := _xdg("XDG_CONFIG_HOME"):
        return Path(xdg) / APP_NAME
    if sys.platform == "darwin":
        return Path(_home()) / "Library" / "Application Support" / APP_NAME
    return Path(_home()) / ".config" / APP_NAME


def data_dir() -> Path:
    """The data directory: `$MAGIC_CONTEXT_STORAGE_DIR` or the platform default."""
    override = os.environ.get(STORAGE_ENV, "").strip()
    return Path(override).expanduser() if override else default_data_dir()


def config_dir() -> Path:
    """The config directory: `$MAGIC_CONTEXT_CONFIG_DIR` or the platform default."""
    override = os.environ.get(CONFIG_ENV, "").strip()
    return Path(override).expanduser() if override else default_config_dir()


def db_path() -> Path:
    return data_dir() / DB_FILENAME


def log_dir() -> Path:
    return data_dir() / "logs"


def log_path() -> Path:
    return log_dir() / "mc.log"


def user_config_path() -> Path:
    return config_dir() / CONFIG_FILENAME


def storage_overridden() -> bool:
    """True when the data directory comes from the environment rather than the default."""
    return bool(os.environ.get(STORAGE_ENV, "").strip())


def config_overridden() -> bool:
    return bool(os.environ.get(CONFIG_ENV, "").strip())


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) with mode 0700 for the directories mc creates; return it."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        try:
            path.chmod(DIR_MODE)
        except OSError:
            pass
    return path


def secure_file(path: Path) -> None:
    """Restrict a file mc created to its owner (0600); silently skip where chmod is unsupported."""
    try:
        path.chmod(FILE_MODE)
    except OSError:
        pass


def project_root(start: Path) -> Path:
    """The git work tree root containing `start`, else `start` itself (no subprocess: walks for `.git`)."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


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
    "config_overridden",
    "data_dir",
    "db_path",
    "default_config_dir",
    "default_data_dir",
    "ensure_private_dir",
    "log_dir",
    "log_path",
    "project_root",
    "secure_file",
    "storage_overridden",
    "user_config_path",
]
