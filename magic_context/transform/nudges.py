"""ctx_reduce nudges, Channel 1 and Channel 2 (reference §8), appended replay-stably.

Measured over the served tail: T = active tagged mass, U = active unprotected tool-output mass,
s = U/T. A fired nudge is anchored to the part it was appended to and re-appended on every later
pass, so it never moves bytes that were already sent.
"""

from __future__ import annotations

from magic_context.records import record
from magic_context.transform.tagger import Site
from magic_context.transform.tags import KIND_TOOL
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

MIN_TAIL: Final = 60_000
MIN_RECLAIMABLE: Final = 25_000
LEVELS: Final = ((0.6, "urgent"), (0.4, "firm"), (0.2, "gentle"))
RANK: Final = {None: 0, "gentle": 1, "firm": 2, "urgent": 3}
CHANNEL2_RECLAIMABLE: Final = 50_000
CHANNEL2_SHARE: Final = 0.75
MAX_ANCHORS: Final = 64


@record(frozen=True)
class Measure:
    tail: int
    reclaimable: int
    candidates: list[Site]

    @property
    def share(self) -> float:
        return self.reclaimable / self.tail if self.tail else 0.0


def measure(sites: list[Site], protected_from: int) -> Measure:
    active = [s for s in sites if not s.tag.dropped]
    candidates = [s for s in active if s.tag.kind == KIND_TOOL and s.results and s.tag.number < protected_from]
    return Measure(sum(s.tag.tokens for s in active), sum(s.tag.tokens for s in candidates), candidates)


def _level(share: float) -> str | None:
    return next((name for bound, name in LEVELS if share >= bound), None)


def _listing(candidates: list[Site]) -> str:
    items = [f"§{s.tag.number}§ {s.tag.tool_name or 'tool'}" for s in candidates[:4]]
    return "oldest reclaimable: " + " · ".join(items) + (" · …" if len(candidates) > 4 else "")


def channel1_text(level: str, sticky: bool, meas: Measure) -> str:
    what = f"{len(meas.candidates)} spent tool outputs (~{round(meas.reclaimable / 1000)}k tokens)"
    if sticky:
        head = f"Reminder: {what} are still reclaimable — ctx_reduce them at a natural stopping point."
    elif level == "urgent":
        head = f"Housekeeping backlog: {what} are reclaimable — a ctx_reduce pass is due."
    elif level == "firm":
        head = f"Housekeeping: {what} are reclaimable — make a ctx_reduce pass at a natural stopping point."
    else:
        head = (f"Housekeeping: {what} are reclaimable — drop the ones you have already processed with ctx_reduce "
                "at a natural stopping point.")
    return f"\n\n<system-reminder>\n{head}\n{_listing(meas.candidates)}\n</system-reminder>"


def channel2_text(meas: Measure) -> str:
    count, k = len(meas.candidates), round(meas.reclaimable / 1000)
    return (f"\n\n<system-reminder>\nRoutine housekeeping: {count} spent tool outputs (~{k}k tokens) are reclaimable "
            f"— make a ctx_reduce pass at a natural stopping point. {_listing(meas.candidates)}\n</system-reminder>")


def decide(meas: Measure, state: dict[str, Any], *, quiet: bool) -> str | None:
    """Return the nudge text to fire now (or None), updating `state` (level, last U, channel 2 claim)."""
    last_level = state.get("level")
    last_u = int(state.get("last_u", 0))
    if meas.reclaimable < last_u:  # U shrank (drops landed): the cycle resets
        state.update(level=None, last_u=meas.reclaimable)
        last_level, last_u = None, meas.reclaimable
    if quiet:
        state.update(level=None, last_u=meas.reclaimable)
        return None
    if meas.tail >= MIN_TAIL and meas.reclaimable >= CHANNEL2_RECLAIMABLE and meas.share >= CHANNEL2_SHARE:
        if not state.get("channel2"):
            state["channel2"] = True
            return channel2_text(meas)
    elif state.get("channel2") and meas.share < CHANNEL2_SHARE:
        state["channel2"] = False
    if meas.tail < MIN_TAIL or meas.reclaimable < MIN_RECLAIMABLE:
        return None
    level = _level(meas.share)
    if level is None:
        return None
    escalated = RANK[level] > RANK.get(last_level, 0)
    grown = meas.reclaimable - last_u >= max(MIN_RECLAIMABLE, round(0.08 * meas.tail))
    if not (escalated or grown):
        return None
    state.update(level=level, last_u=meas.reclaimable)
    return channel1_text(level, not escalated, meas)


def anchor_block(message: m.Message) -> m.Block | None:
    """The last text or tool-output part of the newest message: where a fired nudge is appended."""
    for block in reversed(message.blocks):
        if block.kind in (m.TEXT, m.TOOL_RESULT):
            return block
    return None


def replay(messages: list[m.Message], anchors: list[dict[str, str]]) -> None:
    """Re-append every stored nudge to its anchor part, when that part is still present."""
    if not anchors:
        return
    wanted: dict[str, list[str]] = {}
    for item in anchors:
        wanted.setdefault(item["key"], []).append(item["text"])
    for message in messages:
        for block in message.blocks:
            texts = wanted.get(f"{message.id}:{block.key}")
            if texts and block.kind in (m.TEXT, m.TOOL_RESULT):
                block.text += "".join(texts)


def fire(messages: list[m.Message], anchors: list[dict[str, str]], text: str) -> bool:
    """Append a new nudge to the newest message and remember its anchor; False when there is no anchor."""
    for message in reversed(messages):
        if message.synthetic:
            continue
        block = anchor_block(message)
        if block is None:
            return False
        block.text += text
        anchors.append({"key": f"{message.id}:{block.key}", "text": text})
        del anchors[:-MAX_ANCHORS]
        return True
    return False


__all__ = ["Measure", "anchor_block", "channel1_text", "channel2_text", "decide", "fire", "measure", "replay"]
