"""One transform pass (DESIGN §3.4): decode, sync raw history, schedule, tag, mutate under one bust
permission, render m[0]/m[1], guidance, encode. Every persistent decision is replayed on later passes.
"""

from __future__ import annotations

import os
import sqlite3
import time

from magic_context import paths, tokens
from magic_context import project as project_identity
from magic_context.config.hot import HotConfig, duration_ms, load_hot
from magic_context.errors import BadInput, ContextEmergency, StorageBusy
from magic_context.history import trigger as history_trigger
from magic_context.records import Factory, record, replace
from magic_context.store import compartments as compartment_store
from magic_context.store import db as store_db
from magic_context.store import leases, passes, sessions
from magic_context.store import pending as pending_ops
from magic_context.store import raw as raw_store
from magic_context.store import responses as response_store
from magic_context.transform import (
    accounting,
    drops,
    guidance,
    head,
    nudges,
    scheduler,
    stages,
    tagger,
    temporal,
)
from magic_context.transform import tags as tag_store
from magic_context.transform.protocol import CODECS, PassInput, build_output, reduce_available
from magic_context.transform.stages import Decisions, Head, Measure, Pass, Schedule, Served, Sizes, View
from magic_context.transform.state import SessionState
from magic_context.transform.tags import MODE_PREVIEW
from magic_context.wire import anthropic, arcs, identity, openai, repair, responses
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

    from magic_context.protocols import Codec
    from magic_context.transform import heuristics

MAX_REPORTS_PER_SESSION = 200
TAG_PREFIX_TOKENS = stages.TAG_PREFIX_TOKENS
SKIM_FOLDED = True  # decode folded history without its blocks (a test turns it off to compare outputs)


@record
class PassResult:
    document: Any
    report: dict[str, Any]
    warnings: list[str] = Factory(factory=list)
    prompt_ordinal: int | None = None  # raw ordinal of the input's last message (a written pass only)


def _estimate(text: str) -> int:
    return tokens.estimate(text) if text else 0


def _system_text(inp: PassInput, messages_json: list) -> tuple[str, list[str]]:
    """The text of the system entry guidance goes into (for hashing and guidance), and all system texts."""
    if inp.harness == m.OPENAI:
        texts = openai.system_texts(messages_json)
    elif inp.harness == m.OPENAI_RESPONSES:  # `instructions`, else the developer items (as Codex sends it)
        texts = ([inp.system] if isinstance(inp.system, str) else []) + responses.system_texts(messages_json)
    elif inp.system is not None:
        texts = anthropic.system_texts(inp.system) if not isinstance(inp.system, str) else [inp.system]
        k = anthropic.prompt_index(texts)
        return (texts[k] if k < len(texts) else ""), texts
    else:
        texts = []
    return (texts[0] if texts else ""), texts


def _session_row(conn: sqlite3.Connection, inp: PassInput) -> tuple[int, str]:
    found = sessions.lookup_session(conn, inp.harness, inp.session_id)
    if found is not None and found[1]:
        return found[0], str(found[1])
    project_id = project_identity.identity(inp.project_dir)
    pk = raw_store.ensure_session(conn, inp.harness, inp.session_id, project_id=project_id,
                                  project_dir=str(inp.project_dir), now_ms=inp.now_ms)
    return pk, project_id


def _provider_usage(conn: sqlite3.Connection, pk: int, inp: PassInput, messages: list[m.Message],
                    msg_tokens: list[int], *, divergences: list[tuple[str, int]]) -> int | None:
    """Prompt size from the provider's last usage plus an estimate of what came after that response.

    The usage is the input's own (envelope, else the message's), else the one `mc proxy` recorded for
    the response that is this assistant message.
    """
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if msg.role != m.ASSISTANT:
            continue
        usage = inp.usage or msg.usage or _recorded_usage(conn, pk, messages, index, divergences)
        if usage is None or usage.total_input <= 0:
            return None
        return usage.total_input + usage.output_tokens + sum(msg_tokens[index + 1:])
    if inp.usage is not None and inp.usage.total_input > 0:
        return inp.usage.total_input + inp.usage.output_tokens
    return None


def _recorded_usage(conn: sqlite3.Connection, pk: int, messages: list[m.Message], index: int,
                    divergences: list[tuple[str, int]]) -> m.Usage | None:
    """The recorded response usage, if `messages[index]` is that response (it directly follows the
    prompt's last message) and the history that prompt held was not rewritten since."""
    found = response_store.latest(conn, pk)
    if found is None or index == 0:
        return None
    prompt_ordinal, usage = found
    if messages[index - 1].ordinal != prompt_ordinal or messages[index].ordinal != prompt_ordinal + 1:
        return None
    # A rewrite of the prompt's last message alone (e.g. a client moving its cache breakpoint) keeps the
    # figures; anything rewritten before it means the provider counted a different prompt, and so does a
    # harness compaction, even one whose view starts at the prompt's last message (it dropped all before it).
    if any(at < prompt_ordinal or reason == raw_store.COMPACTED for reason, at in divergences):
        return None
    return usage


