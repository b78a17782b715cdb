"""When to start the historian (reference §4.4), decided from figures the transform pass already holds.

`evaluate` reads no database: the pass hands it the usage, the window, the execute threshold and the
unsummarized tail's size (`tail_figures` measures that tail from the pass's decoded messages and their
raw token sizes). Checks, in order (the first that applies decides):

1. a run already holds the session's lease → no fire;
2. nothing eligible in front of the protected tail → no fire;
3. usage ≥ 80% (`FORCE_PERCENT`) → fire ("force_80"), unless the projected post-drop usage is at or
   below threshold × 0.75 (drops alone fix it);
4. commit clusters ≥ `min_clusters` and tail ≥ trigger_budget → fire ("commit_clusters");
5. tail ≥ 3 × trigger_budget → fire ("tail_size");
6. the pass busts anyway (execute, HARD fold, force band) and the tail is ≥ `RIDE_BUST_SHARE` of the
   threshold's tokens → fire ("rides_bust"): the fold rides a re-write the pass pays for already rather
   than a later bust of its own, and the tool arcs that bust removes are named by a compartment before
   they are gone (sqlfluff @ 10k lost three paths for 22 passes between their drop and the next fold);
7. usage ≥ threshold − 2 with a tail of ≥ 6 000 tokens and ≥ 12 messages, unless drops suffice → fire
   ("proactive").

trigger_budget = clamp(round(limit × threshold% × 0.05), 5 000, 50 000). `emergency` (usage ≥ the
force-materialize band, max(85, threshold + 2)%) tells the runner to drop the live-prompt floor and
the discard-last healing. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Sequence

from magic_context.history import boundary
from magic_context.history.chunk import commit_clusters_of, is_prompt
from magic_context.records import record
from magic_context.wire.model import Message

PROACTIVE_OFFSET_PERCENT = 2
POST_DROP_TARGET_RATIO = 0.75
MIN_PROACTIVE_TAIL_TOKENS = 6_000
MIN_PROACTIVE_TAIL_MESSAGES = 12
TAIL_SIZE_MULTIPLIER = 3
FORCE_PERCENT = 80
FORCE_MATERIALIZE_PERCENT = 85
BUDGET_SHARE = 0.05
BUDGET_MIN = 5_000
BUDGET_MAX = 50_000
RIDE_BUST_SHARE = 0.25
"""Of the threshold's tokens: the eligible head a pass that busts anyway folds (rule 6)."""


@record(frozen=True)
class TriggerDecision:
    """Whether to fire, why (a stable word for reports), and the figures the decision used."""

    fire: bool
    reason: str
    usage_percent: float
    trigger_budget: int
    emergency: bool = False


@record(frozen=True)
class TailFigures:
    """The unsummarized tail as the trigger needs it; `boundary` is the eligible head it measured."""

    tokens: int
    messages: int
    commit_clusters: int
    boundary: boundary.Boundary


def trigger_budget(context_limit: int, threshold_percent: float) -> int:
    """clamp(round(context_limit × threshold% × 0.05), 5 000, 50 000)."""
    return max(BUDGET_MIN, min(BUDGET_MAX, round(context_limit * threshold_percent / 100 * BUDGET_SHARE)))


def emergency_percent(threshold_percent: float) -> float:
    """The band where folding may cross the live prompt: 85% at the default threshold, threshold + 2 above 83%."""
    return max(FORCE_MATERIALIZE_PERCENT, threshold_percent + PROACTIVE_OFFSET_PERCENT)


