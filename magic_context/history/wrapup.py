"""`mc wrapup`: compact older raw history now, in token-capped chunks, keeping the newest N raw.

`wrapup` holds the session's historian lease for the whole loop and calls `runner.run_once` in keep
mode until nothing eligible is left; each round folds one chunk (`chunk.chunk_budget()` rendered
tokens). Dispositions: completed, nothing_to_compact (a normal outcome), already_in_progress (another
run holds the lease), failed (every provider failed; the failure is recorded for `mc status`).

`run_background` is what `mc wrapup --background` (started by the transform) runs: one token-mode
run that adopts the lease the transform wrote, and never raises.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from magic_context.history import boundary, publish, runner
from magic_context.records import Factory, record
from magic_context.results import Problem, Result, Status
from magic_context.store.db import atomic
from magic_context.store.sessions import session_info

if TYPE_CHECKING:
    from magic_context.config.model import MCConfig



class Disposition(StrEnum):
    """How a wrapup ended (`disposition` in `mc wrapup --json`)."""

    COMPLETED = "completed"
    NOTHING_TO_COMPACT = "nothing_to_compact"
    ALREADY_IN_PROGRESS = "already_in_progress"
    FAILED = "failed"


COMPLETED, NOTHING_TO_COMPACT = Disposition.COMPLETED, Disposition.NOTHING_TO_COMPACT
ALREADY_IN_PROGRESS, FAILED = Disposition.ALREADY_IN_PROGRESS, Disposition.FAILED
MAX_ROUNDS = 500

Progress = Callable[[int, int], None]
"""Called after each round with (messages folded so far, messages eligible when the wrapup started)."""


@record
class WrapupResult:
    """What a wrapup did; `start..end` is the range folded by this wrapup (None when nothing was)."""

    disposition: Disposition
    reason: str = ""
    rounds: int = 0
    compartments: int = 0
    facts: int = 0
    start: int | None = None
    end: int | None = None
    keep: int = boundary.DEFAULT_KEEP
    providers: list[str] = Factory(factory=list)
    failure: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"disposition": self.disposition, "reason": self.reason, "rounds": self.rounds,
                "compartments": self.compartments, "facts": self.facts, "start": self.start, "end": self.end,
                "keep": self.keep, "providers": self.providers, "failure": self.failure}

    def to_result(self) -> Result:
        """`mc wrapup`'s result: failed, coded by the disposition, when the run failed or another holds the lease."""
        if self.disposition in (FAILED, ALREADY_IN_PROGRESS):
            problem = Problem(str(self.disposition), self.reason, "`mc status` shows the historian's last failure")
            return Result("wrapup", self.as_dict(), Status.FAILED, (problem,))
        return Result("wrapup", self.as_dict())


def wrapup(conn: sqlite3.Connection, session_pk: int, *, keep: int = boundary.DEFAULT_KEEP, provider: Any = None,
           progress: Progress | None = None, config: MCConfig | None = None, now_ms: int | None = None,
           max_rounds: int = MAX_ROUNDS) -> WrapupResult:
    """Fold everything but the newest `keep` messages (tool arcs intact) into compartments."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    if config is None:
        from pathlib import Path

        from magic_context.config.load import load_config

        info = session_info(conn, session_pk)
        config = load_config(Path(info["project_dir"]) if info and info["project_dir"] else None).config
    holder = f"wrapup:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not runner.acquire_lease(conn, session_pk, holder, now, config.historian.timeout_ms):
        return WrapupResult(ALREADY_IN_PROGRESS, "another historian run holds this session's lease", keep=keep)
    result = WrapupResult(NOTHING_TO_COMPACT, keep=keep)
    first: int | None = None
    total = 0
    try:
        for _ in range(max_rounds):
            run = runner.run_once(conn, session_pk, provider=provider, keep=keep, config=config, now_ms=now_ms,
                                  lease_holder=holder, mode="wrapup")
            if run.status == runner.NOTHING:
                if result.rounds == 0:
                    result.reason = run.reason
                break
            if run.status != runner.PUBLISHED:
                result.disposition, result.reason, result.failure = FAILED, run.reason, run.failure
                break
            result.rounds += 1
            result.disposition = COMPLETED
            result.compartments += run.compartments
            result.facts += run.facts
            if run.provider and run.provider not in result.providers:
                result.providers.append(run.provider)
            if first is None:
                first = run.start
                total = (run.eligible_end or 0) - (run.start or 0) + 1
            result.start = first
            result.end = (run.next_start or 1) - 1
            if progress is not None and first is not None:
                progress(min(total, result.end - first + 1), total)
            if not run.has_more:
                break
    finally:
        runner.release_lease(conn, session_pk, holder)
    if result.disposition == COMPLETED:
        plural = "s" if result.compartments != 1 else ""
        result.reason = (f"folded messages {result.start}-{result.end} into {result.compartments} compartment{plural}; "
                         f"the newest {keep} messages stay raw")
    return result


PASS_COMMIT_WAIT_S = 300  # a pass over a long new session commits seconds after it started its historian


def _launched(conn: sqlite3.Connection, session_id: str, harness: str | None, token: str) -> int | None:
    """The session's row id once the pass that started this process has committed (it starts the historian
    mid-pass, and on a session's first pass the session itself is new): its lease then names `token`.
    None when that never happens (the pass failed and rolled back). Before this wait, the first pass of a
    long session left a historian that found no session, died, and stayed "running" in the lease."""
    from magic_context.errors import NotFound
    from magic_context.store import leases
    from magic_context.store.sessions import find_session

    deadline = time.monotonic() + PASS_COMMIT_WAIT_S
    while time.monotonic() < deadline:
        try:
            pk = find_session(conn, session_id, harness)
        except NotFound:
            pk = None
        held = leases.holder(conn, runner.lease_name(pk)) if pk is not None else None
        if held is not None and held[0].split(" ", 1)[0] == token:
            return pk
        time.sleep(0.05)
    return None


def run_background(session_id: str, harness: str | None = None) -> runner.RunResult | None:
    """The detached historian run (`mc wrapup --background`); records failures instead of raising."""
    from magic_context.store.db import open_db
    from magic_context.store.sessions import find_session

    conn = open_db()
    try:
        token = os.environ.get(runner.LEASE_ENV) or None
        pk = find_session(conn, session_id, harness) if token is None else _launched(conn, session_id, harness, token)
        if pk is None:
            return None
        try:
            return runner.run_once(conn, pk, lease_holder=os.environ.get(runner.LEASE_ENV) or None, mode="background")
        except Exception as exc:  # the detached process has no one to tell: record it for `mc status`
            now = int(time.time() * 1000)
            with atomic(conn):
                publish.set_state(conn, pk, runner.FAILURE_KEY, {"class": "internal", "provider": None, "at": now,
                                                                 "message": f"{type(exc).__name__}: {exc}"}, now)
                publish.set_state(conn, pk, runner.STATE_KEY, {"state": runner.HistorianState.IDLE, "last_run_at": now,
                                                               "last_status": runner.RunStatus.ERROR}, now)
            return None
    finally:
        conn.close()


__all__ = [
    "ALREADY_IN_PROGRESS",
    "COMPLETED",
    "FAILED",
    "NOTHING_TO_COMPACT",
    "Progress",
    "WrapupResult",
    "run_background",
    "wrapup",
]
