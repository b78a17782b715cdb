"""Exit codes and the typed error hierarchy (DESIGN §3.3).

Every error the engine raises knows its exit code and carries a one-line message
that says what went wrong and how to fix it. The CLI's single error boundary
prints that line to stderr and exits with the code.
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import ClassVar



class ExitCode(IntEnum):
    """Process exit codes shared by every command."""

    OK = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    STORAGE_UNAVAILABLE = 3
    CONTEXT_EMERGENCY = 4
    INTERRUPTED = 130


class MCError(Exception):
    """Base of every error mc reports to a user."""

    exit_code: ClassVar[ExitCode] = ExitCode.CHECK_FAILED

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        """The message and its fix on a single line, as printed by the error boundary."""
        text = " ".join(self.message.split())
        if self.fix:
            text = f"{text} — {' '.join(self.fix.split())}"
        return text


class CheckFailed(MCError):
    """Raised when a command's own answer is negative (e.g. a doctor check failed)."""

    exit_code = ExitCode.CHECK_FAILED


class BadInput(MCError):
    """Raised for invalid input or usage: bad JSON, unknown shape, bad flag or argument."""

    exit_code = ExitCode.BAD_INPUT


class StorageUnavailable(MCError):
    """Raised when the database cannot be opened, is locked for good, or a migration failed."""

    exit_code = ExitCode.STORAGE_UNAVAILABLE


class SchemaTooNew(StorageUnavailable):
    """Raised when the database was written by a newer mc (the schema fence)."""


class SchemaOutdated(StorageUnavailable):
    """Raised on the hot path when the database needs `mc migrate` first."""


class StorageBusy(StorageUnavailable):
    """Raised when SQLite stayed busy past the busy timeout (transient: the transform serves last-known-good)."""


class UnsafeLocation(StorageUnavailable):
    """Raised when tests would touch the user's real data directory."""


class ContextEmergency(MCError):
    """Raised when usage is ≥95% of a provider-proven limit and nothing could be folded."""

    exit_code = ExitCode.CONTEXT_EMERGENCY


class NotFound(MCError):
    """Raised when a named session, tag or record does not exist."""

    exit_code = ExitCode.BAD_INPUT


__all__ = [
    "BadInput",
    "CheckFailed",
    "ContextEmergency",
    "ExitCode",
    "MCError",
    "NotFound",
    "SchemaOutdated",
    "SchemaTooNew",
    "StorageBusy",
    "StorageUnavailable",
    "UnsafeLocation",
]