def _last_activity(state: SessionState, messages: list[m.Message]) -> int | None:
    stamps = [state.get("last_pass_at")]
    for msg in reversed(messages):
        if msg.role == m.ASSISTANT:
            stamps.append(msg.completed_at or msg.created_at)
            break
    stamps = [s for s in stamps if isinstance(s, int | float)]
    return int(max(stamps)) if stamps else None


def _drain_pending(conn: sqlite3.Connection, pk: int, sites_by_number: dict[int, tagger.Site],
                   protected_from: int, force: bool) -> tuple[list[heuristics.Drop], list[int]]:
    """Pending ctx_reduce drops that may land now; returns (drops, pending op numbers to delete)."""
    from magic_context.transform import heuristics

    rows = pending_ops.queued_drops(conn, pk)
    out, done = [], []
    for number, forced in rows:
        site = sites_by_number.get(number)
        if site is None:
            continue  # not in this request (e.g. the harness compacted it away): keep it queued
        if site.tag.dropped:
            done.append(number)
            continue
        if number >= protected_from and not (forced or force):
            continue  # protected: stays queued until it leaves the protected window
        out.append(heuristics.Drop(site, drops.default_mode(site), "ctx_reduce"))
        done.append(number)
    return out, done


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
        _system_text(inp, inp.messages_json)
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


# A new tool output or user text above this share of the window (and LIVE_CAP_MIN tokens) is served as a
# bounded preview from its first pass on (issue #14 item 2): it is new, so no cached prefix holds it, and
# the decision is stored like a drop, so every later pass serves the same bytes.
LIVE_CAP_SHARE = 0.10
LIVE_CAP_MIN = 8000


def _preview_oversized(sites: list[tagger.Site], limit: int) -> list[tagger.Site]:
    """Mark new oversized tool outputs and user texts as previews; returns them (their tags are now dropped)."""
    cap = max(LIVE_CAP_MIN, int(LIVE_CAP_SHARE * limit))
    out = []
    for site in sites:
        tag = site.tag
        if not tag.new or tag.dropped or tag.tokens <= cap:
            continue
        tool_output = tag.kind == tag_store.KIND_TOOL and bool(site.results)
        if tool_output or (tag.kind == tag_store.KIND_TEXT and site.role == m.USER):
            tag.status, tag.drop_mode = tag_store.DROPPED, MODE_PREVIEW
            out.append(site)
    return out


SYNTHETIC_RESULT_TOKENS = 16  # a "[Tool execution was interrupted]" result mc adds, with its framing


def _repair_pairing(messages: list[m.Message], msg_tokens: list[int], harness: str,
                    warnings: list[str]) -> tuple[list[m.Message], list[int]]:
    """Repair the tool pairing the harness broke (`wire.repair`: orphan results go, unanswered calls are
    answered as the harnesses do) before anything is tagged; BadInput when it cannot be made valid, so an
    invalid request is never served with exit 0. Deterministic: every pass repairs the same way."""
    tokens_of = {id(msg): t for msg, t in zip(messages, msg_tokens, strict=True)}
    done = repair.repair(messages, harness)
    if not done:
        return messages, msg_tokens
    problems = arcs.validate_pairing(messages, harness)
    if problems:
        raise BadInput(f"the input's tool pairing cannot be repaired: {problems[0]}",
                       fix="every tool call must be answered by its result right after it")
    warnings.append(f"repaired the input's tool pairing: {'; '.join(done[:3])}"
                    + (f" (+{len(done) - 3} more)" if len(done) > 3 else ""))
    return messages, [tokens_of.get(id(msg), SYNTHETIC_RESULT_TOKENS) for msg in messages]


def _unchanged(inp: PassInput, reason: str) -> PassResult:
    return PassResult(inp.document, {"pass": passes.PassKind.DEFER, "bust": False, "reason": reason, "tokens_before": 0,
                                     "tokens_after": 0, "tags": 0, "dropped": 0, "pending_drops": 0,
                                     "historian": passes.HistorianActivity.IDLE, "ms": 0.0, "warnings": []})


def _decode_and_sync(conn: sqlite3.Connection, inp: PassInput, codec: Codec, pk: int, *, skim: int,
                     fold_through: int, readonly: bool) -> tuple[list[m.Message], raw_store.SyncResult]:
    """Decode the input (skimming the first `skim` messages, folded on the previous pass) and sync it.

    A skim holds only if every skimmed message is still stored unchanged and folded (the raw store
    checks before writing); otherwise the input is decoded whole, so the output never depends on it.
    """
    messages = codec.decode(inp.messages_json, skim=skim)
    try:
        return messages, raw_store.sync(conn, pk, messages, now_ms=inp.now_ms, estimate=_estimate,
                                        write=not readonly, skimmed=skim, folded_through=fold_through)
    except raw_store.SkimmedChange:  # checked before anything was written
        messages = codec.decode(inp.messages_json)
        return messages, raw_store.sync(conn, pk, messages, now_ms=inp.now_ms, estimate=_estimate,
                                        write=not readonly)


def _skim_hint(messages: list[m.Message], fold_through: int) -> int:
    """How many leading messages the next pass may skim: those folded away (system messages never are)."""
    hint = 0
    for index, msg in enumerate(messages):
        if msg.role == m.SYSTEM:
            continue
        if msg.ordinal > fold_through:
            break
        hint = index + 1
    return hint


