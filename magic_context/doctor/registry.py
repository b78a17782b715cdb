"""The check registry: `Check` definitions, results, and running / fixing them."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from magic_context import results
from magic_context.records import Factory, record
from magic_context.results import Problem, Result


class Status(StrEnum):
    """Outcome of one check (ends up in JSON)."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@record(frozen=True)
class CheckResult:
    status: Status
    detail: str
    items: tuple[str, ...] = ()


@record
class DoctorContext:
    """What checks may look at; tests substitute values to make a check fail on purpose."""

    project_dir: Path | None = None
    python_version: tuple[int, int] | None = None
    notes: dict[str, object] = Factory(factory=dict)


@record(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[DoctorContext], CheckResult]
    fix: Callable[[DoctorContext], str] | None = None
    fix_summary: str | None = None


@record
class Outcome:
    check: Check
    result: CheckResult
    fixed: str | None = None

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "name": self.check.name,
            "summary": self.check.summary,
            "status": self.result.status.value,
            "detail": self.result.detail,
        }
        if self.result.items:
            data["items"] = list(self.result.items)
        if self.fixed:
            data["fixed"] = self.fixed
        return data


def _safe_run(check: Check, ctx: DoctorContext) -> CheckResult:
    try:
        return check.run(ctx)
    except Exception as exc:  # a broken check is a failed check, never a crash
        return CheckResult(Status.FAIL, f"check crashed: {type(exc).__name__}: {exc}")


def run_checks(
    checks: list[Check], ctx: DoctorContext, *, fix: bool = False, confirm: Callable[[Check], bool] | None = None
) -> list[Outcome]:
    """Run every check; with `fix`, repair what can be repaired (in order) and re-check it."""
    outcomes = []
    for check in checks:
        result = _safe_run(check, ctx)
        fixed = None
        if fix and result.status is not Status.OK and check.fix and (confirm is None or confirm(check)):
            try:
                fixed = check.fix(ctx)
            except Exception as exc:
                fixed = f"fix failed: {type(exc).__name__}: {exc}"
            result = _safe_run(check, ctx)
        outcomes.append(Outcome(check, result, fixed))
    return outcomes


def summarize(outcomes: list[Outcome]) -> dict[str, int]:
    counts = {status.value: 0 for status in Status}
    for outcome in outcomes:
        counts[outcome.result.status.value] += 1
    return counts


def report(outcomes: list[Outcome], paths: dict[str, str]) -> Result:
    """`mc doctor`'s result: failed when a check failed (one problem per failed check, coded by its name),
    a warning when one only warned (the checks in `data` say which)."""
    counts = summarize(outcomes)
    problems = tuple(Problem(o.check.name, f"{o.check.name}: {o.result.detail}", o.check.fix_summary)
                     for o in outcomes if o.result.status is Status.FAIL)
    status = (results.Status.FAILED if counts[Status.FAIL.value] else
              results.Status.WARN if counts[Status.WARN.value] else results.Status.OK)
    return Result("doctor", {"checks": [o.as_dict() for o in outcomes], "summary": counts, "paths": paths},
                  status, problems)


__all__ = ["Check", "CheckResult", "DoctorContext", "Outcome", "Status", "report", "run_checks", "summarize"]
