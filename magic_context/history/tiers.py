"""The tiers code writes itself (#13): p1's record and p4's anchors, for any compartment a historian cut.

A model historian is asked only for what code cannot derive — where compartments start and end, a title,
importance, episode type, p2 (condensed: what was asked, done and decided, and why) and p3 — because what p1
and p4 list is in the chunk's digests already: each request verbatim, files read and edited, commands and
their failures, errors, commits, the agent's closing words (`extractive.record_lines`, one line per episode
or step); commits and files (`extractive.anchors`). Writing those four times over was most of a model
historian's bill (p1 alone was 42–59% of what the extractive historian writes on the Pi rows,
bench/results.md).

`fill` completes each lean compartment of a validated answer (`ParsedCompartment.lean`): p1 is the model's
p2 (its account, so a compartment rendered at tier p1 still says why) followed by the record of its range;
p4 the anchors, unless the answer gave one. The extractive historian answers in the same lean format; for
it p1 is the record alone (its p2 restates the record), so its compartments are exactly what it wrote
before (the same pieces through the same functions). A full answer (p1 given) is published as sent.
Stdlib only.
"""

from __future__ import annotations

from magic_context.history import extractive
from magic_context.history.chunk import Chunk, Digest
from magic_context.history.parse import ParsedCompartment
from magic_context.history.validate import ValidatedOutput
from magic_context.records import replace


def code_tiers(comp: ParsedCompartment, chunk: Chunk, pieces: list[list[Digest]], *,
               narrative: bool) -> ParsedCompartment:
    """`comp` with p1 (the record of its range, after its p2 when `narrative`) and a missing p4 written."""
    start, end = comp.start, comp.end
    record = extractive.record_lines([[d for d in piece if start <= d.ordinal <= end] for piece in pieces])
    account = comp.p2 or ""
    p1 = ("\n".join(filter(None, (account, record)))) if narrative else (record or comp.title)
    p4 = comp.p4 if comp.p4 is not None else \
        extractive.anchors([d for d in chunk.digests if start <= d.ordinal <= end])
    return replace(comp, p1=p1, p4=p4, content=p1)


def fill(validated: ValidatedOutput, chunk: Chunk, *, narrative: bool,
         target: int = extractive.TARGET_TOKENS) -> ValidatedOutput:
    """`validated` with every lean compartment completed by `code_tiers`; `narrative` is False for the
    extractive historian's own answer (its p1 is the record alone), True for a model's."""
    discarded = validated.discarded  # not published, but a caller may show it: complete it the same way
    if not any(c.lean for c in (*validated.compartments, *([discarded] if discarded else []))):
        return validated
    pieces = extractive.pieces(chunk, target)

    def done(c: ParsedCompartment) -> ParsedCompartment:
        return code_tiers(c, chunk, pieces, narrative=narrative) if c.lean else c

    return replace(validated, compartments=tuple(done(c) for c in validated.compartments),
                   discarded=done(discarded) if discarded else None)


__all__ = ["code_tiers", "fill"]
