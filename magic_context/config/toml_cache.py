"""Parsed config files, cached by their bytes, so a `mc transform` process need not import `tomllib`.

Importing `tomllib` pulls in `typing`, `string`, `contextlib` and `warnings` and compiles its regexes,
paid by every pass of every user who has a `config.toml` or a project `.magic-context.toml`; parsing
the file itself takes 0.1 ms. Measured (2026-12-02, 2 cores shared with other work, load average 2.5–3.9,
no quiet machine available): the import after the hot path's own, in process, 9.6–25 ms (median 12.7 of
15); a `mc transform` defer pass on the django session (0.32 MB) with a one-line config.toml, CPU time
median of 31 processes, 150 ms before → 127 ms with the cache (no config file: 129 ms; the JSON floor:
62 ms), i.e. 2.42× → 2.05× the floor. So the parsed document is kept as JSON in
`<data dir>/cache/config.<python tag>.json`,
keyed by a digest of the file's bytes: an edited file has other bytes, so a cached value can never be
stale. Only documents that survive a JSON round trip are cached (TOML dates and times, non-finite floats
and integers beyond 64 bits are parsed every time). Entries parsed in a process are written by `save()`
after a served pass, like the record initializer cache, so a refused input writes nothing. A missing
or corrupt cache only costs the parse.
"""

from __future__ import annotations

import os
import sys
from _blake2 import blake2b

from magic_context import paths
from magic_context.wire import jsonio

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

MAX_ENTRIES = 8  # the newest parsed files kept (a user file and a few projects' files)


class _Cache:
    """digest -> the parsed document as JSON text, read from disk on first use; `unsaved` after a parse."""

    entries: dict[str, str] | None = None
    unsaved = False


_cache = _Cache()


def cache_file() -> str | None:
    if "pytest" in sys.modules and not paths.storage_overridden():
        return None  # a test run never touches the user's data dir
    tag = sys.implementation.cache_tag or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(paths.data_dir_str(), "cache", f"config.{tag}.json")


def _key(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def _entries() -> dict[str, str]:
    if _cache.entries is None:
        _cache.entries = {}
        try:
            with open(cache_file() or "", "rb") as fh:
                stored = jsonio.loads(fh.read())
        except (OSError, ValueError):
            return _cache.entries
        if isinstance(stored, dict):
            _cache.entries = {k: v for k, v in stored.items() if isinstance(v, str)}
    return _cache.entries


def lookup(data: bytes) -> dict[str, Any] | None:
    """The parsed document of a file with these bytes (a fresh object), or None when it is not cached."""
    text = _entries().get(_key(data))
    if text is None:
        return None
    try:
        parsed = jsonio.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def remember(data: bytes, parsed: dict[str, Any]) -> None:
    """Keep what `tomllib` parsed from `data`, if JSON holds it exactly; written by the next `save()`."""
    try:
        text = jsonio.dumps(parsed).decode("utf-8")
    except (TypeError, ValueError):  # dates and times, integers beyond 64 bits (orjson's error is a TypeError)
        return
    if jsonio.loads(text) != parsed:  # a non-finite float (written as null) or a date written as text
        return
    entries = _entries()
    key = _key(data)
    entries.pop(key, None)
    entries[key] = text
    _cache.unsaved = True


def save() -> None:
    """Write the entries parsed since the cache was read, the newest MAX_ENTRIES (atomic, never raises)."""
    path = cache_file() if _cache.unsaved else None
    if path is None:
        return
    _cache.unsaved = False
    newest = dict(list(_entries().items())[-MAX_ENTRIES:])
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        paths.ensure_private_dir(os.path.dirname(path))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, paths.FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(jsonio.dumps(newest))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


__all__ = ["MAX_ENTRIES", "cache_file", "lookup", "remember", "save"]
