"""The transform pass in process, for one model request (called from a worker thread).

It is `mc transform`'s own pass (`transform.hook.serve_pass`: last known good included); every
call opens its own SQLite connection, so concurrent requests are safe and serialise on the
database's write lock. Outcomes: the rewritten body; the original bytes (fail open: bad or
unknown input, storage trouble, any crash — logged once per session); or a context emergency,
which the proxy answers itself instead of sending the call.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from magic_context import log
from magic_context.errors import ContextEmergency, MCError
from magic_context.proxy import routes
from magic_context.records import record
from magic_context.wire import model as m

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_REMEMBERED_FAILURES = 1024


@record(frozen=True)
class Receipt:
    """Where the request's prompt ended in the session's raw history: what its response's usage is paired with."""

    harness: str
    session_id: str
    prompt_ordinal: int


@record(frozen=True)
class Outcome:
    body: bytes  # what to send upstream
    rewritten: bool = False
    receipt: Receipt | None = None
    emergency: str | None = None  # set: do not send; answer the client with this message
    report: dict[str, Any] | None = None


class FailureLog:
    """Logs a fail-open once per session (and kind of failure), not on every request of a broken session."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, session: str, path: str, exc: BaseException) -> bool:
        """Log the failure unless already logged for this session; True when it was logged."""
        reason = exc.one_line() if isinstance(exc, MCError) else f"{type(exc).__name__}: {exc}"
        key = (session, type(exc).__name__)
        with self._lock:
            if key in self._seen:
                return False
            self._seen[key] = None
            if len(self._seen) > MAX_REMEMBERED_FAILURES:
                self._seen.popitem(last=False)
        log.warning(f"proxy: transform failed for session {session} on {path} ({reason}); "
                    "forwarded the original body (further failures of this session are not logged)")
        return True


def transform(body: bytes, route: routes.Route, headers: Mapping[str, str], *, path: str, default_project: str,
              failures: FailureLog, debug: bool = False) -> Outcome:
    """Run the pass on a model request's body; never raises."""
    from magic_context.transform import hook, protocol

    session = routes.session_from_headers(headers)
    try:
        document = protocol.parse_document(body)
        session = routes.agent_session(session or routes.session_from_body(document, route), headers)
        options: dict[str, str | bool] = {"--project": routes.project_dir(headers, default_project, document)}
        for flag, value in (("--harness", route.harness), ("--session", session),
                            ("--context-limit", routes.context_limit(headers))):
            if value:
                options[flag] = value
        served = hook.serve_pass(body, options, debug=debug, document=document)
    except ContextEmergency as exc:
        log.warning(f"proxy: context emergency for session {session or '?'}: {exc.one_line()}")
        return Outcome(body, emergency=exc.one_line())
    except Exception as exc:  # fail open: the client's request goes out as it came
        if debug:
            import traceback

            traceback.print_exc()
        failures.note(session or "(no session id)", path, exc)
        return Outcome(body)
    receipt = None
    if served.inp is not None and served.prompt_ordinal is not None:
        receipt = Receipt(served.inp.harness, served.inp.session_id, served.prompt_ordinal)
    return Outcome(served.output, served.output is not body, receipt, None, served.report)


def record_usage(receipt: Receipt, usage: m.Usage) -> None:
    """Store a response's usage for its session; never raises (a lost figure only means an estimate next time)."""
    from magic_context.store import db, responses

    try:
        conn = db.open_db()
        try:
            responses.record(conn, receipt.harness, receipt.session_id, receipt.prompt_ordinal, usage,
                             now_ms=int(time.time() * 1000))
        finally:
            conn.close()
    except Exception as exc:
        log.warning(f"proxy: could not record the response usage of session {receipt.session_id}: {exc}")


__all__ = ["FailureLog", "Outcome", "Receipt", "record_usage", "transform"]
