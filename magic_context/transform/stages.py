"""The records one transform pass hands from stage to stage (`pipeline._run_in_db` reads as their sequence).

Each stage (in `pass_view`, `pass_decide`, `pass_serve`) is a function taking some of these and returning
one: `Pass` (what every stage reads) → `View` (the history as this pass sees it) → `Measure` (sizes and the
scheduler's verdict) → `Schedule` (bust permission, historian) → `Decisions` (drops) → `Served` (the edited
messages) → `Head` (m[0] / m[1]).
"""

from __future__ import annotations

import sqlite3

from magic_context.config.hot import HotConfig
from magic_context.records import record
from magic_context.store import raw as raw_store
from magic_context.transform import accounting, scheduler, tagger
from magic_context.transform import tags as tag_store
from magic_context.transform.protocol import PassInput
from magic_context.transform.state import SessionState
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from magic_context.protocols import Codec
    from magic_context.transform import heuristics

TAG_PREFIX_TOKENS = 3


@record
class Pass:
    """What every stage of one pass reads: the connection, the input, the config and the mode."""

    conn: sqlite3.Connection
    inp: PassInput
    hot: HotConfig
    codec: Codec
    primary: bool
    compaction: bool
    readonly: bool
    warnings: list[str]
    started: float

    @property
    def with_head(self) -> bool:
        """Whether the pass is served m[0]/m[1]: a primary agent's with compaction on, any with it off (memory and
        docs only); a subagent under compaction is served none, though its session may hold the primary's."""
        return (self.compaction and self.primary) or not self.compaction

    @property
    def head_settings(self) -> dict[str, bool]:
        """The settings m[0] is rendered under that the rest of the request depends on (stored with the head):
        `compaction.enabled` decides both whether m[0] holds the `<session-history>` and whether the array is
        folded, `memory.enabled` whether the head shows memories at all (the seed's render-config HARD path).
        A head stored under other values is wrong for this pass, not merely stale. The rendering parameters
        (budgets, `temporal_awareness`, `dreamer.inject_docs`: like a docs edit) ride the next natural fold."""
        return {"compaction.enabled": self.compaction, "memory.enabled": bool(self.hot["memory.enabled"])}

    def stale_head(self, m0_meta: dict) -> list[str]:
        """The head settings (`name = value`, as now) that differ from those the stored head was rendered under;
        a head stored before the settings were kept names none and is trusted until its next fold."""
        if not self.with_head:
            return []
        stored = m0_meta.get("settings") or {}
        return [f"{name} = {'true' if value else 'false'}" for name, value in self.head_settings.items()
                if name in stored and stored[name] != value]


@record
class View:
    """Stage 1 (`pass_view.view`): the session and its history as this pass sees it: decoded, synced, folded,
    tagged."""

    pk: int
    project_id: str
    state: SessionState
    counter: int  # the tag counter after this pass's new tags
    all_messages: list[m.Message]  # the whole input, decoded
    sync: raw_store.SyncResult
    fold_through: int  # ordinals up to here are folded into compartments and leave the served array
    messages: list[m.Message]  # what is left to serve
    msg_tokens: list[int]
    known: tag_store.KnownTags
    sites: list[tagger.Site]
    new_tags: list[tag_store.Tag]
    by_number: dict[int, tagger.Site]
    protected_from: int  # tag numbers from here on are protected
    newest: int  # the newest active tag number
    previews: list[tagger.Site]  # new oversized outputs/pastes served as bounded previews (marked dropped)
    stale: list[str]  # head settings changed since the stored head was rendered (`Pass.stale_head`)


@record
class Sizes:
    """The fixed parts of a request's size this pass: the stored head, system prompt, nudges, tag prefixes."""

    reduce_ok: bool
    head_tokens: int  # the stored head's size (as last rendered)
    system_tokens: int
    nudge_tokens: int

    def served(self, view: View, sites: list[tagger.Site], kept: list[m.Message] | None = None,
               stripped: frozenset[str] | set[str] = frozenset(), reasoning: dict | None = None) -> int:
        """Estimated tokens of the request `view` would serve with `sites`' decisions (head as stored)."""
        body = accounting.served_tokens(view.messages, view.msg_tokens, sites, kept=kept, stripped=stripped,
                                        reasoning=reasoning)
        prefixes = TAG_PREFIX_TOKENS * sum(1 for x in sites if not x.tag.dropped) if self.reduce_ok else 0
        return body + prefixes + self.head_tokens + self.system_tokens + self.nudge_tokens


@record
class Measure:
    """Stage 2 (`pass_decide.measure`): system prompt, window, threshold, the request's size and the scheduler's
    verdict."""

    sizes: Sizes
    system_first: str
    system_hash: str
    model_key: str | None
    limit: scheduler.Limit
    threshold: float
    anchors: list  # nudge anchors replayed into the messages (a fired nudge is appended)
    estimated: int
    reported: int | None
    usage_tokens: int
    decision: scheduler.Decision
    force: bool


@record
class Schedule:
    """Stage 3 (`pass_decide.schedule`): whether this pass may change the prefix, and why; the historian's word."""

    with_head: bool
    m0_meta: dict
    hard_reasons: list[str]
    hard: bool
    bust: bool
    historian: str  # a store.passes.HistorianActivity
    mutate: bool


@record
class Decisions:
    """Stage 4 (`pass_decide.decide`): the drops this pass makes and the reasoning it strips."""

    new_drops: list[heuristics.Drop]
    done_pending: list[int]
    stripped: set[str]
    held: str = ""  # why a pass allowed to bust defers after all (`reclaim.worth_a_bust`); "" when it did not


@record
class Served:
    """Stage 5 (`pass_serve.apply`): the messages after drops, markers and nudges, and what the pass must remember."""

    kept: list[m.Message]
    pristine: dict[int, str]
    reasoning_cache: dict[str, int]
    nudge_state: dict


@record
class Head:
    """Stage 6 (`pass_serve.put_head`): m[0] / m[1] as served (a pressure backstop may turn the pass into a fold)."""

    m0_text: str | None
    m1_text: str | None
    m0_meta: dict
    hard: bool
    hard_reasons: list[str]
    created: int | None


__all__ = ["TAG_PREFIX_TOKENS", "Decisions", "Head", "Measure", "Pass", "Schedule", "Served", "Sizes", "View"]
