"""Baseline context strategies a replay compares mc against, simulated on canonical messages.

* `raw`: the whole history every time; no management (passes over the window are only counted).
* `native` (= `native:<the recording's harness>`) and `native:claude-code|opencode|pi|codex`: the
  harness's own compaction, each with its measured trigger, tail, summary size and cache behaviour
  (`PROFILES`, every figure with its source). When a request passes the trigger, one summary call
  is made (reading the request from the prompt cache, or not), then everything before a recent tail
  (cut only between tool arcs; Codex keeps only recent user messages) is replaced by one summary
  message; the history grows from there and the next overflow summarizes again, folding the
  previous summary in. The replay cannot call a model, so the summary's *text* is extractive
  (`extractive_summary`): it is only used to measure what native retains, while its cost is the
  profile's measured size.
* `masking`: observation masking: all but the newest 10 tool outputs are replaced by a placeholder,
  with the same overflow compaction.
* `clear-tool-uses`: Anthropic context editing (`clear_tool_uses_20250919`): once the request passes
  the trigger (100 000 input tokens on a 200k window, so half the window when it is smaller) all
  but the newest 3 tool results are cleared, only when that clears at least 5 000 tokens; the same
  overflow compaction applies when the edited request still passes the trigger.

Leading system messages (OpenAI) always stay in front; the summary follows them.
"""

from __future__ import annotations

import json
from typing import Final

from magic_context.records import Factory, record
from magic_context.replay.units import MESSAGE_OVERHEAD, TokenCounter, Unit
from magic_context.wire import arcs
from magic_context.wire import model as m

SUMMARY_PROMPT_TOKENS: Final = 200  # the summarization instruction appended to the request
MASK_KEEP: Final = 10
MASK_PLACEHOLDER: Final = "[Old tool result content cleared]"
CLEAR_TRIGGER: Final = 100_000
CLEAR_TRIGGER_SHARE: Final = 0.5  # 100k of the 200k window the default was designed for
CLEAR_KEEP: Final = 3
CLEAR_AT_LEAST: Final = 5000
CLEAR_PLACEHOLDER: Final = "[tool result cleared by context editing]"
REFERENCE_WINDOW: Final = 200_000  # the window the harnesses' absolute figures are measured on


@record(frozen=True)
class NativeProfile:
    """One harness's own compaction. Shares are of the window (absolute figures over a 200k window).

    `source` names where each figure comes from; `unmeasured` lists the figures no recording or
    harness code gave us (assumed values, said so wherever the profile is shown)."""

    name: str
    trigger: float  # compacts when a request passes this share of the window
    tail: float  # recent history kept verbatim after compacting
    summary_tokens: int  # size of the summary it writes
    summary_cached: bool  # the summary call re-sends the conversation as is, so it reads it from the cache
    users_only: bool = False  # the tail keeps only user messages (Codex)
    source: str = ""
    unmeasured: tuple[str, ...] = ()  # of "trigger", "tail", "summary_tokens", "summary_cached"


