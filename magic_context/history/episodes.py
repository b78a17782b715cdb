"""Where the extractive historian cuts a chunk: episodes, steps, and compartments of them.

* an episode starts at every prompt a person typed that asks for something ("continue", "ok", `/cmd`
  stay with the episode before them); a leading run without a prompt is its own episode;
* a stretch no person asked for (the chunk's leading run, which continues earlier work) and an episode
  above `SPLIT_FACTOR` × the target are autonomous runs (mini-swe-agent, SWE-agent, a subagent: one
  task, then hundreds of tool calls). They are cut into steps of about `STEP_SHARE` × the target at
  natural boundaries: before an assistant message with words (the agent stating what it found or does
  next), and only where no completed tool arc is split; after twice the step size without words, before
  any assistant message; a short last step joins the one before it;
* episodes and steps are merged, in order, into compartments of about the target.

Sizes are a message's share of the rendered chunk (`Digest.rendered`, the narrative), so one huge tool
output weighs as its one-line summary. Every piece is a contiguous run of the input, in order, so the
compartments always tile it. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Sequence

from magic_context.history import boundary, wording
from magic_context.history.chunk import Digest
from magic_context.wire import model as m

SPLIT_FACTOR = 2.5
STEP_SHARE = 1 / 3
MERGE_SHARE = 1 / 3

Piece = list[Digest]


def size(d: Digest) -> int:
    """A message's weight for grouping: its share of the rendered chunk (narrative, not raw tool output)."""
    return d.rendered if d.rendered > 0 else max(8, d.tokens // 10)


def weight(piece: Sequence[Digest]) -> int:
    return sum(size(d) for d in piece)


def episodes(digests: Sequence[Digest]) -> list[Piece]:
    """Digests cut before every prompt that asks for something ("continue", "ok", `/cmd` stay with the
    episode before them); a leading run without a prompt is its own episode."""
    out: list[Piece] = []
    for d in digests:
        if not out or (d.prompt and not wording.trivial(d.text)):
            out.append([d])
        else:
            out[-1].append(d)
    return out


def steps(episode: Sequence[Digest], step: int, unsafe: frozenset[int]) -> list[Piece]:
    """A long episode cut into steps of about `step` tokens at natural, arc-safe boundaries."""
    parts: list[Piece] = [[]]
    used = 0
    for d in episode:
        current = parts[-1]
        if current and d.role == m.ASSISTANT and current[-1].ordinal not in unsafe \
                and ((used >= step and d.text) or used >= 2 * step):
            parts.append([])
            used = 0
        parts[-1].append(d)
        used += size(d)
    if len(parts) > 1 and used < step * MERGE_SHARE:
        parts[-2].extend(parts.pop())
    return parts


def group(digests: Sequence[Digest], spans: Sequence[boundary.Span], target: int) -> list[list[Piece]]:
    """Episodes (long ones as steps) merged into compartments of about `target` rendered chunk tokens;
    each compartment is the list of its pieces."""
    unsafe = boundary.unsafe_cuts(spans)
    step = max(1, round(target * STEP_SHARE))
    pieces: list[Piece] = []
    for episode in episodes(digests):
        asked = episode[0].prompt and not wording.trivial(episode[0].text)
        if not asked or weight(episode) > SPLIT_FACTOR * target:
            pieces.extend(steps(episode, step, unsafe))
        else:
            pieces.append(episode)
    groups: list[list[Piece]] = []
    used = 0
    for piece in pieces:
        piece_size = weight(piece)
        if groups and (used >= target or (used + piece_size > 1.5 * target and used >= target / 2)):
            groups.append([])
            used = 0
        if not groups:
            groups.append([])
        groups[-1].append(piece)
        used += piece_size
    return groups


__all__ = ["SPLIT_FACTOR", "STEP_SHARE", "Piece", "episodes", "group", "size", "steps", "weight"]
