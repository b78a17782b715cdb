"""Baseline context strategies a replay compares mc against, simulated on canonical messages.

* `raw`: the whole history every time; no management (passes over the window are only counted).
* `native`: what OpenCode / Claude Code do: when a request passes 85% of the window, everything but
  a recent tail (≤ 20% of the window, cut only between tool arcs, never inside one) is replaced by
  one ~2 000-token summary message (10% of windows under 20 000 tokens), written by an extra LLM
  call that reads the whole request; the history then grows from there, and the next overflow
  summarizes again.
* `masking`: observation masking: all but the newest 10 tool outputs are replaced by a placeholder,
  with the same overflow compaction.
* `clear-tool-uses`: Anthropic context editing (`clear_tool_uses_20250919`): once the request passes
  the trigger (100 000 input tokens on a 200k window, so half the window when it is smaller) all
  but the newest 3 tool results are cleared, only when that clears at least 5 000 tokens; the same
  overflow compaction applies when the edited request still passes 85%.

Leading system messages (OpenAI) always stay in front; the summary follows them.
"""

from __future__ import annotations

from typing import Final

from magic_context.records import Factory, record
from magic_context.replay.units import MESSAGE_OVERHEAD, TokenCounter, Unit
from magic_context.wire import arcs
from magic_context.wire import model as m

COMPACT_AT: Final = 0.85
TAIL_SHARE: Final = 0.20
SUMMARY_TOKENS: Final = 2000
SUMMARY_PROMPT_TOKENS: Final = 200  # the summarization instruction appended to the request
MASK_KEEP: Final = 10
MASK_PLACEHOLDER: Final = "[Old tool result content cleared]"
CLEAR_TRIGGER: Final = 100_000
CLEAR_TRIGGER_SHARE: Final = 0.5  # 100k of the 200k window the default was designed for
CLEAR_KEEP: Final = 3
CLEAR_AT_LEAST: Final = 5000
CLEAR_PLACEHOLDER: Final = "[tool result cleared by context editing]"
BASELINES: Final = ("native", "masking", "clear-tool-uses", "raw")


@record
class ExtraCall:
    """A strategy's own LLM call (a compaction summary): its request and its output tokens."""

    units: list[Unit]
    output_tokens: int


@record
class Served:
    """One pass: the request the strategy sends, and the extra calls it made first."""

    units: list[Unit]
    extra: list[ExtraCall] = Factory(factory=list)
    compacted: bool = False
    edited: bool = False

    @property
    def tokens(self) -> int:
        return sum(u[1] for u in self.units)


def _tool_results(messages: list[m.Message]) -> list[tuple[int, int]]:
    return [(i, j) for i, msg in enumerate(messages) for j, b in enumerate(msg.blocks) if b.kind == m.TOOL_RESULT]


def _starts_arc_free(msg: m.Message) -> bool:
    return msg.role != m.TOOL and not any(b.kind == m.TOOL_RESULT for b in msg.blocks)


def valid_cuts(messages: list[m.Message], lo: int) -> list[int]:
    """Indexes i > lo where the history may be cut (messages[i:] kept) without splitting a tool arc."""
    blocked = [False] * (len(messages) + 1)
    for arc in arcs.find_arcs(messages):
        if arc.call is None or not arc.results:
            continue
        last = max(r[0] for r in arc.results)
        for i in range(arc.call[0] + 1, last + 1):
            blocked[i] = True
    return [i for i in range(lo + 1, len(messages))
            if not blocked[i] and _starts_arc_free(messages[i]) and messages[i].role != m.SYSTEM]