def _run_in_db(conn: sqlite3.Connection, inp: PassInput, hot: HotConfig, *, codec: Codec, primary: bool,
               compaction: bool, readonly: bool, warnings: list[str], started: float) -> PassResult:
    """One pass as named stages, each taking and returning records (see each record's docstring)."""
    p = Pass(conn, inp, hot, codec, primary, compaction, readonly, warnings, started)
    view = _view(p)
    meas = _measure(p, view)
    sched = _schedule(p, view, meas)
    unfolded = view
    if sched.mutate and primary:
        view = _refold(p, view)
    decisions = _decide(p, view, meas, sched, refolded=view is not unfolded)
    if decisions.held:  # the pass defers after all: no head re-render, no new date line
        sched = replace(sched, bust=False, mutate=False)
    served = _apply(p, view, meas, decisions)
    head_out = _head(p, view, meas, sched, served.kept)
    messages_out = codec.encode(served.kept)
    system_out, date = _guidance(p, view, meas, sched, messages_out)
    report, head_now = _report(p, view, meas, sched, decisions=decisions, served=served, head_out=head_out)
    if not readonly:
        _persist(conn, inp, view.pk, view.state, new_tags=view.new_tags, new_drops=decisions.new_drops,
                 done_pending=decisions.done_pending, pristine=served.pristine, counter=view.counter, report=report,
                 m0_text=head_out.m0_text, m1_text=head_out.m1_text, m0_meta=head_out.m0_meta, head_now=head_now,
                 with_head=sched.with_head, stripped=decisions.stripped, anchors=meas.anchors,
                 nudge_state=served.nudge_state, date=date, model_key=meas.model_key, limit=meas.limit.tokens,
                 extra={"reasoning_tokens": {k: v for k, v in served.reasoning_cache.items()
                                             if k in decisions.stripped},
                        # only a pass that folds owns the watermark: a subagent's (or compaction-off) pass under
                        # the same session must not reset it, or the next primary pass re-serves folded history
                        **({"fold_through": view.fold_through,
                            "skim_hint": _skim_hint(view.all_messages, view.fold_through)}
                           if compaction and primary else {}),
                        **({"head_created_at": head_out.created} if head_out.created is not None else {})})
    last_ordinal = view.all_messages[-1].ordinal if view.all_messages and not (readonly or inp.dry_run) else None
    return PassResult(build_output(inp, messages_out, system_out), report, warnings, last_ordinal)


def _protected_count(p: Pass) -> int:
    """The newest tags a reclaim spares: the config's, else the harness's workload default; a value only the
    untrusted project file sets may raise that default, never lower it."""
    default = scheduler.default_protected_tags(p.inp.harness)
    chosen = p.hot.set_for_model("protected_tags", None)
    count = default if chosen is None else int(chosen)
    if p.hot.set_for_model("protected_tags", None, user_only=True) is None:
        count = max(count, default)
    return count


def _protection(sites: list[tagger.Site], protected_count: int) -> tuple[dict[int, tagger.Site], int, int]:
    """(sites by tag number, first protected tag number, newest active tag number)."""
    by_number = {s.tag.number: s for s in sites}
    active_numbers = sorted(s.tag.number for s in sites if not s.tag.dropped)
    protected_from = active_numbers[-protected_count] if len(active_numbers) >= protected_count else 0
    return by_number, protected_from, active_numbers[-1] if active_numbers else 0


def _view(p: Pass) -> View:
    """Session row and state; decode and sync the input; fold what compartments cover; tag the rest."""
    conn, inp = p.conn, p.inp
    pk, project_id = _session_row(conn, inp) if not p.readonly else _existing_session(conn, inp)
    state = SessionState.load(conn, pk)
    counter = sessions.tag_counter(conn, pk)

    # History the historian folded into compartments leaves the served array; the watermark is frozen
    # between busts (it only advances on a pass that busts anyway) so defer passes replay the same bytes.
    # Nothing is folded against a head rendered under other settings: a written pass re-renders it (a HARD
    # fold, which refolds), a read-only one leaves it out, so the history is shown once either way.
    stale = p.stale_head(state.get("m0_meta") or {})
    fold_through = int(state.get("fold_through", -1)) if p.compaction and p.primary and not stale else -1
    skim = int(state.get("skim_hint", 0)) if fold_through >= 0 and SKIM_FOLDED else 0
    all_messages, sync = _decode_and_sync(conn, inp, p.codec, pk, skim=skim, fold_through=fold_through,
                                          readonly=p.readonly)
    messages, msg_tokens = _fold(all_messages, sync.tokens, fold_through)
    messages, msg_tokens = _repair_pairing(messages, msg_tokens, inp.harness, p.warnings)
    known = tag_store.KnownTags.for_messages(conn, pk, [msg.id for msg in messages], any_stored=counter > 0)

    previews: list[tagger.Site] = []
    if p.compaction and not p.readonly:
        sites, new_tags, counter = tagger.assign(messages, known, counter, _estimate)
        previews = _preview_oversized(sites, scheduler.resolve_limit(inp.context_limit, inp.model_key).tokens)
    elif p.compaction:
        sites, new_tags, _ = tagger.assign(messages, known.copy(), counter, _estimate)
        sites = [s for s in sites if not s.tag.new]  # LKG: new parts stay raw
        new_tags = []
    else:
        sites, new_tags = [], []
    by_number, protected_from, newest = _protection(sites, _protected_count(p))
    return View(pk, project_id, state, counter, all_messages, sync, fold_through, messages, msg_tokens, known,
                 sites, new_tags, by_number, protected_from, newest, previews, stale)