# Where the figures come from. "Measured" means seen in a recording in ../shared/data/sessions; "from
# the harness's code" means read off its source or docs as described in
# shared/spec/reference/peers-and-economics.md (§ numbers below), not observed in a recording here. Only
# Pi compacts in our recordings; no Claude Code, OpenCode or Codex recording here contains a real
# compaction (the Claude Code fixture with a compact_boundary is synthetic), so their summary sizes are
# not measured: 2 000 tokens is an assumption, listed in `unmeasured`.
PROFILES: Final = {
    # Trigger (harness code): auto-compact fires 13 000 below the effective window (window − 20 000
    # reserved for the summary): 167k of 200k = 83.5% (reverse-engineered autoCompact.ts, §1.5).
    # Tail (harness code): none; the 9-section summary replaces the whole history (the ≤ 5 re-read
    # files it restores, ≤ 50k tokens, are not modelled). Summary: UNMEASURED, assumed 2 000. Cache
    # (harness code): the summary request is the conversation plus an instruction, so it reads the
    # conversation from the cache.
    "claude-code": NativeProfile(
        "native:claude-code", 0.835, 0.0, 2000, True,
        source="trigger and tail from Claude Code's reverse-engineered autoCompact.ts (peers-and-economics "
               "§1.5); summary size not measured (assumed 2 000 tokens)", unmeasured=("summary_tokens",)),
    # Trigger (harness code): overflow when input + cache.read + output > context − min(output limit, 32k):
    # 84% on a 200k window with 32k output, up to 90% with smaller output limits (compaction.ts, §1.2);
    # the lower end is used. Tail (harness docs): ~15 000 recent tokens kept verbatim
    # (compaction.keep.tokens, opencode.ai docs, §1.2) = 7.5%. Summary: UNMEASURED, assumed 2 000. Cache
    # (harness docs): the default mode sends the full conversation, so the summary call reads it from the
    # cache ("prepend" mode would not).
    "opencode": NativeProfile(
        "native:opencode", 0.84, 0.075, 2000, True,
        source="trigger from OpenCode's compaction.ts overflow rule, tail from compaction.keep.tokens "
               "(peers-and-economics §1.2); summary size not measured (assumed 2 000 tokens)",
        unmeasured=("summary_tokens",)),
    # Trigger (measured, and harness code): contextTokens > window − reserveTokens (16 384) = 91.8% of
    # 200k; in pi_before-compaction Pi compacted at 87.5% and 92.5%. Tail (measured): keepRecentTokens
    # 20 000 = 10%, and the recording kept ~10%. Summary (measured): 1 118 and 924 tokens in the
    # recording, so ~1 000. Cache (harness code): Pi serializes the history into one summarization
    # prompt, so the call reads nothing from the cache.
    "pi": NativeProfile(
        "native:pi", 0.92, 0.10, 1000, False,
        source="measured in pi_before-compaction.jsonl (compactions at 87.5%/92.5%, 1 118/924-token "
               "summaries, ~10% kept), matching Pi's reserveTokens/keepRecentTokens defaults"),
    # Trigger (harness code, as third-party analyses describe it): ~90% of the window (codex-rs
    # auto-compact limit, §1.6). Tail (harness code): the summary plus recent user messages up to
    # 20 000 tokens (codex-rs compact.rs user-message budget) = 10%, no assistant or tool messages.
    # Summary: UNMEASURED, assumed 2 000. Cache (harness code): the handoff summary is a separate request
    # (or the remote /responses/compact endpoint), so it reads nothing from the cache.
    "codex": NativeProfile(
        "native:codex", 0.90, 0.10, 2000, False, users_only=True,
        source="trigger and user-message tail from codex-rs compact.rs as third-party analyses describe it "
               "(peers-and-economics §1.6); summary size not measured (assumed 2 000 tokens)",
        unmeasured=("summary_tokens",)),
}
# The model every baseline used before the per-harness profiles; kept for a harness without one.
GENERIC: Final = NativeProfile("native", 0.85, 0.20, 2000, True, source="generic model, not measured: 85% trigger, "
                                "20% tail, 2 000-token summary", unmeasured=("trigger", "tail", "summary_tokens"))
# The harness whose compaction a recording's format stands for. mini-swe-agent (OpenAI Chat) has no
# compaction of its own: its recordings are compared with Codex, the OpenAI-format agent that has one.
HARNESS_PROFILE: Final = {m.ANTHROPIC: "claude-code", m.OPENCODE: "opencode", m.PI: "pi",
                          m.OPENAI_RESPONSES: "codex", m.OPENAI: "codex"}
NATIVES: Final = tuple(f"native:{k}" for k in PROFILES)
BASELINES: Final = ("native", *NATIVES, "masking", "clear-tool-uses", "raw")
# Kept for callers of the former single native model.
COMPACT_AT: Final = GENERIC.trigger
TAIL_SHARE: Final = GENERIC.tail
SUMMARY_TOKENS: Final = GENERIC.summary_tokens


