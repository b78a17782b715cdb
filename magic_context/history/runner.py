"""One historian run for one session: lease → chunk → providers → validate → publish (DESIGN §5).

`run_once` takes the session's lease (`leases` row `historian:<session_pk>`, reclaimed once it is past
`historian.timeout_ms`), reads the unsummarized raw tail, picks the eligible head (`boundary`: token
mode for trigger runs, keep mode for `mc wrapup`), renders the chunk, asks the provider chain
(configured providers, then `extractive`, always last), validates strictly (one repair per provider),
and publishes. It records `session_state.historian` ({"state": "running"|"idle", …}, for `mc status`)
(the idle state lists the run's answered requests with their tokens, `last_calls`, so a replay can
bill them) and `historian_failure` ({class, provider, at, message}) when a provider failed, or class "degraded" when
the extractive answer fell back to its coarse cut (still published, so a run always makes progress) —
cleared once a run succeeds cleanly.

For the transform pass: `is_running` is the veto check (one indexed read), `inline_mode()` says whether
`MAGIC_CONTEXT_HISTORIAN=inline` asks for `run_once` inside the pass, and `launch_background` starts
`mc wrapup --background` detached and returns at once, handing the child the lease it wrote (env
`MAGIC_CONTEXT_HISTORIAN_LEASE`). Module-level imports are stdlib + sqlite3 + magic_context only; the
config (pydantic) is loaded inside `run_once` when the caller passes none.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from magic_context.errors import MCError
from magic_context.history import boundary, chunk, publish, trigger
from magic_context.history.states import HistorianState, RunStatus
from magic_context.records import Factory, record
from magic_context.store import compartments as compartment_store
from magic_context.store import leases, passes, sessions
from magic_context.store import memories as memory_store
from magic_context.store import raw as raw_store
from magic_context.store import state as state_store
from magic_context.store.db import atomic

if TYPE_CHECKING:
    from magic_context.config.model import MCConfig
    from magic_context.history.extractive import ExtractiveProvider
    from magic_context.llm.chain import Attempt

HISTORIAN_ENV = "MAGIC_CONTEXT_HISTORIAN"
LEASE_ENV = "MAGIC_CONTEXT_HISTORIAN_LEASE"
STATE_KEY = "historian"
FAILURE_KEY = "historian_failure"
DEFAULT_TIMEOUT_MS = 300_000
DEFAULT_CONTEXT_LIMIT = 200_000
DEFAULT_THRESHOLD = 40.0  # config.model's default (the pass reports the threshold it used: that comes first)



PUBLISHED, NOTHING, BUSY = RunStatus.PUBLISHED, RunStatus.NOTHING, RunStatus.BUSY
FAILED, STALE = RunStatus.FAILED, RunStatus.STALE


@record
class RunResult:
    """What one run did. `status`: published, nothing (no eligible history), busy (lease held elsewhere),
    failed (every provider failed; see `failure`), stale (another run published first)."""

    status: RunStatus
    reason: str = ""
    start: int | None = None
    end: int | None = None
    eligible_start: int | None = None
    eligible_end: int | None = None
    next_start: int | None = None
    compartments: int = 0
    facts: int = 0
    provider: str | None = None
    attempts: list[Attempt] = Factory(factory=list)
    failure: dict[str, Any] | None = None
    search: dict[str, Any] | None = None  # what the search indexer did after the publish

    @property
    def has_more(self) -> bool:
        """Eligible history remains after this run (a wrapup loop continues)."""
        return self.next_start is not None and self.eligible_end is not None and self.next_start <= self.eligible_end


def lease_name(session_pk: int) -> str:
    return leases.historian_lease(session_pk)


def inline_mode() -> bool:
    """`MAGIC_CONTEXT_HISTORIAN=inline`: the transform runs the historian inside the pass (replays, tests)."""
    return os.environ.get(HISTORIAN_ENV, "").strip().lower() == "inline"


def is_running(conn: sqlite3.Connection, session_pk: int, now_ms: int) -> bool:
    """Whether a live lease covers the session (a run is in progress, or was launched and not yet reaped)."""
    return leases.is_live(conn, lease_name(session_pk), now_ms)


def acquire_lease(conn: sqlite3.Connection, session_pk: int, holder: str, now_ms: int, ttl_ms: int) -> bool:
    """Take (or renew) the session's lease for `holder`; False while another holder's lease is live."""
    return leases.acquire(conn, lease_name(session_pk), holder, now_ms, ttl_ms)


def release_lease(conn: sqlite3.Connection, session_pk: int, holder: str) -> None:
    leases.release(conn, lease_name(session_pk), holder)


def _now() -> int:
    return int(time.time() * 1000)


def _state(conn: sqlite3.Connection, session_pk: int, key: str, value: object, now_ms: int) -> None:
    with atomic(conn):
        state_store.set_state(conn, session_pk, key, value, now_ms)


def background_argv(session_id: str, harness: str) -> list[str]:
    """The detached child's command line."""
    return [sys.executable, "-m", "magic_context", "wrapup", "--background", "--session", session_id,
            "--harness", harness]


