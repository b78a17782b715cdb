"""Pressure reclaim: on a busting pass over the threshold, drop the oldest content down to a target.

Dropping well below the execute threshold (not just under it) is what keeps the following passes
deferred and cached: one priced bust buys many cheap passes instead of a bust every turn. Tool
outputs go first (oldest first), then assistant text, then user text (kept as a truncated turn
boundary). The newest `protected_tags` are spared unless the pass is in the ≥95% band.
"""

from __future__ import annotations

from magic_context.records import record
from magic_context.transform.drops import PLACEHOLDER_TOKENS, PREVIEW_TOKENS, default_mode
from magic_context.transform.heuristics import Drop
from magic_context.transform.tagger import Site
from magic_context.transform.tags import KIND_MEDIA, KIND_TEXT, KIND_TOOL
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

# After a reclaim the request should sit at this share of the execute threshold. 0.35 rather than 0.5:
# on the replay sweep (bench/results.md) it cost less on both workloads (Pi at 40%: 0.63 → 0.59 and
# 0.53 → 0.52 of Pi's compaction; mini-swe-agent at 65%: 0.85 → 0.77, 0.97 unchanged) with retention
# within a point or three. 0.20 rather than 0.35 (with `boundary.PROTECTED_FLOOR` 1 000 rather than 4 000)
# once the extractive historian named folded files with their directory (#13): cheaper on every session
# and window swept, retention within 3 points (bench/sweep.md, the `+files` rows; the reasons are in
# `transform.scheduler`, next to the threshold they were swept with).
TARGET_SHARE_OF_THRESHOLD: Final = 0.20


# A pass over the threshold busts only if its drops save at least this share of the threshold's tokens. A bust
# writes the whole request after the first message it changes again (1.25× the input price, against 0.1× for a
# read), so a drop-only bust that frees a few hundred tokens costs more than it saves: on pi_large-session at
# 14 400 tokens (65% threshold) mc busted for a 14-token drop on one pass and a 440-token one on the next, then
# the historian folded on the third; elsewhere a 1 800-token reclaim was followed by a fold 5 passes later.
# Held back, the pass defers (its request stays cached) until a fold or a reclaim worth the re-write comes.
# On the 12 bench rows (bench/results.md, "Small windows: held busts…") a quarter took pi_large at 14.4k from
# 0.71 to 0.68 of Pi's compaction, pi_before at 36k 0.56 → 0.54 and at 72k 0.52 → 0.51, every other row unchanged,
# retention equal or higher; a tenth left pi_large at 0.69, 0.4 matched a quarter, a half 0.68.
# A HARD fold (the cache is cold anyway), the force band and a pass that folds new compartments always bust.
MIN_GAIN_SHARE_OF_THRESHOLD: Final = 0.25


def worth_a_bust(gain_tokens: int, threshold_tokens: float) -> bool:
    """Whether drops saving `gain_tokens` pay for the bust they need (`MIN_GAIN_SHARE_OF_THRESHOLD`)."""
    return gain_tokens >= MIN_GAIN_SHARE_OF_THRESHOLD * threshold_tokens


@record(frozen=True)
class ReclaimPlan:
    drops: list[Drop]
    reclaimed_tokens: int
    target_tokens: int


def saving(site: Site) -> int:
    """Tokens a drop of this tag saves in the served request (an estimate)."""
    tag = site.tag
    if tag.kind == KIND_TOOL:
        if site.pinned:  # the call stays (drops.mode_of): only the output goes
            return max(0, tag.tokens - PLACEHOLDER_TOKENS)
        return tag.tokens + (tag.input_tokens if site.call is not None else 0)
    if tag.kind == KIND_TEXT and site.role == m.USER:
        return max(0, tag.tokens - PREVIEW_TOKENS)
    if tag.kind == KIND_MEDIA:
        return 500  # images cost far more than their empty text; a conservative flat figure
    return max(0, tag.tokens - PLACEHOLDER_TOKENS)


def _order(sites: list[Site]) -> list[Site]:
    tools = [s for s in sites if s.tag.kind == KIND_TOOL and s.results]
    media = [s for s in sites if s.tag.kind == KIND_MEDIA]
    assistant = [s for s in sites if s.tag.kind == KIND_TEXT and s.role != m.USER]
    user = [s for s in sites if s.tag.kind == KIND_TEXT and s.role == m.USER]
    return tools + media + assistant + user


def plan(sites: list[Site], usage_tokens: int, target_tokens: int, protected_from: int, *,
         include_protected: bool, floor_saving: int = 0) -> ReclaimPlan:
    """Choose drops, oldest first by lane, until the projected usage reaches the target.

    The newest message (the live turn) is never reclaimed, even in the ≥95% band.
    """
    drops: list[Drop] = []
    reclaimed = 0
    live = max((s.message_index for s in sites), default=-1)
    for site in _order(sites):
        if usage_tokens - reclaimed <= target_tokens:
            break
        if site.tag.dropped or site.message_index == live or \
                (site.tag.number >= protected_from and not include_protected):
            continue
        gain = saving(site)
        if gain <= floor_saving:
            continue
        drops.append(Drop(site, default_mode(site), "reclaim"))
        reclaimed += gain
    return ReclaimPlan(drops, reclaimed, target_tokens)


__all__ = ["MIN_GAIN_SHARE_OF_THRESHOLD", "TARGET_SHARE_OF_THRESHOLD", "ReclaimPlan", "plan", "saving",
           "worth_a_bust"]
