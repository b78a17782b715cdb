"""A tiny append-only log under the data dir, rotated at 32 MiB to one predecessor, with redaction.

Stdlib only and cheap to import, because the transform hot path logs its warnings here.
Everything written passes through `redact()`.
"""

from __future__ import annotations

import os
import time

from magic_context import paths

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

    from magic_context.paths import StrPath

MAX_LOG_BYTES: Final = 32 * 1024 * 1024
_SECRET_ENV_MARKERS: Final = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_MIN_SECRET_LEN: Final = 6
_PATTERN_SOURCES: Final = (
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
    r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/=]{8,}",
    r"(?i)\b(x-api-key|api[_-]?key|authorization|access[_-]?token|password|secret)(\"?\s*[:=]\s*\"?)([^\s\"',;]{6,})",
    r"\b(?:ghp|gho|ghu|ghs|github_pat|xox[abpr])_[A-Za-z0-9_]{16,}",
    r"\bAKIA[0-9A-Z]{16}\b",
)
_compiled: list = []


def _patterns() -> list:
    """Compiled lazily: most hook processes never log, and `re` compilation is not free."""
    if not _compiled:
        import re

        _compiled.extend(re.compile(source) for source in _PATTERN_SOURCES)
    return _compiled
REDACTED: Final = "[REDACTED]"


class _Registered:
    """Secret values seen at run time (a client's API key passing through `mc proxy`), newest last.

    Replaced whole on each change (never mutated), so a reader in another thread sees a consistent tuple.
    """

    values: tuple[str, ...] = ()


MAX_REGISTERED: Final = 64


def register_secret(value: str) -> None:
    """Redact `value` wherever it appears from now on in this process (the newest 64 are kept)."""
    if len(value) < _MIN_SECRET_LEN or value in _Registered.values:
        return
    _Registered.values = (*_Registered.values[-(MAX_REGISTERED - 1):], value)


def register_env_secrets(names: list[str] | tuple[str, ...]) -> None:
    """Register the values of the named env vars (the `api_key_env` settings), whatever they are called."""
    for name in names:
        value = os.environ.get(name, "").strip() if name else ""
        if value:
            register_secret(value)


def redact_data(value: Any) -> Any:
    """`redact` applied to every string inside JSON-like data (dict keys kept), for what commands show."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


def _secret_values() -> list[str]:
    values = list(_Registered.values)
    for name, value in os.environ.items():
        upper = name.upper()
        if any(marker in upper for marker in _SECRET_ENV_MARKERS) and len(value) >= _MIN_SECRET_LEN:
            values.append(value)
    # Longest first, so a secret containing another is replaced whole.
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """Replace API keys, bearer tokens, values of secret-named env vars and registered secrets with `[REDACTED]`."""
    for value in _secret_values():
        text = text.replace(value, REDACTED)
    for pattern in _patterns():
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def _rotate_if_needed(path: str, incoming: int) -> None:
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return
    if size + incoming > MAX_LOG_BYTES:
        os.replace(path, path + ".1")


def write(level: str, message: str, *, path: StrPath | None = None) -> None:
    """Append one redacted line to the log; never raises (logging must not break a pass)."""
    target = os.fspath(path) if path is not None else paths.log_file()
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {level.upper()} pid={os.getpid()} {redact(message)}\n"
    data = line.encode("utf-8", "replace")
    try:
        paths.ensure_private_dir(os.path.dirname(target) or ".")
        _rotate_if_needed(target, len(data))
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, paths.FILE_MODE)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass


def warning(message: str) -> None:
    write("warning", message)


def error(message: str) -> None:
    write("error", message)


def info(message: str) -> None:
    write("info", message)


__all__ = ["MAX_LOG_BYTES", "REDACTED", "error", "info", "redact", "redact_data", "register_env_secrets",
           "register_secret", "warning", "write"]