def _measure(p: Pass, view: View) -> Measure:
    """System prompt identity and size, window and threshold, the request's size, the scheduler's verdict."""
    inp, hot, state = p.inp, p.hot, view.state
    reduce_ok = p.compaction and reduce_available(bool(hot["ctx_reduce_enabled"]), inp.tools)
    system_first, system_texts = _system_text(inp, inp.messages_json)
    system_hash = identity.digest(system_first.encode("utf-8", "replace"), 8)
    # Measured every pass (0.3 ms for Claude Code's 7 000 characters): the hash covers only the text guidance
    # goes into, and Claude Code's is a one-line identity, so a size kept under it missed its instructions' edits.
    system_tokens = sum(_estimate(t) for t in system_texts)

    model_key = inp.model_key
    limit = scheduler.resolve_limit(inp.context_limit, model_key)
    token_threshold = hot.for_model("execute_threshold_tokens", model_key)  # by "provider/id", "id", "default"
    harness_default = scheduler.default_threshold(inp.harness, limit.tokens)  # for a model no tier sets
    chosen = hot.set_for_model("execute_threshold_percentage", model_key)
    percent = harness_default if chosen is None else float(chosen)
    if hot.set_for_model("execute_threshold_percentage", model_key, user_only=True) is None:  # raise-only for
        percent = max(percent, harness_default)  # the untrusted project file: raise the harness default, never lower
    threshold = scheduler.threshold_percent(float(percent), token_threshold, limit.tokens)
    ttl = duration_ms(str(hot.for_model("cache_ttl", model_key)))

    served_head = p.with_head and not (view.stale and p.readonly)  # (see `_head`)
    head_tokens = int(state.get("m0_tokens", 0)) + int(state.get("m1_tokens", 0)) if served_head else 0
    anchors = list(state.get("nudges") or [])
    nudge_tokens = sum(_estimate(a.get("text", "")) for a in anchors)  # ctx_reduce and notes nudges
    sizes = Sizes(reduce_ok, head_tokens, system_tokens, nudge_tokens)
    estimated = sizes.served(view, view.sites)
    msg_tokens = view.msg_tokens
    dropped = [x for x in view.sites if x.tag.dropped]  # previews of new content, stored drops, a forced reduce
    if dropped:  # the provider's usage plus what came after it, as served: not the raw parts a drop cut
        cut = accounting.savings_by_message(dropped)
        msg_tokens = [t - cut.get(i, 0) for i, t in enumerate(view.msg_tokens)]
    reported = _provider_usage(p.conn, view.pk, inp, view.messages, msg_tokens, divergences=view.sync.divergences)
    usage_tokens = reported if reported is not None else estimated
    decision = scheduler.decide(usage_tokens, limit.tokens, threshold, now_ms=inp.now_ms,
                                last_activity_ms=_last_activity(state, view.messages), ttl_ms=ttl)
    return Measure(sizes, system_first, system_hash, model_key, limit, threshold, anchors, estimated, reported,
                    usage_tokens, decision, decision.force and p.primary)


def _schedule(p: Pass, view: View, meas: Measure) -> Schedule:
    """HARD fold triggers (the provider cache is already dead, or the baseline changed), the bust permission,
    the historian (it may fire here), and whether the pass may mutate the prefix."""
    state = view.state
    with_head = p.with_head
    m0_meta = state.get("m0_meta") or {}
    hard_reasons = []
    if with_head:
        if state.get("m0") is None or state.get("m1") is None:
            hard_reasons.append("first render")
        elif view.sync.divergences:
            hard_reasons.append("history rewritten by the harness (" + view.sync.divergences[0][0] + ")")
        elif view.stale:  # the stored head is wrong for this pass's array, not merely stale (`Pass.head_settings`)
            hard_reasons.append("config changed (" + ", ".join(view.stale) + ")")
        elif m0_meta.get("model_key") != meas.model_key:
            hard_reasons.append("model changed")
        elif m0_meta.get("system_hash") != meas.system_hash:
            hard_reasons.append("system prompt changed")
        elif meas.decision.ttl_expired:
            hard_reasons.append("cache TTL expired")
    hard = bool(hard_reasons) and not p.readonly
    bust = (meas.decision.execute or hard or meas.force) and not p.readonly
    historian = _historian(p.conn, p.inp, p.hot, view.pk, messages=view.messages, msg_tokens=view.msg_tokens,
                           usage_tokens=meas.usage_tokens, limit=meas.limit.tokens, threshold=meas.threshold,
                           enabled=p.compaction and p.primary and not p.readonly and not p.inp.dry_run, busting=bust)
    mutate = bust and p.compaction and (historian != passes.HistorianActivity.RUNNING or meas.force or hard)
    return Schedule(with_head, m0_meta, hard_reasons, hard, bust, historian, mutate)


