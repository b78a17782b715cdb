"""Stage 1 of a transform pass (`pipeline._run_in_db`): the history as this pass sees it (a `stages.View`).

`view` finds the session row, decodes the input (skimming what the last pass folded) and syncs it into the
raw store, folds what the historian's compartments cover, repairs broken tool pairing, and tags what is left
(oversized new parts become previews); `refold` moves the fold watermark on a pass allowed to mutate. Kept
apart from the deciding and serving stages because it alone turns the request into stored, tagged history.
"""

from __future__ import annotations

import sqlite3

from magic_context import project as project_identity
from magic_context import tokens
from magic_context.errors import BadInput, StorageBusy
from magic_context.store import compartments as compartment_store
from magic_context.store import raw as raw_store
from magic_context.store import sessions
from magic_context.transform import scheduler, tagger
from magic_context.transform import tags as tag_store
from magic_context.transform.protocol import PassInput
from magic_context.transform.stages import Pass, View
from magic_context.transform.state import SessionState
from magic_context.transform.tags import MODE_PREVIEW
from magic_context.wire import arcs, repair
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from magic_context.protocols import Codec

SKIM_FOLDED = True  # decode folded history without its blocks (a test turns it off to compare outputs)


def estimate(text: str) -> int:
    return tokens.estimate(text) if text else 0


def _session_row(conn: sqlite3.Connection, inp: PassInput) -> tuple[int, str]:
    found = sessions.lookup_session(conn, inp.harness, inp.session_id)
    if found is not None and found[1]:
        return found[0], str(found[1])
    project_id = project_identity.identity(inp.project_dir)
    pk = raw_store.ensure_session(conn, inp.harness, inp.session_id, project_id=project_id,
                                  project_dir=str(inp.project_dir), now_ms=inp.now_ms)
    return pk, project_id


def _existing_session(conn: sqlite3.Connection, inp: PassInput) -> tuple[int, str]:
    found = sessions.lookup_session(conn, inp.harness, inp.session_id)
    if found is None:
        raise StorageBusy("no stored state for this session yet")
    return found[0], str(found[1] or "")


def _decode_and_sync(conn: sqlite3.Connection, inp: PassInput, codec: Codec, pk: int, *, skim: int,
                     fold_through: int, readonly: bool) -> tuple[list[m.Message], raw_store.SyncResult]:
    """Decode the input (skimming the first `skim` messages, folded on the previous pass) and sync it.

    A skim holds only if every skimmed message is still stored unchanged and folded (the raw store
    checks before writing); otherwise the input is decoded whole, so the output never depends on it.
    """
    messages = codec.decode(inp.messages_json, skim=skim)
    try:
        return messages, raw_store.sync(conn, pk, messages, now_ms=inp.now_ms, estimate=estimate,
                                        write=not readonly, skimmed=skim, folded_through=fold_through)
    except raw_store.SkimmedChange:  # checked before anything was written
        messages = codec.decode(inp.messages_json)
        return messages, raw_store.sync(conn, pk, messages, now_ms=inp.now_ms, estimate=estimate,
                                        write=not readonly)


def skim_hint(messages: list[m.Message], fold_through: int) -> int:
    """How many leading messages the next pass may skim: those folded away (system messages never are)."""
    hint = 0
    for index, msg in enumerate(messages):
        if msg.role == m.SYSTEM:
            continue
        if msg.ordinal > fold_through:
            break
        hint = index + 1
    return hint


def _fold(messages: list[m.Message], msg_tokens: list[int], through: int) -> tuple[list[m.Message], list[int]]:
    """Drop messages whose ordinal is covered by compartments (system messages stay), never splitting an arc."""
    if through < 0:
        return messages, msg_tokens
    keep = [i for i, msg in enumerate(messages) if msg.role == m.SYSTEM or msg.ordinal > through]
    if len(keep) == len(messages):
        return messages, msg_tokens
    # A result whose call was folded away would be an orphan: it goes with its call, paired as the tagger pairs
    # them (a later call that reuses the id does not keep it), so `refold`'s re-tag meets no part `view` missed.
    # A result with no call at all goes too: its call may be in the skimmed lead, decoded without blocks.
    kept_at = set(keep)
    gone = {pos for arc in arcs.find_arcs(messages) if arc.call is None or arc.call[0] not in kept_at
            for pos in arc.results}
    for i in sorted({mi for mi, _ in gone} & kept_at):
        messages[i].blocks = [b for bi, b in enumerate(messages[i].blocks) if (i, bi) not in gone]
    pairs = [(messages[i], msg_tokens[i]) for i in keep if messages[i].blocks]
    return [p[0] for p in pairs], [p[1] for p in pairs]


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


def view(p: Pass) -> View:
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
        sites, new_tags, counter = tagger.assign(messages, known, counter, estimate)
        previews = _preview_oversized(sites, scheduler.resolve_limit(inp.context_limit, inp.model_key).tokens)
    elif p.compaction:
        sites, new_tags, _ = tagger.assign(messages, known.copy(), counter, estimate)
        sites = [s for s in sites if not s.tag.new]  # LKG: new parts stay raw
        new_tags = []
    else:
        sites, new_tags = [], []
    by_number, protected_from, newest = _protection(sites, _protected_count(p))
    return View(pk, project_id, state, counter, all_messages, sync, fold_through, messages, msg_tokens, known,
                 sites, new_tags, by_number, protected_from, newest, previews, stale)


def refold(p: Pass, view: View) -> View:
    """On a pass allowed to mutate: advance the fold watermark to what the historian has published since."""
    folded = compartment_store.last_end(p.conn, view.pk)
    if folded is None or folded <= view.fold_through:
        return view
    messages, msg_tokens = _fold(view.messages, view.msg_tokens, int(folded))
    sites, _, _ = tagger.assign(messages, view.known, view.counter, estimate)
    by_number, protected_from, _newest = _protection(sites, _protected_count(p))
    return View(view.pk, view.project_id, view.state, view.counter, view.all_messages, view.sync, int(folded),
                 messages, msg_tokens, view.known, sites, view.new_tags, by_number, protected_from, view.newest,
                 view.previews, view.stale)


__all__ = ["SKIM_FOLDED", "refold", "view"]
