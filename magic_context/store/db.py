"""Open `context.db` with plain sqlite3, enforce the schema fence, and run transactions (stdlib only: hot path).

`PRAGMA user_version` equals the number of registered migrations. An older database is
migrated on open (sqlite-utils is imported only then); a newer one is refused with exit 3.
`atomic(conn)` is the one way mc opens a transaction (connections run in autocommit mode).
"""

from __future__ import annotations

import os
import sqlite3

from magic_context import paths
from magic_context.errors import SchemaOutdated, SchemaTooNew, StorageBusy, StorageUnavailable, UnsafeLocation

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

    from magic_context.paths import StrPath

# Must equal the number of migrations in store/migrations.py (a test asserts it).
SCHEMA_VERSION: Final = 5
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


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for a lock (SQLITE_BUSY / SQLITE_LOCKED): transient, worth a retry."""
    text = str(exc)
    return "locked" in text or "busy" in text


def connect_read_only(path: StrPath, *, timeout_s: float = 5.0) -> sqlite3.Connection:
    """A read-only connection with no pragmas, migration or fence (diagnostics that must not write)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s)


def integrity_check(conn: sqlite3.Connection) -> list[str]:
    """`PRAGMA integrity_check`'s lines (["ok"] when the file is sound)."""
    return [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]


def journal_mode(conn: sqlite3.Connection) -> str:
    return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def table_count(conn: sqlite3.Connection) -> int:
    """How many schema objects exist (reading `sqlite_master` proves the file opens as a database)."""
    return int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])


def classify(exc: sqlite3.Error, path: StrPath | None = None) -> StorageUnavailable:
    """Turn a sqlite3 error into the matching typed error (busy is transient, the rest is not)."""
    text = str(exc)
    where = f" ({path})" if path else ""
    if is_busy(exc):
        return StorageBusy(f"database is busy{where}: {text}", fix="another mc process holds the write lock; retry")
    if "disk is full" in text:
        return StorageUnavailable(f"cannot write the database{where}: {text}", fix="free disk space, then retry")
    if "disk I/O error" in text:  # what a write past a file-size limit (or a failing disk) shows as
        return StorageUnavailable(f"cannot write the database{where}: {text}",
                                  fix="free disk space (or lift the file-size limit), then run `mc doctor`")
    if "readonly" in text or "read-only" in text:
        return StorageUnavailable(f"the database is read-only{where}: {text}",
                                  fix=f"make context.db and its directory writable, or set {paths.STORAGE_ENV} "
                                      "to a writable directory")
    return StorageUnavailable(f"database error{where}: {text}", fix="run `mc doctor` to diagnose")


class atomic:  # lower case: used like a function, `with atomic(conn):`
    """One transaction: `BEGIN IMMEDIATE … COMMIT`, or a savepoint inside the caller's open transaction.

    In the spirit of sqlite-utils' `Database.atomic()`. `immediate=False` starts a deferred `BEGIN`
    (readers that may later write take the lock only then). `commit=False` rolls the work back at the
    end instead (dry runs). On an error it rolls back only while a transaction is still open: SQLite
    itself rolls the whole transaction back on disk-full, I/O errors or a trigger's `RAISE(ROLLBACK)`,
    and a `ROLLBACK TO` then would raise "no such savepoint" and hide the real cause. A failed COMMIT
    is rolled back and raised. sqlite3 errors propagate as they are; callers `classify()` them.
    """

    __slots__ = ("_begin", "_commit", "_conn", "_nested")

    _SAVEPOINT = "mc_atomic"

    def __init__(self, conn: sqlite3.Connection, immediate: bool = True, *, commit: bool = True) -> None:
        self._conn = conn
        self._begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"
        self._commit = commit
        self._nested = False

    def __enter__(self) -> sqlite3.Connection:
        conn = self._conn
        self._nested = conn.in_transaction
        conn.execute(f"SAVEPOINT {self._SAVEPOINT}" if self._nested else self._begin)
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        conn = self._conn
        if exc is None and self._commit:
            try:
                conn.execute(f"RELEASE {self._SAVEPOINT}" if self._nested else "COMMIT")
            except BaseException as failed:
                self._undo(failed)
                raise
        elif exc is None:
            self._rollback()
        else:
            self._undo(exc)

    def _undo(self, cause: BaseException) -> None:
        """Roll back after `cause`, which stays the error raised: it is what the user must see."""
        try:
            self._rollback()
        except sqlite3.Error as undo:
            cause.add_note(f"(rolling back also failed: {undo})")

    def _rollback(self) -> None:
        conn = self._conn
        if not conn.in_transaction:
            return  # SQLite already rolled the whole transaction back
        if self._nested:
            conn.execute(f"ROLLBACK TO {self._SAVEPOINT}")
            conn.execute(f"RELEASE {self._SAVEPOINT}")
        else:
            conn.execute("ROLLBACK")


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


def open_db(path: StrPath | None = None, *, cache_size_mb: int | None = None,
            mmap_size_mb: int | None = None, migrate: bool = True) -> sqlite3.Connection:
    """Open, fence-check, and migrate an older database; the connection every command uses.

    `migrate=False` (a read-only last-known-good pass) raises SchemaOutdated instead of waiting to migrate.
    """
    conn = connect(path, cache_size_mb=cache_size_mb, mmap_size_mb=mmap_size_mb)
    try:
        version = check_fence(conn, path)
        if version < SCHEMA_VERSION and not migrate:
            raise SchemaOutdated(f"database schema version {version} is older than {SCHEMA_VERSION}",
                                 fix="run `mc migrate`")
        if version < SCHEMA_VERSION:
            from magic_context.store import migrations

            migrations.apply(conn)
    except BaseException:
        conn.close()
        raise
    return conn


INTEGER_MIN: Final = -(2**63)
INTEGER_MAX: Final = 2**63 - 1


def fits_integer(number: int) -> bool:
    """Whether SQLite can bind `number` (its INTEGER range): one outside names no row, and binding it would raise
    OverflowError, so a lookup answers "not found" instead."""
    return INTEGER_MIN <= number <= INTEGER_MAX


def open_for_reading(path: StrPath | None = None) -> sqlite3.Connection:
    """The database for a command that only reads (a listing, `mc status`). Before mc has stored anything it is
    an empty in-memory one with the current schema, so the command answers "none yet" without creating the
    file: reading writes nothing."""
    target = path if path is not None else paths.db_file()
    if os.path.exists(target):
        return open_db(path)
    from magic_context.store import migrations

    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    migrations.apply(conn)
    return conn


__all__ = [
    "BUSY_TIMEOUT_MS", "INTEGER_MAX", "INTEGER_MIN", "SCHEMA_VERSION", "atomic", "check_fence", "classify", "connect",
    "connect_read_only", "fits_integer", "integrity_check", "is_busy", "journal_mode", "open_db", "open_for_reading",
    "table_count", "user_version",
]