def _refold(p: Pass, view: View) -> View:
    """On a pass allowed to mutate: advance the fold watermark to what the historian has published since."""
    folded = compartment_store.last_end(p.conn, view.pk)
    if folded is None or folded <= view.fold_through:
        return view
    messages, msg_tokens = _fold(view.messages, view.msg_tokens, int(folded))
    sites, _, _ = tagger.assign(messages, view.known, view.counter, _estimate)
    by_number, protected_from, _newest = _protection(sites, _protected_count(p))
    return View(view.pk, view.project_id, view.state, view.counter, view.all_messages, view.sync, int(folded),
                 messages, msg_tokens, view.known, sites, view.new_tags, by_number, protected_from, view.newest,
                 view.previews, view.stale)


def _decide(p: Pass, view: View, meas: Measure, sched: Schedule, *, refolded: bool = False) -> Decisions:
    """The drop lanes (queued ctx_reduce drops, duplicates, stale reduces, age, smart) and old reasoning, then
    the pressure reclaim well below the threshold; only on a pass allowed to change the prefix. A pass that only
    crossed the threshold (no HARD fold, no force band, no new compartments: `refolded`, m[1] unchanged) keeps none
    of it when it saves too little to pay for the bust (`reclaim.worth_a_bust`): it is held, served as a defer. A
    pass whose cache TTL expired is never held: the provider writes the whole request anyway, so its drops are free
    (a subagent's pass, which has no head to make the expiry a HARD fold, would otherwise forgo them)."""
    stripped = set(view.state.get("stripped_reasoning") or [])
    previews: list[heuristics.Drop] = []
    if view.previews:  # oversized new content is previewed on every pass, busting or not (it is new)
        from magic_context.transform import heuristics

        previews = [heuristics.Drop(site, MODE_PREVIEW, "oversized") for site in view.previews]
    if not sched.mutate:
        return Decisions(previews, [], stripped)
    from magic_context.transform import heuristics, reclaim  # the drop lanes load only when they can run

    hot, sites, protected_from, limit = p.hot, view.sites, view.protected_from, meas.limit
    pending, done_pending = _drain_pending(p.conn, view.pk, view.by_number, protected_from, meas.force)
    lanes = [*pending,
             *heuristics.duplicate_drops(sites, protected_from),
             *heuristics.stale_reduce_drops(sites, protected_from),
             *heuristics.age_drops(sites, view.newest, int(hot["auto_drop_tool_age"]), protected_from)]
    if hot["smart_drops"]:
        lanes += heuristics.smart_drops(sites, protected_from)
    new_drops = [*previews, *heuristics.dedupe(lanes)]  # previews (already marked dropped) first
    was = {id(d.site.tag): (d.site.tag.status, d.site.tag.drop_mode) for d in new_drops}
    kept_stripped = set(stripped)
    for drop in new_drops:
        drop.site.tag.status, drop.site.tag.drop_mode = tag_store.DROPPED, drop.mode
    stripped |= heuristics.old_reasoning(view.messages, sites, p.inp.harness, newest=view.newest,
                                         max_age=int(hot["clear_reasoning_age"]), protected_from=protected_from)
    projected = meas.usage_tokens - (meas.estimated - meas.sizes.served(view, sites))
    if meas.usage_tokens >= meas.threshold / 100 * limit.tokens or meas.force:
        # Reclaim well below the threshold so the following passes defer (one bust, many cache hits).
        target = int(reclaim.TARGET_SHARE_OF_THRESHOLD * meas.threshold / 100 * limit.tokens)
        plan = reclaim.plan(sites, projected, target, protected_from, include_protected=meas.decision.block_band)
        for drop in plan.drops:
            was[id(drop.site.tag)] = (drop.site.tag.status, drop.site.tag.drop_mode)
            drop.site.tag.status, drop.site.tag.drop_mode = tag_store.DROPPED, drop.mode
        new_drops += plan.drops
        projected -= plan.reclaimed_tokens
    optional = not (sched.hard or meas.force or meas.decision.force or meas.decision.ttl_expired or refolded)
    if optional and not reclaim.worth_a_bust(meas.usage_tokens - projected, meas.threshold / 100 * limit.tokens) \
            and _m1_unchanged(p, view, meas, sched):
        for drop in new_drops[len(previews):]:  # served as a defer: the stored decisions, nothing new
            drop.site.tag.status, drop.site.tag.drop_mode = was[id(drop.site.tag)]
        return Decisions(previews, [], kept_stripped,
                         held=f"a bust would save only {meas.usage_tokens - projected} tokens")
    if meas.decision.block_band and limit.proven and meas.reported is not None and p.primary and \
            projected >= scheduler.BLOCK_PERCENT / 100 * limit.tokens:
        raise ContextEmergency(
            f"context at {meas.decision.usage_percent:.0f}% of the {limit.tokens}-token window "
            "and nothing could be folded", fix=_emergency_fix(p, view, projected, limit.tokens, sched.historian))
    return Decisions(new_drops, done_pending, stripped)