def launch_background(conn: sqlite3.Connection, session_pk: int, *, session_id: str, harness: str, now_ms: int,
                      timeout_ms: int = DEFAULT_TIMEOUT_MS, argv: Sequence[str] | None = None) -> bool:
    """Write the lease, start `mc wrapup --background` detached (own session, null stdio), return at once.

    False when a live lease exists or the process could not start (that failure is recorded). Works
    inside the pass's open transaction (savepoints); the child waits for the pass to commit, then adopts
    the lease through `MAGIC_CONTEXT_HISTORIAN_LEASE`.
    """
    import subprocess

    token = f"bg:{uuid.uuid4().hex[:12]}"
    if not acquire_lease(conn, session_pk, token, now_ms, timeout_ms):
        return False
    env = dict(os.environ)
    env[LEASE_ENV] = token
    env.pop(HISTORIAN_ENV, None)
    try:
        child = subprocess.Popen(list(argv or background_argv(session_id, harness)), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                 start_new_session=os.name == "posix")
        leases.hand_over(conn, lease_name(session_pk), token, child.pid)  # the child, not this pass, holds it
    except OSError as exc:
        release_lease(conn, session_pk, token)
        _state(conn, session_pk, FAILURE_KEY, {"class": "launch", "provider": None, "at": now_ms,
                                                "message": f"cannot start the background historian: {exc}"}, now_ms)
        return False
    _state(conn, session_pk, STATE_KEY, {"state": HistorianState.RUNNING, "since": now_ms, "mode": "background"},
           now_ms)
    return True


@record
class _Session:
    harness: str
    session_id: str
    project_id: str | None
    project_dir: str | None
    model_key: str | None
    context_limit: int | None


def _session(conn: sqlite3.Connection, session_pk: int) -> _Session:
    from magic_context.errors import NotFound

    info = sessions.session_info(conn, session_pk)
    if info is None:
        raise NotFound(f"session #{session_pk} not found")
    return _Session(info["harness"], info["session_id"], info["project_id"], info["project_dir"], info["model_key"],
                    info["context_limit"])


def _decode(harness: str, stored: list[raw_store.StoredMessage]) -> list[Any]:
    from magic_context.transform.protocol import CODECS

    codec = CODECS[harness]
    messages = codec.decode([s.raw for s in stored])
    if len(messages) != len(stored):  # a codec that splits or merges items: decode one by one
        messages = [codec.decode([s.raw])[0] for s in stored]
    for msg, s in zip(messages, stored, strict=True):
        msg.ordinal, msg.id = s.ordinal, s.message_id
        if msg.created_at is None:
            msg.created_at = s.created_at
    return messages


def _threshold(config: MCConfig, model_key: str | None) -> float:
    value = config.execute_threshold_percentage
    if isinstance(value, dict):
        value = value.get(model_key or "", value.get("default", DEFAULT_THRESHOLD))
    return float(value)


def _last_report(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any]:
    """The newest stored pass report (usage, threshold as the pass computed them), or {}."""
    return passes.last_report(conn, session_pk)