def tail_figures(messages: Sequence[Message], sizes: Sequence[int], *, last_end: int | None, context_limit: int,
                 threshold_percent: float, usage_tokens: int | None = None,
                 protect_tokens: int | None = None) -> TailFigures:
    """Measure the eligible head from the pass's decoded messages (ordinals set by raw sync) and their sizes.

    `last_end` is the last compartment's end ordinal (None: no compartment yet). The live-prompt floor
    applies below the emergency band.
    """
    start = 0 if last_end is None else last_end + 1
    pairs = [(msg, size) for msg, size in zip(messages, sizes, strict=True) if msg.ordinal >= start]
    tail = [msg for msg, _ in pairs]
    items = [boundary.TailItem(msg.ordinal, size, is_prompt(msg)) for msg, size in pairs]
    spans = boundary.spans_from_messages(tail)
    usage = 100 * (usage_tokens or 0) / context_limit if context_limit else 0.0
    protect = boundary.protected_tail_tokens(context_limit, threshold_percent) if protect_tokens is None \
        else protect_tokens
    bound = boundary.protected_tail_boundary(items, spans, start=start, protect_tokens=protect,
                                             live_prompt_floor=usage < emergency_percent(threshold_percent))
    clusters = 0
    # Clusters only decide once the eligible head reaches the trigger budget: skip the scan below it.
    if not bound.empty and bound.eligible_tokens >= trigger_budget(context_limit, threshold_percent):
        clusters = commit_clusters_of(msg for msg in tail if msg.ordinal <= bound.end)
    return TailFigures(bound.eligible_tokens, bound.eligible_messages, clusters, bound)


def evaluate(*, usage_tokens: int, context_limit: int, threshold_percent: float, tail_tokens: int,
             tail_messages: int, commit_clusters: int = 0, min_clusters: int = 3, clusters_enabled: bool = True,
             projected_tokens: int | None = None, running: bool = False, busting: bool = False) -> TriggerDecision:
    """Decide whether to start the historian now (see the module rules).

    usage_tokens       the prompt size this pass (provider-reported, else estimated)
    context_limit      the model's window in tokens
    threshold_percent  the execute threshold (default 40; 65 for OpenAI Chat callers)
    tail_tokens        true raw tokens of the eligible head (`TailFigures.tokens`)
    tail_messages      messages in the eligible head
    commit_clusters    committed work phases in the eligible head
    projected_tokens   usage after the drops this pass can apply (None: unknown)
    running            a historian run holds the lease (`runner.is_running`)
    busting            this pass re-writes the prefix anyway (`Schedule.bust`)
    """
    budget = trigger_budget(context_limit, threshold_percent)
    usage = 100 * usage_tokens / context_limit if context_limit > 0 else 0.0
    emergency = usage >= emergency_percent(threshold_percent)

    def decision(fire: bool, reason: str) -> TriggerDecision:
        return TriggerDecision(fire, reason, round(usage, 2), budget, emergency)

    if running:
        return decision(False, "running")
    if tail_messages <= 0 or tail_tokens <= 0:
        return decision(False, "no_eligible_tail")
    target = threshold_percent * POST_DROP_TARGET_RATIO
    drops_suffice = projected_tokens is not None and context_limit > 0 and \
        100 * projected_tokens / context_limit <= target
    if usage >= FORCE_PERCENT:
        return decision(not drops_suffice, "drops_suffice" if drops_suffice else "force_80")
    if clusters_enabled and commit_clusters >= min_clusters and tail_tokens >= budget:
        return decision(True, "commit_clusters")
    if tail_tokens >= TAIL_SIZE_MULTIPLIER * budget:
        return decision(True, "tail_size")
    if busting and tail_tokens >= RIDE_BUST_SHARE * context_limit * threshold_percent / 100:
        return decision(True, "rides_bust")
    if usage < threshold_percent - PROACTIVE_OFFSET_PERCENT:
        return decision(False, "below_threshold")
    if drops_suffice:
        return decision(False, "drops_suffice")
    if tail_tokens < MIN_PROACTIVE_TAIL_TOKENS or tail_messages < MIN_PROACTIVE_TAIL_MESSAGES:
        return decision(False, "tail_too_small")
    return decision(True, "proactive")


__all__ = [
    "FORCE_PERCENT",
    "MIN_PROACTIVE_TAIL_MESSAGES",
    "MIN_PROACTIVE_TAIL_TOKENS",
    "RIDE_BUST_SHARE",
    "TAIL_SIZE_MULTIPLIER",
    "TailFigures",
    "TriggerDecision",
    "emergency_percent",
    "evaluate",
    "tail_figures",
    "trigger_budget",
]
