"""The protected-tail boundary: which prefix of the unsummarized raw history the historian may fold.

Everything works on ordinals and TRUE raw token sizes (the raw store's `tokens`), never on user-turn
counts, so a session with few user turns cannot deadlock the historian. Rules, in order:

* the eligible head starts at `start` (the last compartment's end + 1);
* the newest message is never folded, nor any completed tool arc it belongs to;
* token mode (`protected_tail_boundary`): the newest `protect_tokens` stay raw (a size walk from the
  newest message back); with `live_prompt_floor` the newest prompt a person typed stays raw too
  (callers drop the floor in the emergency band so a long autonomous turn can still be drained). The
  floor also lets go once the live turn (that prompt and everything after it) outgrows
  `LIVE_TURN_FACTOR` × the protected tail — about the whole usable window: a long autonomous run
  (mini-swe-agent, SWE-agent, a subagent: one task prompt, hundreds of tool calls) cannot stay raw
  anyway, and holding its head back while drops keep usage below the emergency band would never fold;
* keep mode (`keep_boundary`, for `mc wrapup`): the newest `keep` messages, tool messages included;
* completed tool arcs are atomic: the boundary fences back to just before a call whose result lies
  beyond it. An OPEN arc (a call never answered) does not fence: below the live window it is a dead,
  interrupted call and compactable (fencing on it would freeze the historian for good); inside the live
  window it is already protected;
* `apply_head_cap` limits one run to a token cap, admitting an oversize leading arc whole rather than
  fencing back to an empty head.

Stdlib only: the transform pass computes its trigger figures with this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from magic_context.records import record
from magic_context.wire.arcs import find_arcs
from magic_context.wire.model import Message

PROTECTED_SHARE = 0.15
PROTECTED_CAP_SHARE = 0.40
PROTECTED_ABS_CAP = 96_000
PROTECTED_FLOOR = 1_000  # 4 000 until the sweep of #13 (`transform.reclaim.TARGET_SHARE_OF_THRESHOLD` says why)
DEFAULT_KEEP = 20
LIVE_TURN_FACTOR = 4

Span = tuple[int, int | None]
"""A tool arc as (call ordinal, last result ordinal), the result None while the call is unanswered."""


@record(frozen=True)
class TailItem:
    """One raw message of the unsummarized tail: its ordinal, true token size, and whether a person typed it."""

    ordinal: int
    tokens: int
    prompt: bool = False


@record(frozen=True)
class Boundary:
    """The eligible head `start..end` (inclusive; `end < start` means nothing is eligible) and why it ends there."""

    start: int
    end: int
    newest: int | None
    eligible_tokens: int
    eligible_messages: int
    tail_tokens: int
    reason: str

    @property
    def empty(self) -> bool:
        return self.end < self.start


def protected_tail_tokens(context_limit: int, threshold_percent: float) -> int:
    """The raw tail kept unsummarized: 15% of the usable window (limit × threshold), at least
    `PROTECTED_FLOOR` (1 000), at most 40% of the usable window and 96 000."""
    usable = context_limit * threshold_percent / 100
    return int(min(max(round(usable * PROTECTED_SHARE), PROTECTED_FLOOR), round(usable * PROTECTED_CAP_SHARE),
                   PROTECTED_ABS_CAP))


def spans_from_messages(messages: Sequence[Message]) -> list[Span]:
    """Tool arcs of canonical messages (ordinals set) as (call, result) ordinal pairs; orphans are skipped."""
    spans: list[Span] = []
    for arc in find_arcs(list(messages)):
        if arc.call is None:
            continue
        result = max((messages[mi].ordinal for mi, _ in arc.results), default=None)
        spans.append((messages[arc.call[0]].ordinal, result))
    return spans


def completed(spans: Iterable[Span]) -> list[tuple[int, int]]:
    return [(c, r) for c, r in spans if r is not None and r > c]


def unsafe_cuts(spans: Iterable[Span]) -> frozenset[int]:
    """Ordinals after which a cut would split a completed arc."""
    cuts: set[int] = set()
    for c, r in completed(spans):
        cuts.update(range(c, r))
    return frozenset(cuts)


def fence(end: int, spans: Iterable[Span], start: int) -> int:
    """Move `end` back until no completed arc starting at or after `start` has its call ≤ end < result."""
    arcs = sorted((c, r) for c, r in completed(spans) if c >= start)
    moved = True
    while moved:
        moved = False
        for c, r in arcs:
            if c <= end < r:
                end, moved = c - 1, True
    return max(end, start - 1)


def component_end(first: int, spans: Iterable[Span]) -> int:
    """The last ordinal of the atomic unit starting at `first` (its overlapping completed arcs, transitively)."""
    arcs = sorted(completed(spans))
    end, grew = first, True
    while grew:
        grew = False
        for c, r in arcs:
            if first <= c <= end < r:
                end, grew = r, True
    return end


def _result(items: list[TailItem], start: int, end: int, tail: int, reason: str) -> Boundary:
    chosen = [i for i in items if start <= i.ordinal <= end]
    newest = items[-1].ordinal if items else None
    return Boundary(start, end, newest, sum(i.tokens for i in chosen), len(chosen), tail, reason)


def _newest_guard(items: list[TailItem], spans: Sequence[Span], limit: int) -> tuple[int, str | None]:
    newest = items[-1].ordinal
    reason = None
    if limit >= newest:
        limit, reason = newest - 1, "the newest message stays raw"
    for c, r in completed(spans):
        if c <= newest <= r and limit >= c:
            limit, reason = c - 1, "the newest message's tool arc stays raw"
    return limit, reason


def _guarded(tail: list[TailItem], spans: Sequence[Span], start: int, limit: int, *, total: int,
             reason: str) -> Boundary:
    """The boundary at `limit` after the newest-message guard, fenced back so no tool arc is split."""
    limit, why = _newest_guard(tail, spans, limit)
    reason = why or reason
    fenced = fence(limit, spans, start)
    if fenced != limit:
        reason += f"; fenced back to {fenced} to keep a tool arc whole"
    return _result(tail, start, fenced, total, reason)


def protected_tail_boundary(items: Iterable[TailItem], spans: Sequence[Span], *, start: int, protect_tokens: int,
                            live_prompt_floor: bool = True) -> Boundary:
    """Token mode: keep the newest `protect_tokens` (and, with the floor, the newest prompt) raw."""
    tail = sorted((i for i in items if i.ordinal >= start), key=lambda i: i.ordinal)
    total = sum(i.tokens for i in tail)
    if not tail:
        return Boundary(start, start - 1, None, 0, 0, 0, "no unsummarized history")
    kept, protect_from = 0, tail[-1].ordinal
    for item in reversed(tail):
        if kept >= protect_tokens:
            break
        kept += item.tokens
        protect_from = item.ordinal
    limit, reason = protect_from - 1, f"protected tail of {kept} tokens (target {protect_tokens})"
    if live_prompt_floor:
        prompts = [i.ordinal for i in tail if i.prompt]
        if prompts and prompts[-1] - 1 < limit:
            turn = sum(i.tokens for i in tail if i.ordinal >= prompts[-1])
            if turn <= LIVE_TURN_FACTOR * max(protect_tokens, PROTECTED_FLOOR):
                limit, reason = prompts[-1] - 1, f"the live prompt at {prompts[-1]} stays raw"
            else:
                reason += f"; the live turn from {prompts[-1]} ({turn} tokens) is too long to stay raw"
    return _guarded(tail, spans, start, limit, total=total, reason=reason)


def keep_boundary(items: Iterable[TailItem], spans: Sequence[Span], *, start: int,
                  keep: int = DEFAULT_KEEP) -> Boundary:
    """Keep mode (`mc wrapup --keep N`): the newest `keep` messages stay raw, tool arcs intact."""
    tail = sorted((i for i in items if i.ordinal >= start), key=lambda i: i.ordinal)
    total = sum(i.tokens for i in tail)
    if len(tail) <= keep:
        return Boundary(start, start - 1, tail[-1].ordinal if tail else None, 0, 0, total,
                        f"only {len(tail)} unsummarized messages (keeping {keep})")
    limit = tail[-keep - 1].ordinal if keep > 0 else tail[-1].ordinal
    reason = f"keeping the newest {keep} messages"
    return _guarded(tail, spans, start, limit, total=total, reason=reason)


def apply_head_cap(sizes: Sequence[tuple[int, int]], spans: Sequence[Span], start: int, end: int, cap: int) -> int:
    """The last ordinal of a run capped at `cap` tokens over `sizes` ((ordinal, tokens), ascending).

    The cap never splits a completed arc; when it lands inside the first atomic unit (an arc larger
    than the cap), that unit is admitted whole instead of leaving an empty head.
    """
    window = [(o, t) for o, t in sizes if start <= o <= end]
    if not window:
        return start - 1
    used, last = 0, start - 1
    for ordinal, size in window:
        if used + size > cap and last >= start:
            break
        used += size
        last = ordinal
    if last == window[-1][0]:
        return last
    fenced = fence(last, spans, start)
    if fenced < window[0][0]:
        fenced = min(end, max(window[0][0], component_end(window[0][0], spans)))
    return fenced


__all__ = [
    "DEFAULT_KEEP",
    "LIVE_TURN_FACTOR",
    "Boundary",
    "Span",
    "TailItem",
    "apply_head_cap",
    "completed",
    "component_end",
    "fence",
    "keep_boundary",
    "protected_tail_boundary",
    "protected_tail_tokens",
    "spans_from_messages",
    "unsafe_cuts",
]