@record
class _Plan:
    bound: boundary.Boundary
    chunk: chunk.Chunk | None
    spans: list[boundary.Span]


def plan(conn: sqlite3.Connection, session_pk: int, *, keep: int | None, emergency: bool, protect_tokens: int,
         budget: int, harness: str, project_dir: str | None) -> _Plan:
    """Read the unsummarized tail, place the boundary, and build the chunk (None when nothing is eligible)."""
    last = publish.last_compartment_end(conn, session_pk)
    first = raw_store.first_ordinal(conn, session_pk)
    start = last + 1 if last is not None else (first if first is not None else 0)
    last_live = raw_store.last_ordinal(conn, session_pk)
    stored = raw_store.read_range(conn, session_pk, start, last_live) if last_live is not None else []
    if not stored:
        return _Plan(boundary.Boundary(start, start - 1, None, 0, 0, 0, "no unsummarized history"), None, [])
    messages = _decode(harness, stored)
    known = [s.tokens for s in stored]
    del stored  # the decoded messages keep what they need: a long tail is held once, not twice
    sizes = [t or raw_store.message_tokens(msg, _estimate) for msg, t in zip(messages, known, strict=True)]
    digests, spans = chunk.digest_messages(messages, sizes, root=project_dir)
    del messages
    items = [boundary.TailItem(d.ordinal, d.tokens, d.prompt) for d in digests]
    if keep is not None:
        bound = boundary.keep_boundary(items, spans, start=start, keep=keep)
    else:
        bound = boundary.protected_tail_boundary(items, spans, start=start, protect_tokens=protect_tokens,
                                                 live_prompt_floor=not emergency)
    if bound.empty:
        return _Plan(bound, None, spans)
    return _Plan(bound, chunk.build_chunk(digests, spans, start=start, end=bound.end, budget=budget), spans)


def _estimate(text: str) -> int:
    from magic_context import tokens

    return tokens.estimate(text) if text else 0


def make_chain(config: MCConfig, provider: Any, the_chunk: chunk.Chunk) -> list[Any]:
    """The provider chain for this run: `provider` (a name or a Provider) else the configured chain; the
    extractive historian for this chunk is always the last entry."""
    from magic_context.history import extractive
    from magic_context.llm.chain import build_chain

    def factory() -> ExtractiveProvider:
        return extractive.ExtractiveProvider(the_chunk)

    if provider is not None and not isinstance(provider, str):
        return [provider, factory()]
    historian = config.historian
    if provider == extractive.NAME:
        return [factory()]
    if provider is not None:
        historian = historian.model_copy(update={"provider": provider})
    chain = build_chain(historian, extractive=factory)
    if not chain or chain[-1].name != extractive.NAME:
        chain = [p for p in chain if p.name != extractive.NAME] + [factory()]
    return chain


def _failure(attempts: list[Attempt], now_ms: int, recovered_by: str | None) -> dict[str, Any] | None:
    """The first failure of a provider that did not answer in the end (a repaired answer is no failure)."""
    failed = [a for a in attempts if not a.ok and a.provider != recovered_by]
    if not failed:
        return None
    first = failed[0]
    record = {"class": first.kind, "provider": first.provider, "model": first.model, "at": now_ms,
              "message": first.error, "attempts": len(attempts)}
    if recovered_by:
        record["recovered_by"] = recovered_by
    return record


def _degraded(chain: Sequence[Any], winner: str, now_ms: int, failure: dict[str, Any] | None,
              ) -> dict[str, Any] | None:
    """`failure`, or a record of the extractive answer having fallen back to its coarse cut (published, but
    worth a look: the detailed answer failed its own validation)."""
    provider = next((p for p in chain if p.name == winner and getattr(p, "degraded", None)), None)
    if provider is None:
        return failure
    if failure is not None:
        return {**failure, "degraded": provider.degraded}
    return {"class": "degraded", "provider": winner, "model": getattr(provider, "model", None), "at": now_ms,
            "message": provider.degraded, "recovered_by": f"{winner} (coarse cut)"}