WRAPUP_KEEP = 20  # `mc wrapup`'s default --keep: the newest messages it leaves raw


def _inline_historian() -> bool:
    from magic_context.history import runner

    return runner.inline_mode()


def _emergency_fix(p: Pass, view: View, projected: int, limit: int, historian: str) -> str:
    """Exit 4's advice, one that works (issue #14 item 2). Only compacting older history into compartments
    frees what the drops leave (every dropped message still costs its placeholder): when that would bring
    the request under the block band, say how — wait for the historian this pass started, or run `mc
    wrapup` (the pass committed the history it was given, so wrapup sees all of it). Otherwise what fills
    the window is what mc cannot shrink: the system prompt, the tools and the newest turn."""
    session = p.inp.session_id
    cut = accounting.savings_by_message(view.sites)  # what the drops decided so far already save
    old = range(max(0, len(view.messages) - WRAPUP_KEEP))
    foldable = sum(view.msg_tokens[i] - cut.get(i, 0) for i in old if view.messages[i].role != m.SYSTEM)
    head = int(p.hot["history_budget_percentage"] * limit)  # what the compartments cost in m[0] instead
    if projected - foldable + head >= scheduler.BLOCK_PERCENT / 100 * limit:
        return ("the system prompt, the tool definitions and the newest turn fill it, which mc cannot shrink: "
                "start a new session or use a model with a larger window")
    if historian == "running" or (historian == "fired" and not _inline_historian()):
        return (f"the historian is compacting older history now: retry once `mc status --session {session}` "
                "no longer shows it running")
    return f"run `mc wrapup --session {session}` to compact older history, then retry"


def _apply(p: Pass, view: View, meas: Measure, decisions: Decisions) -> Served:
    """Apply every drop decision and the stripped reasoning, temporal markers, tag prefixes and nudges."""
    hot, sites = p.hot, view.sites
    # Markers depend on the original timestamps: compute before any message is removed.
    markers = temporal.markers(view.messages) if hot["temporal_awareness"] and p.compaction else {}
    pristine = {s.tag.number: s.text for s in sites if s.tag.new}
    reasoning_cache = dict(view.state.get("reasoning_tokens") or {})
    accounting.reasoning_tokens(view.messages, decisions.stripped, reasoning_cache, _estimate)
    kept = drops.apply(view.messages, sites, decisions.stripped if p.compaction else set())
    if meas.sizes.reduce_ok:
        tagger.write_prefixes(sites)
    temporal.apply(kept, markers)

    nudge_state = dict(view.state.get("nudge_state") or {})
    nudges.replay(kept, meas.anchors)  # ctx_reduce nudges and the deferred-notes nudge
    if meas.sizes.reduce_ok and not p.readonly:
        meas_nudge = nudges.measure(sites, view.protected_from)
        quiet = bool(decisions.done_pending) or any(d.lane == "ctx_reduce" for d in decisions.new_drops)
        text = nudges.decide(meas_nudge, nudge_state, quiet=quiet)
        if text:
            nudges.fire(kept, meas.anchors, text)
    state = view.state
    if p.primary and not p.readonly and view.new_tags:  # a commit or a finished todo list is a trigger too (§2.3)
        from magic_context.transform import note_nudge

        if note_nudge.detect(sites):
            state.set(note_nudge.TRIGGER_KEY, p.inp.now_ms)
    if p.primary and not p.readonly and state.get("note_trigger_at"):  # = note_nudge.TRIGGER_KEY: on a trigger only
        from magic_context.transform import note_nudge

        if note_nudge.pending(state):
            text = note_nudge.step(p.conn, state, kept, sites=sites, messages=view.messages, session_pk=view.pk,
                                   project_id=view.project_id, now_ms=p.inp.now_ms)
            if text:
                nudges.fire(kept, meas.anchors, text)
    return Served(kept, pristine, reasoning_cache, nudge_state)


def _head_context(p: Pass, view: View, meas: Measure) -> head.HeadContext:
    from magic_context.history import render as history_render

    hot = p.hot
    return head.HeadContext(
        session_pk=view.pk, project_id=view.project_id, project_dir=p.inp.project_dir,
        history_budget=int(hot["history_budget_percentage"] * meas.limit.tokens),  # of the window
        memory_budget=int(hot["memory.injection_budget_tokens"]), temporal=bool(hot["temporal_awareness"]),
        include_history=p.compaction and p.primary, include_memory=bool(hot["memory.enabled"]),
        include_docs=bool(hot["dreamer.inject_docs"]),
        estimate=history_render.estimate_tokens, now_ms=p.inp.now_ms, harness=p.inp.harness)


def _m1_unchanged(p: Pass, view: View, meas: Measure, sched: Schedule) -> bool:
    """Whether a SOFT bust would serve the stored m[1] again (no memory update or compartment to show)."""
    stored = view.state.get("m1")
    if not sched.with_head or stored is None:
        return True
    return head.render_m1(p.conn, _head_context(p, view, meas), sched.m0_meta)[0] == stored


