"""Strict validation of parsed historian output against the chunk it was given (reference §4.3).

Steps, in order: (1) at least one compartment; (2) heal gaps that lie wholly in tool-only
ordinals by extending the previous compartment (narrative gaps are rejected); (3) extend the last
compartment so its end never splits a completed tool call/result arc; (4) every compartment has a
non-empty p1 or is lean (p2 and p3 only: code adds p1 and p4, `tiers.fill`), start ≤ end, lies inside
the chunk and starts exactly where the previous one ended;
(5) `<unprocessed_from>` is chunk_end + 1 or the next uncovered ordinal; (6) keep the first primer;
(7) discard the last compartment when it had ≤ 2 messages of lookahead (re-read next run).
A failure raises `HistorianValidationError`, whose message is written to go back to the model
verbatim in the one repair prompt. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

from magic_context.errors import MCError
from magic_context.history.parse import (
    ParsedCompartment,
    ParsedEvent,
    ParsedFact,
    ParsedOutput,
    ParsedPrimer,
    parse_historian_output,
)
from magic_context.records import record, replace

HISTORIAN_BOUNDARY_HEALING_SLACK = 2
"""Lookahead (messages after the last compartment) at or below which the last one is re-read."""

ToolOnly = Callable[[int], bool] | Container[int] | None
"""Which ordinals are tool-only: a predicate, or any container (set, range, frozenset)."""
Arc = tuple[int, int]
"""A completed tool arc as (call ordinal, result ordinal)."""


class HistorianValidationError(MCError):
    """The historian's answer cannot be published; `message` is phrased for the repair prompt.

    `code` names the failed rule: no_compartments, truncated, missing_p1, invalid_range,
    outside_chunk, overlap, gap, unprocessed_from, uncovered, arc_split.
    """

    def __init__(self, message: str, *, code: str = "invalid", truncated: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.truncated = truncated


@record(frozen=True)
class ValidatedOutput:
    """What may be published. `compartments` are healed, contiguous and start at the chunk start.

    `next_start` is the first ordinal the next historian run must read. When the last compartment
    was discarded (`discarded`), `promote_unanchored` is False: facts, user observations and
    unanchored primers may describe the discarded tail and would be stored twice when it is
    re-read, so the publisher should skip promoting them this run.
    """

    compartments: tuple[ParsedCompartment, ...]
    facts: tuple[ParsedFact, ...]
    events: tuple[ParsedEvent, ...]
    user_observations: tuple[str, ...]
    primer: ParsedPrimer | None
    unprocessed_from: int | None
    next_start: int
    discarded: ParsedCompartment | None = None
    promote_unanchored: bool = True
    healed_gaps: tuple[Arc, ...] = ()
    terminal_extended_to: int | None = None
    dropped_facts: int = 0
    truncated: bool = False
    warnings: tuple[str, ...] = ()


def _predicate(tool_only: ToolOnly) -> Callable[[int], bool]:
    if tool_only is None:
        return lambda _ordinal: False
    if callable(tool_only):
        return tool_only
    return tool_only.__contains__


def _splits(boundary: int, arcs: Iterable[Arc]) -> bool:
    # A boundary b sits between b-1 and b; it splits an arc whose call is before it and result at/after it.
    return any(call < boundary <= result for call, result in arcs)


def _fail(message: str, code: str, truncated: bool = False) -> HistorianValidationError:
    return HistorianValidationError(message, code=code, truncated=truncated)


def _heal_gaps(
    comps: list[ParsedCompartment], chunk_start: int, chunk_end: int, trailing_limit: int,
    is_tool_only: Callable[[int], bool],
) -> list[Arc]:
    healed: list[Arc] = []

    def tool_only_gap(first: int, last: int) -> bool:
        return chunk_start <= first <= last <= chunk_end and all(is_tool_only(o) for o in range(first, last + 1))

    if comps[0].start > chunk_start and tool_only_gap(chunk_start, comps[0].start - 1):
        healed.append((chunk_start, comps[0].start - 1))
        comps[0] = replace(comps[0], start=chunk_start)
    for i in range(1, len(comps)):
        first, last = comps[i - 1].end + 1, comps[i].start - 1
        if first <= last and tool_only_gap(first, last):
            healed.append((first, last))
            comps[i - 1] = replace(comps[i - 1], end=last)
    first = comps[-1].end + 1
    if first <= trailing_limit and tool_only_gap(first, trailing_limit):
        healed.append((first, trailing_limit))
        comps[-1] = replace(comps[-1], end=trailing_limit)
    return healed


def _extend_terminal(comps: list[ParsedCompartment], arcs: list[Arc], chunk_end: int) -> int | None:
    original = comps[-1].end
    end = original
    while True:
        crossing = [result for call, result in arcs if result <= chunk_end and call < end + 1 <= result]
        if not crossing or max(crossing) <= end:
            break
        end = max(crossing)
    if end == original:
        return None
    comps[-1] = replace(comps[-1], end=end)
    return end


def _check_ranges(comps: list[ParsedCompartment], chunk_start: int, chunk_end: int) -> int:
    expected = chunk_start
    for index, c in enumerate(comps, 1):
        where = f"compartment {index} ({c.start}-{c.end})"
        if not (c.p1 or "").strip() and not c.lean:
            raise _fail(f"{where} is missing the tiered paraphrase structure; re-emit it with its tiers "
                        "<p2>…</p2><p3>…</p3>", "missing_p1")
        if c.end < c.start:
            raise _fail(f"{where} has an invalid range: end is before start", "invalid_range")
        if c.start < chunk_start or c.end > chunk_end:
            raise _fail(f"{where} is outside the chunk {chunk_start}-{chunk_end}", "outside_chunk")
        if c.start < expected:
            raise _fail(f"overlap before message {expected}: {where} starts inside the previous compartment; "
                        "compartments must not overlap", "overlap")
        if c.start > expected:
            raise _fail(f"gap before message {c.start} (expected {expected}): messages {expected}-{c.start - 1} "
                        "contain narrative and must belong to a compartment", "gap")
        expected = c.end + 1
    return expected


def _check_unprocessed(unprocessed: int | None, expected: int, chunk_start: int, chunk_end: int) -> None:
    if unprocessed is None:
        if expected <= chunk_end:
            raise _fail(f"output left uncovered messages {expected}-{chunk_end} without <unprocessed_from>; "
                        f"cover them or end with <unprocessed_from>{expected}</unprocessed_from>", "uncovered")
        return
    if unprocessed == chunk_end + 1:
        return
    if not chunk_start <= unprocessed <= chunk_end:
        raise _fail(f"<unprocessed_from> {unprocessed} is outside chunk {chunk_start}-{chunk_end}", "unprocessed_from")
    if unprocessed != expected:
        raise _fail(f"<unprocessed_from> {unprocessed} does not match the next uncovered message {expected}",
                    "unprocessed_from")


def validate_historian_output(
    output: ParsedOutput | str,
    chunk_start: int,
    chunk_end: int,
    *,
    tool_only: ToolOnly = None,
    tool_arcs: Iterable[Arc] = (),
    emergency: bool = False,
    accept_truncated: bool = False,
) -> ValidatedOutput:
    """Validate (and heal) one historian answer for the chunk `chunk_start..chunk_end` (inclusive).

    `tool_only` says which ordinals carry no narrative; `tool_arcs` are completed (call, result)
    pairs. `emergency` disables discard-last. Truncated output is rejected unless
    `accept_truncated`, in which case the complete compartments are kept and the rest is unprocessed.
    """
    parsed = parse_historian_output(output) if isinstance(output, str) else output
    comps = sorted(parsed.compartments, key=lambda c: c.start)
    warnings = list(parsed.warnings)
    if not comps:
        hint = " (the output was cut off before the first </compartment>)" if parsed.truncated else ""
        raise _fail(f"Historian returned no usable compartments{hint}", "no_compartments", parsed.truncated)
    unprocessed = parsed.unprocessed_from
    if parsed.truncated:
        if not accept_truncated:
            raise _fail(f"the output was cut off after compartment {comps[-1].start}-{comps[-1].end} (missing closing "
                        "tags); return the full XML, shorter, and mark anything left with <unprocessed_from>",
                        "truncated", True)
        unprocessed = None
    is_tool_only = _predicate(tool_only)
    arcs = [(min(a, b), max(a, b)) for a, b in tool_arcs]
    limit = unprocessed - 1 if unprocessed is not None and unprocessed <= chunk_end else chunk_end
    healed = _heal_gaps(comps, chunk_start, chunk_end, limit, is_tool_only)
    extended = _extend_terminal(comps, arcs, chunk_end)
    if extended is not None and unprocessed is not None:
        unprocessed = max(unprocessed, extended + 1)
    expected = _check_ranges(comps, chunk_start, chunk_end)
    if parsed.truncated:
        unprocessed = expected
    elif unprocessed == chunk_end + 1 and expected <= chunk_end:
        warnings.append(f"<unprocessed_from> claimed the chunk was done but {expected}-{chunk_end} are uncovered")
        unprocessed = expected
    _check_unprocessed(unprocessed, expected, chunk_start, chunk_end)
    if _splits(comps[-1].end + 1, arcs):
        raise _fail(f"the terminal boundary after message {comps[-1].end} splits a completed tool call/result arc; "
                    "end the last compartment after the tool result", "arc_split")
    primers = parsed.primers[:1]
    events = list(parsed.events)
    discarded = None
    if not emergency and len(comps) >= 2 and chunk_end - comps[-1].end <= HISTORIAN_BOUNDARY_HEALING_SLACK \
            and not _splits(comps[-2].end + 1, arcs):
        discarded = comps.pop()
        index = len(comps) + 1
        events = [e for e in events if e.at_compartment != index]
        primers = [p for p in primers if p.at_compartment is not None
                   and not discarded.start <= p.at_compartment <= discarded.end]
        unprocessed = discarded.start
    comps = [replace(c, importance=max(1, min(100, c.importance))) if c.importance is not None else c for c in comps]
    return ValidatedOutput(
        compartments=tuple(comps),
        facts=tuple(parsed.facts),
        events=tuple(events),
        user_observations=tuple(parsed.user_observations),
        primer=primers[0] if primers else None,
        unprocessed_from=unprocessed,
        next_start=comps[-1].end + 1,
        discarded=discarded,
        promote_unanchored=discarded is None,
        healed_gaps=tuple(healed),
        terminal_extended_to=extended,
        dropped_facts=parsed.dropped_facts,
        truncated=parsed.truncated,
        warnings=tuple(warnings),
    )


def validate_stored_compartments(ranges: Iterable[Any], *, tool_only: ToolOnly = None) -> None:
    """Stored rows must start at 1 and be contiguous, allowing gaps that are wholly tool-only.

    `ranges` holds (start, end) pairs or rows with `start_ordinal`/`end_ordinal`; raises on failure.
    """
    is_tool_only = _predicate(tool_only)
    expected = 1
    for item in ranges:
        if isinstance(item, tuple):
            start, end = item
        else:
            start, end = item["start_ordinal"], item["end_ordinal"]
        if start > expected and all(is_tool_only(o) for o in range(expected, start)):
            expected = start
        if start != expected:
            kind = "overlap" if start < expected else "gap"
            raise _fail(f"{kind} before message {max(start, expected)} (saw {start}-{end}, expected {expected})", kind)
        if end < start:
            raise _fail(f"invalid range {start}-{end}", "invalid_range")
        expected = end + 1


__all__ = [
    "HISTORIAN_BOUNDARY_HEALING_SLACK",
    "Arc",
    "HistorianValidationError",
    "ToolOnly",
    "ValidatedOutput",
    "validate_historian_output",
    "validate_stored_compartments",
]
