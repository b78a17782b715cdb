"""Open `context.db` with plain sqlite3 and enforce the schema fence (stdlib only: hot path).

`PRAGMA user_version` equals the number of registered migrations. An older database is
migrated on open (sqlite-utils is imported only then); a newer one is refused with exit 3.
"""

from __future__ import annotations

import os
import sqlite3

from magic_context import paths
from magic_context.errors import SchemaTooNew, StorageBusy, StorageUnavailable, UnsafeLocation

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

    from magic_context.paths import StrPath

# Must equal the number of migrations in store/migrations.py (a test asserts it).
SCHEMA_VERSION: Final = 3
BUSY_TIMEOUT_MS: Final = 5000


def _refuse_real_data_under_pytest() -> None:
    if os.environ.get("PYTEST_CURRENT_TEST") and not paths.storage_overridden():
        raise UnsafeLocation(
            "refusing to open the real user database while running under pytest",
            fix=f"set {paths.STORAGE_ENV} to a temporary directory",
        )


def _create_private_file(path: StrPath) -> None:
    if os.path.exists(path):
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, paths.FILE_MODE)
    os.close(fd)
    paths.secure_file(path)


def connect(
    path: StrPath | None = None,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    cache_size_mb: int | None = None,
    mmap_size_mb: int | None = None,
    create: bool = True,
) -> sqlite3.Connection:
    """Open the database with mc's pragmas (WAL, busy_timeout, foreign keys); no schema check."""
    if path is None:
        _refuse_real_data_under_pytest()
        path = paths.db_file()
    if not create and not os.path.exists(path):
        raise StorageUnavailable(f"database {path} does not exist", fix="run `mc migrate` to create it")
    try:
        paths.ensure_private_dir(os.path.dirname(os.path.abspath(path)))
        _create_private_file(path)
        conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StorageUnavailable(f"cannot open database {path}: {exc}", fix="run `mc doctor` to diagnose") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys=ON")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if cache_size_mb:
            conn.execute(f"PRAGMA cache_size={-int(cache_size_mb) * 1024}")
        if mmap_size_mb is not None:
            conn.execute(f"PRAGMA mmap_size={int(mmap_size_mb) * 1024 * 1024}")
    except sqlite3.OperationalError as exc:
        conn.close()
        raise classify(exc, path) from exc
    conn.row_factory = sqlite3.Row
    return conn


def classify(exc: sqlite3.Error, path: StrPath | None = None) -> StorageUnavailable:
    """Turn a sqlite3 error into the matching typed error (busy is transient, the rest is not)."""
    text = str(exc)
    where = f" ({path})" if path else ""
    if "locked" in text or "busy" in text:
        return StorageBusy(f"database is busy{where}: {text}", fix="another mc process holds the write lock; retry")
    return StorageUnavailable(f"database error{where}: {text}", fix="run `mc doctor` to diagnose")


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_fence(conn: sqlite3.Connection, path: StrPath | None = None) -> int:
    """Return the database's schema version; raise SchemaTooNew if a newer mc wrote it."""
    version = user_version(conn)
    if version > SCHEMA_VERSION:
        where = path or paths.db_file()
        raise SchemaTooNew(
            f"database {where} has schema version {version} but this mc knows only {SCHEMA_VERSION}",
            fix="upgrade mc (pip install -U magic-context), or point MAGIC_CONTEXT_STORAGE_DIR elsewhere",
        )
    return version


def open_db(path: StrPath | None = None, **pragmas: int | None) -> sqlite3.Connection:
    """Open, fence-check, and migrate an older database; the connection every command uses."""
    conn = connect(path, **pragmas)
    try:
        version = check_fence(conn, path)
        if version < SCHEMA_VERSION:
            from magic_context.store import migrations

            migrations.apply(conn)
    except BaseException:
        conn.close()
        raise
    return conn


__all__ = ["BUSY_TIMEOUT_MS", "SCHEMA_VERSION", "check_fence", "classify", "connect", "open_db", "user_version"]