def _head(p: Pass, view: View, meas: Measure, sched: Schedule, kept: list[m.Message]) -> Head:
    """m[0] / m[1]: re-rendered on a busting pass (defer passes replay the stored text), then put in front of
    `kept`, after any leading system messages."""
    state = view.state
    m0_text, m1_text, m0_meta = state.get("m0"), state.get("m1"), sched.m0_meta
    if view.stale and p.readonly:  # last known good cannot re-render a head rendered under other settings:
        m0_text = m1_text = None  # it is left out (and `_view` folded nothing against it)
    hard, hard_reasons = sched.hard, sched.hard_reasons
    created = None
    if sched.with_head and sched.bust:  # (a HARD fold always busts)
        from magic_context.history import render as history_render

        ctx = _head_context(p, view, meas)
        if not hard:
            m1_text, visible_memories = head.render_m1(p.conn, ctx, m0_meta)
            if head.m1_too_large(m1_text, ctx):
                hard, hard_reasons = True, ["m[1] pressure backstop"]
        if hard:
            m0_text, watermarks = head.render_m0(p.conn, ctx)
            m1_text = history_render.M1_PLACEHOLDER
            visible_memories = list(watermarks.get("memory_ids", []))
            m0_meta = {**watermarks, "model_key": meas.model_key, "system_hash": meas.system_hash,
                       "materialized_at": p.inp.now_ms, "settings": p.head_settings}
        state.set(head.VISIBLE_MEMORY_KEY, visible_memories)  # saved with the pass (never on a read-only one)
    if sched.with_head and m0_text is not None and m1_text is not None:
        lead = 0
        while lead < len(kept) and kept[lead].role == m.SYSTEM:
            lead += 1
        created = state.get("head_created_at")
        if created is None:
            created = next((msg.created_at for msg in kept if msg.created_at is not None), None)
        kept[lead:lead] = head.messages(m0_text, m1_text, created)
    return Head(m0_text, m1_text, m0_meta, hard, hard_reasons, created)


def _guidance(p: Pass, view: View, meas: Measure, sched: Schedule, messages_out: Any) -> tuple[Any, str]:
    """System guidance, with a date line frozen between busts: (the system to serve or None, the date line).
    OpenAI-format system entries are edited inside `messages_out`."""
    inp, hot = p.inp, p.hot
    system_out = None
    date = view.state.get("date")
    if sched.bust or date is None:
        date = guidance.date_line(inp.now_ms)
    guide = guidance.guidance_text(reduce_available=meas.sizes.reduce_ok, frozen_date=date) if p.compaction else ""
    inject = guide and hot["system_prompt_injection.enabled"] and \
        not guidance.skipped(meas.system_first, list(hot["system_prompt_injection.skip_signatures"]))
    if inject and inp.harness == m.OPENAI_RESPONSES:
        if isinstance(inp.system, str):
            system_out = guidance.join(inp.system, guide)
        elif texts := responses.system_texts(messages_out):
            responses.apply_system(messages_out, [guidance.join(texts[0], guide), *texts[1:]])
    elif inject and inp.harness == m.OPENAI:
        texts = openai.system_texts(messages_out)
        if texts:
            openai.apply_system(messages_out, [guidance.join(texts[0], guide), *texts[1:]])
    elif inject and inp.system is not None:
        if isinstance(inp.system, str):
            system_out = guidance.join(inp.system, guide)
        else:
            texts = anthropic.system_texts(inp.system)
            k = anthropic.prompt_index(texts)
            system_out = anthropic.apply_system(inp.system, [*texts[:k], guidance.join(meas.system_first, guide),
                                                             *texts[k + 1:]])
    return system_out, date


def _report(p: Pass, view: View, meas: Measure, sched: Schedule, *, decisions: Decisions, served: Served,
            head_out: Head) -> tuple[dict[str, Any], int]:
    """The pass report (stdout `--report`, pass_reports) and the head's size as served now."""
    tokens_after = meas.sizes.served(view, view.sites, served.kept, decisions.stripped, served.reasoning_cache)
    if sched.with_head and head_out.m0_text is not None:
        head_now = _estimate(head_out.m0_text) + _estimate(head_out.m1_text or "")
        tokens_after += head_now - meas.sizes.head_tokens
    else:
        head_now = 0
    hard, bust, decision = head_out.hard, sched.bust, meas.decision
    pass_kind = passes.PassKind.FOLD if hard else passes.PassKind.EXECUTE if bust else passes.PassKind.DEFER
    pending_left = pending_ops.count(p.conn, view.pk) - len(decisions.done_pending)
    report = {
        "pass": pass_kind, "bust": bust,
        "reason": "; ".join(head_out.hard_reasons) if hard else (decision.reason if bust else
                                                                  "defer: " + (decisions.held or decision.reason)),
        "tokens_before": sum(view.msg_tokens) + meas.sizes.system_tokens, "tokens_after": tokens_after,
        "tags": len(view.sites), "dropped": sum(1 for s in view.sites if s.tag.dropped), "pending_drops": pending_left,
        "historian": sched.historian, "ms": round((time.perf_counter() - p.started) * 1000, 2),
        "warnings": p.warnings, "usage_tokens": meas.usage_tokens,
        "usage_source": "provider" if meas.reported is not None else "estimate",
        "context_limit": meas.limit.tokens, "threshold_percent": meas.threshold,
        "new_drops": len(decisions.new_drops), "new_tags": len(view.new_tags), "raw_written": view.sync.written,
    }
    return report, head_now


