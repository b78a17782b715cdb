"""The historian's status words, stored in `session_state.historian` and shown by `mc status` / `mc wrapup`.

Stdlib only and apart from `runner`, so `mc status` reads them without loading the historian.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """How one historian run ended (stored as the historian state's `last_status`)."""

    PUBLISHED = "published"
    NOTHING = "nothing"
    BUSY = "busy"
    FAILED = "failed"
    STALE = "stale"
    ERROR = "error"  # the run raised (recorded as `last_status` only; the caller gets the exception)


class HistorianState(StrEnum):
    """`session_state.historian`'s `state`: running while a run works, idle after; `mc status` shows a running
    state whose process is gone as stopped."""

    IDLE = "idle"
    RUNNING = "running"
    STOPPED = "stopped"


__all__ = ["HistorianState", "RunStatus"]