class Baseline:
    """One baseline strategy; `serve(history)` is called with the growing history, pass after pass."""

    def __init__(self, name: str, counter: TokenCounter, window: int, system: list[Unit] | None = None) -> None:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}")
        self.name = name
        self.counter = counter
        self.window = window
        self.system = list(system or [])
        self.compacts = name != "raw"
        self.boundary = 0  # history[boundary:] is served after the summary (0: no summary yet)
        self.summaries = 0
        self.clear_trigger = min(CLEAR_TRIGGER, int(CLEAR_TRIGGER_SHARE * window))
        self.summary_tokens = min(SUMMARY_TOKENS, window // 10)
        self._clear_tokens = counter.text(CLEAR_PLACEHOLDER)

    # -- the served view ---------------------------------------------------------------------
    def _lead(self, history: list[m.Message]) -> int:
        lead = 0
        while lead < len(history) and history[lead].role == m.SYSTEM:
            lead += 1
        return lead

    def _request(self, history: list[m.Message]) -> tuple[list[Unit], bool]:
        lead = self._lead(history)
        visible = history[max(self.boundary, lead):]
        head = [*self.system, *(self.counter.message(msg) for msg in history[:lead])]
        if self.summaries:
            head.append((f"{self.name}-summary-{self.summaries}", self.summary_tokens + MESSAGE_OVERHEAD))
        body = [self.counter.message(msg) for msg in visible]
        replace = self._replacements(visible, sum(u[1] for u in head) + sum(u[1] for u in body))
        if replace:
            body = [self.counter.message(msg, replace[i]) if i in replace else body[i] for i, msg in enumerate(visible)]
        return head + body, bool(replace)

    def _replacements(self, visible: list[m.Message], tokens: int) -> dict[int, dict[int, str]]:
        """Per visible message index: block index → placeholder text."""
        if self.name == "masking":
            return _group(_tool_results(visible)[:-MASK_KEEP], MASK_PLACEHOLDER)
        if self.name != "clear-tool-uses" or tokens <= self.clear_trigger:
            return {}
        targets = _tool_results(visible)[:-CLEAR_KEEP]
        freed = sum(self.counter.text(visible[i].blocks[j].text) - self._clear_tokens for i, j in targets)
        if freed < CLEAR_AT_LEAST:
            return {}
        return _group(targets, CLEAR_PLACEHOLDER)

    # -- compaction --------------------------------------------------------------------------
    def _compact(self, history: list[m.Message]) -> bool:
        """Move the boundary so only a recent tail stays; False when no cut is possible."""
        lo = max(self.boundary, self._lead(history))
        cuts = valid_cuts(history, lo)
        if not cuts:
            return False
        budget = TAIL_SHARE * self.window
        suffix = 0
        chosen = cuts[-1]
        tokens = [self.counter.message(msg)[1] for msg in history]
        position = len(history)
        for cut in reversed(cuts):
            suffix += sum(tokens[cut:position])
            position = cut
            if suffix > budget:
                break
            chosen = cut
        self.boundary = chosen
        self.summaries += 1
        return True

    def serve(self, history: list[m.Message]) -> Served:
        """The request for this pass (and the summary call made first, when the history overflowed)."""
        units, edited = self._request(history)
        total = sum(u[1] for u in units)
        if not self.compacts or total <= COMPACT_AT * self.window:
            return Served(units, edited=edited)
        prompt = [*units, (f"{self.name}-summarize-{self.summaries + 1}", SUMMARY_PROMPT_TOKENS)]
        if not self._compact(history):
            return Served(units, edited=edited)
        units, edited = self._request(history)
        return Served(units, [ExtraCall(prompt, self.summary_tokens)], compacted=True, edited=edited)


def _group(positions: list[tuple[int, int]], text: str) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = {}
    for i, j in positions:
        out.setdefault(i, {})[j] = text
    return out


__all__ = ["BASELINES", "CLEAR_AT_LEAST", "CLEAR_KEEP", "CLEAR_PLACEHOLDER", "CLEAR_TRIGGER", "COMPACT_AT",
           "MASK_KEEP", "MASK_PLACEHOLDER", "SUMMARY_TOKENS", "TAIL_SHARE", "Baseline", "ExtraCall", "Served",
           "valid_cuts"]