def _historian(conn: sqlite3.Connection, inp: PassInput, hot: HotConfig, pk: int, *, messages: list[m.Message],
               msg_tokens: list[int], usage_tokens: int, limit: int, threshold: float,
               enabled: bool, busting: bool = False) -> passes.HistorianActivity:
    """Evaluate the historian trigger; start it (inline or detached) when it fires. Returns the report word."""
    if not enabled:
        return passes.HistorianActivity.IDLE
    running = leases.is_live(conn, leases.historian_lease(pk), inp.now_ms)
    last_end = compartment_store.last_end(conn, pk)
    figures = history_trigger.tail_figures(messages, msg_tokens, last_end=last_end, context_limit=limit,
                                           threshold_percent=threshold, usage_tokens=usage_tokens)
    decision = history_trigger.evaluate(
        usage_tokens=usage_tokens, context_limit=limit, threshold_percent=threshold, tail_tokens=figures.tokens,
        tail_messages=figures.messages, commit_clusters=figures.commit_clusters, running=running, busting=busting)
    if not decision.fire:
        return passes.HistorianActivity.RUNNING if running else passes.HistorianActivity.IDLE
    from magic_context.history import runner

    if runner.inline_mode():
        runner.run_once(conn, pk, emergency=decision.emergency, now_ms=inp.now_ms)
        return passes.HistorianActivity.FIRED
    launched = runner.launch_background(conn, pk, session_id=inp.session_id, harness=inp.harness,
                                        now_ms=inp.now_ms, timeout_ms=int(hot["historian.timeout_ms"]))
    return passes.HistorianActivity.FIRED if launched else passes.HistorianActivity.IDLE


def _fold(messages: list[m.Message], msg_tokens: list[int], through: int) -> tuple[list[m.Message], list[int]]:
    """Drop messages whose ordinal is covered by compartments (system messages stay), never splitting an arc."""
    if through < 0:
        return messages, msg_tokens
    keep = [i for i, msg in enumerate(messages) if msg.role == m.SYSTEM or msg.ordinal > through]
    if len(keep) == len(messages):
        return messages, msg_tokens
    # A result whose call was folded away would be an orphan: it goes with its call, paired as the tagger pairs
    # them (a later call that reuses the id does not keep it), so `_refold`'s re-tag meets no part `_view` missed.
    # A result with no call at all goes too: its call may be in the skimmed lead, decoded without blocks.
    kept_at = set(keep)
    gone = {pos for arc in arcs.find_arcs(messages) if arc.call is None or arc.call[0] not in kept_at
            for pos in arc.results}
    for i in sorted({mi for mi, _ in gone} & kept_at):
        messages[i].blocks = [b for bi, b in enumerate(messages[i].blocks) if (i, bi) not in gone]
    pairs = [(messages[i], msg_tokens[i]) for i in keep if messages[i].blocks]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _existing_session(conn: sqlite3.Connection, inp: PassInput) -> tuple[int, str]:
    found = sessions.lookup_session(conn, inp.harness, inp.session_id)
    if found is None:
        raise StorageBusy("no stored state for this session yet")
    return found[0], str(found[1] or "")


def _persist(conn: sqlite3.Connection, inp: PassInput, pk: int, state: SessionState, *, new_tags: list[tag_store.Tag],
             new_drops: list[heuristics.Drop], done_pending: list[int], pristine: dict[int, str], counter: int,
             report: dict[str, Any], m0_text: str | None, m1_text: str | None, m0_meta: dict, head_now: int,
             with_head: bool, stripped: set[str], anchors: list, nudge_state: dict, date: str,
             model_key: str | None, limit: int, extra: dict[str, Any]) -> None:
    now = inp.now_ms
    if new_tags:
        tag_store.insert_new(conn, pk, new_tags, now)
        tag_store.save_source(conn, pk, sorted(pristine.items()))
    if new_drops:
        tag_store.save_drops(conn, pk, [d.site.tag for d in new_drops])
    if done_pending:
        pending_ops.clear(conn, pk, done_pending)
    sessions.record_pass(conn, pk, tag_counter=counter, now_ms=now, model_key=model_key, context_limit=limit)
    if with_head and m0_text is not None:
        state.set("m0", m0_text)
        state.set("m1", m1_text)
        state.set("m0_meta", m0_meta)
        m0_tokens = _estimate(m0_text)
        state.set("m0_tokens", m0_tokens)
        state.set("m1_tokens", max(0, head_now - m0_tokens))
    state.set("stripped_reasoning", sorted(stripped))
    state.set("nudges", anchors)
    state.set("nudge_state", nudge_state)
    state.set("date", date)
    state.set("last_pass_at", now)
    state.set("fold_through", extra.pop("fold_through", state.get("fold_through", -1)))
    for key, value in extra.items():
        state.set(key, value)
    state.save(conn, now)
    passes.record_report(conn, pk, report, now_ms=now, keep=MAX_REPORTS_PER_SESSION)


__all__ = ["PassResult", "run"]