def run_once(conn: sqlite3.Connection | None = None, session_pk: int | None = None, *, provider: Any = None,
             keep: int | None = None, emergency: bool = False, now_ms: int | None = None,
             config: MCConfig | None = None, lease_holder: str | None = None, mode: str = "inline") -> RunResult:
    """One historian run for `session_pk` (see the module docstring). Never raises for provider trouble;
    storage errors propagate. `keep` selects keep mode (wrapup); `lease_holder` adopts a lease written by
    `launch_background` or held by a wrapup loop (then it is left for that owner to release)."""
    if session_pk is None:
        raise ValueError("run_once needs a session_pk")
    own = conn is None
    if conn is None:
        from magic_context.store.db import open_db

        conn = open_db()
    try:
        return _run(conn, session_pk, provider=provider, keep=keep, emergency=emergency, now_ms=now_ms,
                    config=config, lease_holder=lease_holder, mode=mode)
    finally:
        if own:
            conn.close()


def _run(conn: sqlite3.Connection, session_pk: int, *, provider: Any, keep: int | None, emergency: bool,
         now_ms: int | None, config: MCConfig | None, lease_holder: str | None, mode: str) -> RunResult:
    now = now_ms if now_ms is not None else _now()
    session = _session(conn, session_pk)
    if config is None:
        from magic_context.config.load import load_config

        config = load_config(Path(session.project_dir) if session.project_dir else None).config
    ttl = config.historian.timeout_ms
    holder = lease_holder or f"run:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    adopted = lease_holder is not None and lease_holder.startswith("bg:")
    if not acquire_lease(conn, session_pk, holder, now, ttl):
        return RunResult(BUSY, "another historian run holds the lease")
    try:
        _state(conn, session_pk, STATE_KEY, {"state": HistorianState.RUNNING, "since": now, "pid": os.getpid(),
                                             "mode": mode}, now)
        result = _produce(conn, session_pk, session, config, provider=provider, keep=keep, emergency=emergency,
                          now=now, holder=holder)
        idle = {"state": HistorianState.IDLE, "last_run_at": now, "last_status": result.status,
                "last_provider": result.provider,
                "last_calls": [{"provider": a.provider, "model": a.model, "input_tokens": a.input_tokens,
                                "output_tokens": a.output_tokens, "source": a.tokens_source}
                               for a in result.attempts if a.tokens_source]}
        _state(conn, session_pk, STATE_KEY, idle, now)
        return result
    except BaseException:
        with contextlib.suppress(sqlite3.Error, MCError):  # never mask the original error
            _state(conn, session_pk, STATE_KEY, {"state": HistorianState.IDLE, "last_run_at": now,
                                                 "last_status": RunStatus.ERROR}, now)
        raise
    finally:
        if lease_holder is None or adopted:
            with contextlib.suppress(sqlite3.Error, MCError):  # an unreleased lease expires after the timeout
                release_lease(conn, session_pk, holder)


