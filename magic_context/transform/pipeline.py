"""One transform pass (DESIGN §3.4): decode, sync raw history, schedule, tag, mutate under one bust
permission, render m[0]/m[1], guidance, encode. Every persistent decision is replayed on later passes.

This module is the entry point (`run`: config, the database, the transaction, the error mapping) and the
pass's shape (`_run_in_db`: the stages in order). The stages live by what they do: `pass_view` reads the
request into tagged history, `pass_decide` measures it and decides what may change, `pass_serve` applies
that, renders the head and guidance, reports and persists; `stages` holds the records they hand on.
"""

from __future__ import annotations

import os
import sqlite3
import time

from magic_context import paths
from magic_context.config.hot import HotConfig, load_hot
from magic_context.errors import ContextEmergency
from magic_context.records import Factory, record, replace
from magic_context.store import db as store_db
from magic_context.store import passes
from magic_context.transform import pass_decide, pass_serve, pass_view
from magic_context.transform.protocol import CODECS, PassInput, build_output
from magic_context.transform.stages import Pass

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

    from magic_context.protocols import Codec


@record
class PassResult:
    document: Any
    report: dict[str, Any]
    warnings: list[str] = Factory(factory=list)
    prompt_ordinal: int | None = None  # raw ordinal of the input's last message (a written pass only)


def run(inp: PassInput, *, readonly: bool = False) -> PassResult:
    """Serve one pass. `readonly` replays what is stored (last-known-good): no new tags, no new decisions."""
    started = time.perf_counter()
    hot = load_hot(inp.project_dir)
    warnings = [str(w) for w in hot.warnings]  # config problems: in the report `mc status` shows, never on stderr
    codec = CODECS[inp.harness]
    if not inp.messages_json:  # nothing to keep in a window: no head, no session row
        return _unchanged(inp, "empty conversation served unchanged")
    if not hot["enabled"] or inp.agent not in ("primary", "subagent"):
        codec.decode(inp.messages_json)  # served unchanged, but malformed input is still exit 2
        return _unchanged(inp, "mc disabled for this call")
    if not os.path.exists(paths.db_file()):  # first use: bad input must not create the data dir (exit 2 writes nothing)
        codec.decode(inp.messages_json)
        pass_decide.system_text(inp, inp.messages_json)
    primary = inp.agent == "primary"
    compaction = bool(hot["compaction.enabled"])
    conn = store_db.open_db(cache_size_mb=hot["sqlite.cache_size_mb"], mmap_size_mb=hot["sqlite.mmap_size_mb"],
                            migrate=not readonly)  # last known good never waits on a migration
    try:
        if readonly:
            return _run_in_db(conn, inp, hot, codec=codec, primary=primary, compaction=compaction,
                              readonly=True, warnings=warnings, started=started)
        emergency = None
        with store_db.atomic(conn, commit=not inp.dry_run):
            try:
                return _run_in_db(conn, inp, hot, codec=codec, primary=primary, compaction=compaction,
                                  readonly=False, warnings=warnings, started=started)
            except ContextEmergency as exc:  # commit what the pass stored (the session, its raw history, a
                emergency = exc  # historian it started): `mc wrapup`, which exit 4 advises, works on all of it
        raise emergency
    except sqlite3.OperationalError as exc:
        raise store_db.classify(exc) from exc
    finally:
        conn.close()


def _unchanged(inp: PassInput, reason: str) -> PassResult:
    return PassResult(inp.document, {"pass": passes.PassKind.DEFER, "bust": False, "reason": reason, "tokens_before": 0,
                                     "tokens_after": 0, "tags": 0, "dropped": 0, "pending_drops": 0,
                                     "historian": passes.HistorianActivity.IDLE, "ms": 0.0, "warnings": []})


def _run_in_db(conn: sqlite3.Connection, inp: PassInput, hot: HotConfig, *, codec: Codec, primary: bool,
               compaction: bool, readonly: bool, warnings: list[str], started: float) -> PassResult:
    """One pass as named stages, each taking and returning records (see each record's docstring)."""
    p = Pass(conn, inp, hot, codec, primary, compaction, readonly, warnings, started)
    view = pass_view.view(p)
    meas = pass_decide.measure(p, view)
    sched = pass_decide.schedule(p, view, meas)
    unfolded = view
    if sched.mutate and primary:
        view = pass_view.refold(p, view)
    decisions = pass_decide.decide(p, view, meas, sched, refolded=view is not unfolded)
    if decisions.held:  # the pass defers after all: no head re-render, no new date line
        sched = replace(sched, bust=False, mutate=False)
    served = pass_serve.apply(p, view, meas, decisions)
    head_out = pass_serve.put_head(p, view, meas, sched, served.kept)
    messages_out = codec.encode(served.kept)
    system_out, date = pass_serve.add_guidance(p, view, meas, sched, messages_out)
    report, head_now = pass_serve.report(p, view, meas, sched, decisions=decisions, served=served, head_out=head_out)
    if not readonly:
        pass_serve.persist(p, view, meas, sched, decisions=decisions, served=served, head_out=head_out, report=report,
                           head_now=head_now, date=date)
    last_ordinal = view.all_messages[-1].ordinal if view.all_messages and not (readonly or inp.dry_run) else None
    return PassResult(build_output(inp, messages_out, system_out), report, warnings, last_ordinal)


__all__ = ["PassResult", "run"]
