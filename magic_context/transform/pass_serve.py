"""Stages 5-9 of a transform pass (`pipeline._run_in_db`): apply the decisions, put the head in front, add the
guidance, report the pass and persist it.

`apply` edits the messages (drops, stripped reasoning, temporal markers, tag prefixes, nudges);
`put_head` renders or replays m[0]/m[1]; `add_guidance` edits the system prompt with a date frozen between
busts; `report` sizes what is served; `persist` stores every decision so later passes replay the same bytes.
"""

from __future__ import annotations

import time

from magic_context.store import passes, sessions
from magic_context.store import pending as pending_ops
from magic_context.transform import accounting, drops, guidance, head, nudges, tagger, temporal
from magic_context.transform import tags as tag_store
from magic_context.transform.pass_view import estimate, skim_hint
from magic_context.transform.stages import Decisions, Head, Measure, Pass, Schedule, Served, View
from magic_context.wire import anthropic, openai, responses
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


MAX_REPORTS_PER_SESSION = 200


def apply(p: Pass, view: View, meas: Measure, decisions: Decisions) -> Served:
    """Apply every drop decision and the stripped reasoning, temporal markers, tag prefixes and nudges."""
    hot, sites = p.hot, view.sites
    # Markers depend on the original timestamps: compute before any message is removed.
    markers = temporal.markers(view.messages) if hot["temporal_awareness"] and p.compaction else {}
    pristine = {s.tag.number: s.text for s in sites if s.tag.new}
    reasoning_cache = dict(view.state.get("reasoning_tokens") or {})
    accounting.reasoning_tokens(view.messages, decisions.stripped, reasoning_cache, estimate)
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


def head_context(p: Pass, view: View, meas: Measure) -> head.HeadContext:
    from magic_context.history import render as history_render

    hot = p.hot
    return head.HeadContext(
        session_pk=view.pk, project_id=view.project_id, project_dir=p.inp.project_dir,
        history_budget=int(hot["history_budget_percentage"] * meas.limit.tokens),  # of the window
        memory_budget=int(hot["memory.injection_budget_tokens"]), temporal=bool(hot["temporal_awareness"]),
        include_history=p.compaction and p.primary, include_memory=bool(hot["memory.enabled"]),
        include_docs=bool(hot["dreamer.inject_docs"]),
        estimate=history_render.estimate_tokens, now_ms=p.inp.now_ms, harness=p.inp.harness)


def put_head(p: Pass, view: View, meas: Measure, sched: Schedule, kept: list[m.Message]) -> Head:
    """m[0] / m[1]: re-rendered on a busting pass (defer passes replay the stored text), then put in front of
    `kept`, after any leading system messages."""
    state = view.state
    m0_text, m1_text, m0_meta = state.get("m0"), state.get("m1"), sched.m0_meta
    if view.stale and p.readonly:  # last known good cannot re-render a head rendered under other settings:
        m0_text = m1_text = None  # it is left out (and `pass_view.view` folded nothing against it)
    hard, hard_reasons = sched.hard, sched.hard_reasons
    created = None
    if sched.with_head and sched.bust:  # (a HARD fold always busts)
        from magic_context.history import render as history_render

        ctx = head_context(p, view, meas)
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


def add_guidance(p: Pass, view: View, meas: Measure, sched: Schedule, messages_out: Any) -> tuple[Any, str]:
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


def report(p: Pass, view: View, meas: Measure, sched: Schedule, *, decisions: Decisions, served: Served,
            head_out: Head) -> tuple[dict[str, Any], int]:
    """The pass report (stdout `--report`, pass_reports) and the head's size as served now."""
    tokens_after = meas.sizes.served(view, view.sites, served.kept, decisions.stripped, served.reasoning_cache)
    if sched.with_head and head_out.m0_text is not None:
        head_now = estimate(head_out.m0_text) + estimate(head_out.m1_text or "")
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


def persist(p: Pass, view: View, meas: Measure, sched: Schedule, *, decisions: Decisions, served: Served,
            head_out: Head, report: dict[str, Any], head_now: int, date: str) -> None:
    """Store what later passes replay, from the stage records that decided it: `view`'s new tags (with
    `served`'s pristine sources) and tag counter, `decisions`' drops, landed queued drops and stripped
    reasoning, `head_out`'s m[0]/m[1] (sized from `head_now`), `meas`' nudge anchors, model and window,
    `served`'s nudge state and reasoning sizes, the frozen `date`, the fold watermark, and the `report`."""
    conn, pk, state, now = p.conn, view.pk, view.state, p.inp.now_ms
    if view.new_tags:
        tag_store.insert_new(conn, pk, view.new_tags, now)
        tag_store.save_source(conn, pk, sorted(served.pristine.items()))
    if decisions.new_drops:
        tag_store.save_drops(conn, pk, [d.site.tag for d in decisions.new_drops])
    if decisions.done_pending:
        pending_ops.clear(conn, pk, decisions.done_pending)
    sessions.record_pass(conn, pk, tag_counter=view.counter, now_ms=now, model_key=meas.model_key,
                         context_limit=meas.limit.tokens)
    if sched.with_head and head_out.m0_text is not None:
        state.set("m0", head_out.m0_text)
        state.set("m1", head_out.m1_text)
        state.set("m0_meta", head_out.m0_meta)
        m0_tokens = estimate(head_out.m0_text)
        state.set("m0_tokens", m0_tokens)
        state.set("m1_tokens", max(0, head_now - m0_tokens))
    state.set("stripped_reasoning", sorted(decisions.stripped))
    state.set("nudges", meas.anchors)
    state.set("nudge_state", served.nudge_state)
    state.set("date", date)
    state.set("last_pass_at", now)
    state.set("reasoning_tokens", {k: v for k, v in served.reasoning_cache.items() if k in decisions.stripped})
    # Only a pass that folds owns the watermark: a subagent's (or compaction-off) pass under the same
    # session must not reset it, or the next primary pass re-serves folded history.
    if p.compaction and p.primary:
        state.set("fold_through", view.fold_through)
        state.set("skim_hint", skim_hint(view.all_messages, view.fold_through))
    else:
        state.set("fold_through", state.get("fold_through", -1))
    if head_out.created is not None:
        state.set("head_created_at", head_out.created)
    state.save(conn, now)
    passes.record_report(conn, pk, report, now_ms=now, keep=MAX_REPORTS_PER_SESSION)


__all__ = ["MAX_REPORTS_PER_SESSION", "add_guidance", "apply", "head_context", "persist", "put_head", "report"]