def profile_for(name: str, harness: str | None) -> NativeProfile:
    """The compaction a baseline uses: `native:X` names it; otherwise the recording's harness's."""
    if name.startswith("native:"):
        return PROFILES[name.split(":", 1)[1]]
    key = HARNESS_PROFILE.get(harness or "")
    return PROFILES[key] if key else GENERIC


@record
class ExtraCall:
    """A strategy's own LLM call (a compaction summary): its request and its output tokens."""

    units: list[Unit]
    output_tokens: int
    cached: bool = True  # False: the call reads nothing from the prompt cache (all input uncached)


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


def _user_typed(msg: m.Message, block: m.Block) -> bool:
    return (msg.role == m.USER and block.kind == m.TEXT and not msg.synthetic and not block.synthetic
            and not (block.meta or {}).get("command"))


def extractive_summary(messages: list[m.Message], previous: str, budget: int, counter: TokenCounter) -> str:
    """The replay's stand-in for native's summary text: lines lifted from `messages` within `budget` tokens.

    The user's requests come first (newest first, up to half the budget), then the previous summary's
    lines, the assistant's words and its tool calls (newest first); the kept lines stay in their
    order. A model's summary would paraphrase; this one only keeps verbatim lines, which is what
    anchor retention can check.
    """
    users: list[str] = []
    others: list[str] = [line for line in previous.splitlines() if line]
    for msg in messages:
        for block in msg.blocks:
            if _user_typed(msg, block) and block.text.strip():
                users.append("User: " + " ".join(block.text.split())[:400])
            elif msg.role == m.ASSISTANT and block.kind == m.TEXT and block.text.strip():
                others.append("Assistant: " + " ".join(block.text.split())[:300])
            elif block.kind == m.TOOL_CALL:
                args = json.dumps(block.input, ensure_ascii=False, default=str)
                others.append(f"Called {block.tool_name}: {args[:300]}")
    kept: set[tuple[int, int]] = set()
    used = 0
    for limit, group, lines in ((budget // 2, 0, users), (budget, 1, others)):
        for index in range(len(lines) - 1, -1, -1):
            cost = counter.text(lines[index]) + 1
            if used + cost > limit:
                continue
            kept.add((group, index))
            used += cost
    chosen = [others[i] for i in range(len(others)) if (1, i) in kept]
    chosen += [users[i] for i in range(len(users)) if (0, i) in kept]
    return "\n".join(chosen)


class Baseline:
    """One baseline strategy; `serve(history)` is called with the growing history, pass after pass.

    `harness` is the recording's format: it chooses the compaction profile of `native` (and of the
    overflow compaction of masking and clear-tool-uses); `native:X` names one explicitly.
    """

    def __init__(self, name: str, counter: TokenCounter, window: int, system: list[Unit] | None = None,
                 harness: str | None = None) -> None:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}")
        self.name = name
        self.profile = profile_for(name, harness)
        self.counter = counter
        self.window = window
        self.system = list(system or [])
        self.compacts = name != "raw"
        self.boundary = 0  # history[boundary:] is served after the summary (0: no summary yet)
        self.kept_users: list[int] = []  # Codex: history indexes of the user messages kept before the boundary
        self.summaries = 0
        self.summary_text = ""
        self.clear_trigger = min(CLEAR_TRIGGER, int(CLEAR_TRIGGER_SHARE * window))
        # A replay choice, not a harness figure: in a window smaller than the 200k the sizes were seen on,
        # the summary is capped at a tenth of it (a 2 000-token summary in a 10k window would be a fifth).
        self.summary_tokens = min(self.profile.summary_tokens, window // 10)
        self._clear_tokens = counter.text(CLEAR_PLACEHOLDER)

    # -- the served view ---------------------------------------------------------------------
    def _lead(self, history: list[m.Message]) -> int:
        lead = 0
        while lead < len(history) and history[lead].role == m.SYSTEM:
            lead += 1
        return lead

    def _visible(self, history: list[m.Message]) -> list[m.Message]:
        lead = self._lead(history)
        return [history[i] for i in self.kept_users] + history[max(self.boundary, lead):]

    def _request(self, history: list[m.Message]) -> tuple[list[Unit], bool]:
        lead = self._lead(history)
        visible = self._visible(history)
        head = [*self.system, *(self.counter.message(msg) for msg in history[:lead])]
        if self.summaries:
            head.append((f"{self.name}-summary-{self.summaries}", self.summary_tokens + MESSAGE_OVERHEAD))
        body = [self.counter.message(msg) for msg in visible]
        replace = self._replacements(visible, sum(u[1] for u in head) + sum(u[1] for u in body))
        if replace:
            body = [self.counter.message(msg, replace[i]) if i in replace else body[i] for i, msg in enumerate(visible)]
        return head + body, bool(replace)

    def view(self, history: list[m.Message]) -> tuple[list[m.Message], list[str]]:
        """What the model sees on this pass (after `serve`): the messages, placeholders applied, and the
        texts beside them (the summary), for anchor retention."""
        lead = self._lead(history)
        visible = self._visible(history)
        head = list(history[:lead])
        replace = self._replacements(visible, sum(u[1] for u in self._request(history)[0]))
        body = []
        for i, msg in enumerate(visible):
            if i not in replace:
                body.append(msg)
                continue
            blocks = [m.Block(b.kind, text=replace[i][j], tool_id=b.tool_id) if j in replace[i] else b
                      for j, b in enumerate(msg.blocks)]
            body.append(m.Message(msg.id, msg.role, blocks))
        return head + body, [self.summary_text] if self.summaries else []

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
        budget = self.profile.tail * self.window
        tokens = [self.counter.message(msg)[1] for msg in history]
        if self.profile.users_only:
            if len(history) <= lo:
                return False
            users = [i for i in [*self.kept_users, *range(lo, len(history))] if history[i].role == m.USER
                     and any(_user_typed(history[i], b) for b in history[i].blocks)]
            kept: list[int] = []
            total = 0
            for i in reversed(users):
                if total + tokens[i] > budget:
                    break
                kept.insert(0, i)
                total += tokens[i]
            folded = [history[i] for i in range(lo, len(history)) if i not in kept]
            self.kept_users, self.boundary = kept, len(history)
        else:
            cuts = valid_cuts(history, lo)
            if not cuts:
                return False
            suffix = 0
            chosen = cuts[-1]  # the current turn always stays, even with no tail (Claude Code)
            position = len(history)
            for cut in reversed(cuts):
                suffix += sum(tokens[cut:position])
                position = cut
                if suffix > budget:
                    break
                chosen = cut
            folded = history[lo:chosen]
            self.boundary = chosen
        self.summaries += 1
        self.summary_text = extractive_summary(folded, self.summary_text, self.summary_tokens, self.counter)
        return True

    def serve(self, history: list[m.Message]) -> Served:
        """The request for this pass (and the summary call made first, when the history overflowed)."""
        units, edited = self._request(history)
        total = sum(u[1] for u in units)
        if not self.compacts or total <= self.profile.trigger * self.window:
            return Served(units, edited=edited)
        prompt = [*units, (f"{self.name}-summarize-{self.summaries + 1}", SUMMARY_PROMPT_TOKENS)]
        if not self._compact(history):
            return Served(units, edited=edited)
        units, edited = self._request(history)
        call = ExtraCall(prompt, self.summary_tokens, cached=self.profile.summary_cached)
        return Served(units, [call], compacted=True, edited=edited)


def _group(positions: list[tuple[int, int]], text: str) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = {}
    for i, j in positions:
        out.setdefault(i, {})[j] = text
    return out


__all__ = ["BASELINES", "CLEAR_AT_LEAST", "CLEAR_KEEP", "CLEAR_PLACEHOLDER", "CLEAR_TRIGGER", "COMPACT_AT",
           "GENERIC", "HARNESS_PROFILE", "MASK_KEEP", "MASK_PLACEHOLDER", "NATIVES", "PROFILES", "SUMMARY_TOKENS",
           "TAIL_SHARE", "Baseline", "ExtraCall", "NativeProfile", "Served", "extractive_summary", "profile_for",
           "valid_cuts"]
