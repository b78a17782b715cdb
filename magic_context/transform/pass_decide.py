"""Stages 2-4 of a transform pass (`pipeline._run_in_db`): measure the request, schedule the pass, decide drops.

`measure` sizes the request (the provider's usage when it has one) against the window and threshold and
asks the scheduler for a verdict; `schedule` turns it into the bust permission (HARD fold reasons, the
historian, which may fire here); `decide` runs the drop lanes and the reclaim on a pass allowed to mutate,
or holds a bust that would save too little. Nothing here edits the messages: `pass_serve` applies it.
"""

from __future__ import annotations

import sqlite3

from magic_context.config.hot import HotConfig, duration_ms
from magic_context.errors import ContextEmergency
from magic_context.history import trigger as history_trigger
from magic_context.store import compartments as compartment_store
from magic_context.store import leases, passes
from magic_context.store import pending as pending_ops
from magic_context.store import raw as raw_store
from magic_context.store import responses as response_store
from magic_context.transform import accounting, drops, head, pass_serve, scheduler, tagger
from magic_context.transform import tags as tag_store
from magic_context.transform.pass_view import estimate
from magic_context.transform.protocol import PassInput, reduce_available
from magic_context.transform.stages import Decisions, Measure, Pass, Schedule, Sizes, View
from magic_context.transform.state import SessionState
from magic_context.transform.tags import MODE_PREVIEW
from magic_context.wire import anthropic, identity, openai, responses
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from magic_context.transform import heuristics


def system_text(inp: PassInput, messages_json: list) -> tuple[str, list[str]]:
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


def measure(p: Pass, view: View) -> Measure:
    """System prompt identity and size, window and threshold, the request's size, the scheduler's verdict."""
    inp, hot, state = p.inp, p.hot, view.state
    reduce_ok = p.compaction and reduce_available(bool(hot["ctx_reduce_enabled"]), inp.tools)
    system_first, system_texts = system_text(inp, inp.messages_json)
    system_hash = identity.digest(system_first.encode("utf-8", "replace"), 8)
    # Measured every pass (0.3 ms for Claude Code's 7 000 characters): the hash covers only the text guidance
    # goes into, and Claude Code's is a one-line identity, so a size kept under it missed its instructions' edits.
    system_tokens = sum(estimate(t) for t in system_texts)

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

    served_head = p.with_head and not (view.stale and p.readonly)  # (see `pass_serve.put_head`)
    head_tokens = int(state.get("m0_tokens", 0)) + int(state.get("m1_tokens", 0)) if served_head else 0
    anchors = list(state.get("nudges") or [])
    nudge_tokens = sum(estimate(a.get("text", "")) for a in anchors)  # ctx_reduce and notes nudges
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


def schedule(p: Pass, view: View, meas: Measure) -> Schedule:
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


def decide(p: Pass, view: View, meas: Measure, sched: Schedule, *, refolded: bool = False) -> Decisions:
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


def _m1_unchanged(p: Pass, view: View, meas: Measure, sched: Schedule) -> bool:
    """Whether a SOFT bust would serve the stored m[1] again (no memory update or compartment to show)."""
    stored = view.state.get("m1")
    if not sched.with_head or stored is None:
        return True
    return head.render_m1(p.conn, pass_serve.head_context(p, view, meas), sched.m0_meta)[0] == stored


__all__ = ["decide", "measure", "schedule"]
