"""One result shape for engine operations: what they did (`data`), how it went (`status`), what went wrong
(`problems`, each with a stable `code`). `commands/_output.emit` turns a `Result` into Rich text or the
`--json` envelope, so every command reports the same way.

`data` is the command's JSON payload (its keys are pinned by tests/test_result_contract.py); a problem's
`code` is for scripts (stable), its `message` and `fix` are for people.
"""

from __future__ import annotations

from enum import StrEnum

from magic_context.records import record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


class Status(StrEnum):
    """How an operation went: `ok`, `warn` (done, with something to look at) or `failed`."""

    OK = "ok"
    WARN = "warn"
    FAILED = "failed"


@record(frozen=True)
class Problem:
    """One thing that went wrong: a stable `code` for scripts, a `message` and a `fix` for people."""

    code: str
    message: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "fix": self.fix}


@record(frozen=True)
class Result:
    """What an engine operation returns to its command."""

    command: str  # the command that reports it (the envelope's `command`)
    data: dict[str, Any]
    status: Status = Status.OK
    problems: tuple[Problem, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status is Status.FAILED

    def errors(self) -> list[str]:
        """The problems' messages: the envelope's `errors` list."""
        return [p.message for p in self.problems]


__all__ = ["Problem", "Result", "Status"]