def _produce(conn: sqlite3.Connection, session_pk: int, session: _Session, config: MCConfig, *, provider: Any,
             keep: int | None, emergency: bool, now: int, holder: str) -> RunResult:
    from magic_context.history import prompt
    from magic_context.history.validate import validate_historian_output
    from magic_context.llm.chain import ChainExhausted, complete_with_chain

    report = _last_report(conn, session_pk) if keep is None else {}
    limit = session.context_limit or DEFAULT_CONTEXT_LIMIT
    threshold = float(report.get("threshold_percent") or _threshold(config, session.model_key))
    if keep is None and not emergency:
        usage = float(report.get("usage_tokens") or report.get("tokens_after") or 0)
        emergency = 100 * usage / limit >= trigger.emergency_percent(threshold)
    p = plan(conn, session_pk, keep=keep, emergency=emergency,
             protect_tokens=boundary.protected_tail_tokens(limit, threshold), budget=chunk.chunk_budget(),
             harness=session.harness, project_dir=session.project_dir)
    bound = p.bound
    if p.chunk is None or p.chunk.empty:
        return RunResult(NOTHING, bound.reason, eligible_start=bound.start, eligible_end=bound.end)
    the_chunk = p.chunk
    final = not the_chunk.has_more
    references = compartment_store.references(conn, session_pk, prompt.MAX_REFERENCES)
    memories = memory_store.for_prompt(conn, session.project_id, now, prompt.MAX_MEMORIES) \
        if session.project_id else []
    text = prompt.build_prompt(the_chunk, references, memories)
    # Discard-last (validate step 7) re-reads the last compartment with the messages after it: only a chunk cut
    # by its budget has those in the next run. One ending at the eligible boundary would be re-read at once with
    # no more lookahead — a model historian paid twice for the same answer (a fifth of its bill on pi_large
    # @ 48k, bench/results.md) — so it publishes all it read; a model still stops early itself when work is open.
    no_discard = emergency or final

    def validate(answer: str) -> Any:
        return validate_historian_output(answer, the_chunk.start, the_chunk.end, tool_only=the_chunk.tool_only,
                                         tool_arcs=the_chunk.arcs, emergency=no_discard, accept_truncated=True)

    result = RunResult(FAILED, start=the_chunk.start, end=the_chunk.end, eligible_start=bound.start,
                       eligible_end=bound.end)
    try:
        chain = make_chain(config, provider, the_chunk)
    except (ValueError, MCError) as exc:  # a provider that cannot be built (unknown name, bad config)
        result.failure = {"class": "config", "provider": str(provider), "at": now, "message": str(exc)}
        result.reason = str(exc)
        _state(conn, session_pk, FAILURE_KEY, result.failure, now)
        return result
    try:
        validated, attempts = complete_with_chain(
            chain, prompt.SYSTEM_PROMPT, text, validate,
            lambda error, previous: prompt.repair_prompt(text, error, previous))
    except ChainExhausted as exc:
        result.attempts = exc.attempts
        result.failure = _failure(exc.attempts, now, None) or {"class": exc.kind, "provider": None, "at": now,
                                                               "message": exc.one_line()}
        result.reason = exc.one_line()
        _state(conn, session_pk, FAILURE_KEY, result.failure, now)
        return result
    winner = next(a for a in reversed(attempts) if a.ok)
    result.attempts, result.provider = attempts, winner.provider
    from magic_context.history import extractive, tiers

    # p1's record and p4's anchors are code's (a model is asked only for the rest); a model's p1 leads with its p2
    validated = tiers.fill(validated, the_chunk, narrative=winner.provider != extractive.NAME)
    if not acquire_lease(conn, session_pk, holder, now, config.historian.timeout_ms):  # still ours?
        result.status, result.reason = STALE, "lost the lease before publishing"
        return result
    try:
        published = publish.publish(conn, session_pk, validated, the_chunk, provider=winner.provider,
                                    model=winner.model, now_ms=now, project_id=session.project_id,
                                    session_id=session.session_id,
                                    promote_facts=config.memory.enabled and config.memory.auto_promote)
    except publish.StalePublish as exc:
        result.status, result.reason = STALE, exc.one_line()
        return result
    from magic_context.search.indexer import after_publish  # lazy: only a publishing run pays for it

    result.search = after_publish(conn, session_pk, config, now_ms=now)
    failure = _degraded(chain, winner.provider, now, _failure(attempts, now, winner.provider))
    _state(conn, session_pk, FAILURE_KEY, failure, now)
    result.status, result.failure = PUBLISHED, failure
    result.compartments, result.facts = published.compartments, published.facts_new
    result.next_start = validated.next_start
    result.reason = f"published {published.compartments} compartments for {published.start}-{published.end}"
    return result


__all__ = [
    "FAILURE_KEY",
    "HISTORIAN_ENV",
    "LEASE_ENV",
    "STATE_KEY",
    "HistorianState",
    "RunResult",
    "RunStatus",
    "acquire_lease",
    "background_argv",
    "inline_mode",
    "is_running",
    "launch_background",
    "lease_name",
    "make_chain",
    "plan",
    "release_lease",
    "run_once",
]
