"""Rendering compartments and memories into the m[0] / m[1] head blocks (reference §3.2–3.3).

Byte formats are contracts: the rendered text is replayed on every defer pass, so the same rows
must always give the same bytes. Inputs are `CompartmentRow`s or any mapping with the columns of
the `compartments` table (a `sqlite3.Row` works); memories are mappings with the `memories` columns.
Stdlib only: this runs inside the transform pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from magic_context.history import decay
from magic_context.lazyre import lazy
from magic_context.records import record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

Estimator = Callable[[str], int]

EMPTY_SESSION_HISTORY = "<session-history></session-history>"
M1_PLACEHOLDER = "<session-history-since>(no new content since last materialization)</session-history-since>"
DEFAULT_MEMORY_BUDGET_TOKENS = 4000
MEMORY_CATEGORY_ORDER = ("PROJECT_RULES", "ARCHITECTURE", "CONSTRAINTS", "CONFIG_VALUES", "NAMING")
MEMORY_CONTENT_CAP_BYTES = 64 * 1024
M1_TRIM_RATIO = 0.25
LEGACY_P2_CHARS = 1200
LEGACY_P3_CHARS = 420
FIRST_REQUEST_FROM_TIER = 3  # P1 and P2 show the request (the extractive P2 quotes its first 160 characters)
FIRST_REQUEST_MAX_TOKENS = 300  # a few lines: the ask, not the whole paste
FIRST_REQUEST_BUDGET_SHARE = 0.1  # of the history budget: the rest stays the compartments'
FIRST_REQUEST_MIN_TOKENS = 48  # a sentence or two after the element's ~13 tokens; less is not worth showing
FIRST_REQUEST_MAX_SHARE = 0.25  # the floor may take at most this share: a smaller budget shows no quote
_RENDERED_MEMORY_STATUSES = frozenset({"active", "permanent"})
_TITLE_BREAKS = lazy("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_HEADING_LINE = lazy(r"^## ", re.MULTILINE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@record(frozen=True)
class CompartmentRow:
    """One `compartments` row as the renderer needs it (times in epoch ms, UTC).

    `p1..p4` None means "tier absent" (fall back to a denser tier); "" means "present but empty"
    (heading only). A row is tiered only when `p1` is non-empty; otherwise `content` is rendered.
    """

    start_ordinal: int
    end_ordinal: int
    title: str
    p1: str | None = None
    p2: str | None = None
    p3: str | None = None
    p4: str | None = None
    content: str = ""
    importance: int | None = decay.DEFAULT_IMPORTANCE
    legacy: bool = False
    start_time: int | None = None
    end_time: int | None = None
    sequence: int | None = None
    episode_type: str | None = None

    @classmethod
    def coerce(cls, row: Any) -> CompartmentRow:
        """Accept a CompartmentRow, a dict, or a `sqlite3.Row` with the table's column names."""
        if isinstance(row, cls):
            return row
        keys = set(row.keys())

        def get(name: str, default: Any = None) -> Any:
            return row[name] if name in keys and row[name] is not None else default

        optional = ("p1", "p2", "p3", "p4", "start_time", "end_time", "sequence", "episode_type")
        return cls(
            int(row["start_ordinal"]), int(row["end_ordinal"]), get("title", ""),
            content=get("content", ""), importance=get("importance", decay.DEFAULT_IMPORTANCE),
            legacy=bool(get("legacy", False)), **{name: get(name) for name in optional},
        )

    @property
    def tiered(self) -> bool:
        return bool(self.p1)


@record(frozen=True)
class HistoryRender:
    """The decayed `<session-history>` body plus how it was chosen (for `mc status` and reports)."""

    body: str
    tiers: tuple[int, ...]
    pressure: float
    tokens: int
    demotions: int
    quoted: bool = False  # the body opens with the session's first request (`first_request_block`)


@record(frozen=True)
class FirstRequest:
    """The session's first request: its raw ordinal and its text (cleaned; `history.first_request` picks it)."""

    ordinal: int
    text: str


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit the original measures strings in."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def estimate_tokens(text: str) -> int:
    """The decay guard's cheap estimate: ceil(chars / 3.5), chars in UTF-16 units."""
    return (2 * utf16_len(text) + 6) // 7


def escape_xml(text: str) -> str:
    """Escape `& < >` for element content."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return escape_xml(text).replace('"', "&quot;")


def sanitize_title(title: str) -> str:
    """Collapse control characters and line/paragraph separators to one space, then escape."""
    return escape_xml(_TITLE_BREAKS.sub(" ", title))


def _day(ms: int) -> str:
    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d")


def format_date_range(start_ms: int | None, end_ms: int | None) -> str:
    """`2026-05-01`, `2026-05-01→03` (same month) or `2026-05-28→2026-06-02`; "" if a time is missing."""
    if start_ms is None or end_ms is None:
        return ""
    start, end = _day(start_ms), _day(end_ms)
    if start == end:
        return start
    if start[:7] == end[:7]:
        return f"{start}→{end[8:]}"
    return f"{start}→{end}"


def compartment_heading(row: CompartmentRow, temporal: bool) -> str:
    dates = format_date_range(row.start_time, row.end_time) if temporal else ""
    date_part = f" · {dates}" if dates else ""
    return f"## {row.start_ordinal}-{row.end_ordinal}{date_part} · {sanitize_title(row.title)}"


def _guard_body(body: str) -> str:
    # Indent body lines that look like headings so only real headings delimit compartments.
    return _HEADING_LINE.sub(" ## ", escape_xml(body))


def _utf16_prefix(text: str, units: int) -> str:
    # Cut at a code-point boundary at or below `units` UTF-16 units.
    if utf16_len(text) <= units:
        return text
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text


def _legacy_body(content: str, tier: int) -> str:
    if tier <= 1:
        return content
    limit = LEGACY_P2_CHARS if tier == 2 else LEGACY_P3_CHARS
    if utf16_len(content) <= limit:
        return content
    return _utf16_prefix(content, limit).rstrip() + "…"


def tier_body(row: CompartmentRow, tier: int) -> str:
    """The requested tier if present, else the densest non-empty denser tier, else `content`."""
    tiers = (row.p1, row.p2, row.p3, row.p4)
    requested = tiers[tier - 1]
    if requested is not None:
        return requested.strip()
    for denser in reversed(tiers[: tier - 1]):
        if denser:
            return denser.strip()
    return (row.content or "").strip()


def render_compartment(row: Any, tier: int, *, temporal: bool = True) -> str:
    """One compartment at `tier`: heading plus escaped body; P5 renders nothing.

    Legacy or untiered rows render their flat content: P1 in full, P2 ≤1200 and P3 ≤420 UTF-16
    units plus `…`, P4 the heading alone.
    """
    if tier >= decay.ARCHIVED:
        return ""
    row = CompartmentRow.coerce(row)
    heading = compartment_heading(row, temporal)
    if row.legacy or not row.tiered:
        flat = (row.content or "").strip()
        if tier >= 4 or not flat:
            return heading
        return f"{heading}\n{_guard_body(_legacy_body(flat, tier))}"
    body = tier_body(row, tier)
    return f"{heading}\n{_guard_body(body)}" if body else heading


def _decay(rows: list[CompartmentRow], budget: float, temporal: bool, estimate: Estimator) -> HistoryRender:
    """Pick tiers by the decay curve, then demote the oldest one tier at a time until it fits (rows sorted)."""
    curve = [r.importance for r in rows if not r.legacy]
    p = decay.pressure(curve, budget)
    tiers = decay.assign_tiers(rows, budget)
    cache: dict[tuple[int, int], tuple[str, int]] = {}

    def rendered(i: int, tier: int) -> tuple[str, int]:
        if (i, tier) not in cache:
            text = render_compartment(rows[i], tier, temporal=temporal)
            cache[i, tier] = (text, estimate(text) if text else 0)
        return cache[i, tier]

    def join() -> str:
        return "\n\n".join(t for t in (rendered(i, tier)[0] for i, tier in enumerate(tiers)) if t)

    body = join()
    if budget <= 0 or not rows:
        return HistoryRender(body, tuple(tiers), p, estimate(body) if body else 0, 0)
    guard = 5 * len(rows)
    oldest = 0

    def demote() -> int | None:
        # Demote the oldest compartment that is not yet archived; None when nothing is left.
        nonlocal oldest, guard
        while oldest < len(tiers) and tiers[oldest] >= decay.ARCHIVED:
            oldest += 1
        if oldest >= len(tiers) or guard <= 0:
            return None
        tiers[oldest] += 1
        guard -= 1
        return oldest

    running = sum(rendered(i, tier)[1] for i, tier in enumerate(tiers))
    while running > budget:
        index = demote()
        if index is None:
            break
        running += rendered(index, tiers[index])[1] - rendered(index, tiers[index] - 1)[1]
    body = join()
    tokens = estimate(body) if body else 0
    while tokens > budget and demote() is not None:
        body = join()
        tokens = estimate(body) if body else 0
    return HistoryRender(body, tuple(tiers), p, tokens, 5 * len(rows) - guard)


def request_hidden(rows: Sequence[CompartmentRow], tiers: Sequence[int], ordinal: int) -> bool:
    """Whether the rendered history no longer shows the request at `ordinal`: it is folded (at or before the
    last compartment's end) and the compartment holding it renders at P3 or terser, or no compartment holds it.
    A request after the last compartment is still in the conversation itself."""
    if not rows or ordinal > max(r.end_ordinal for r in rows):
        return False
    for row, tier in zip(rows, tiers, strict=True):
        if row.start_ordinal <= ordinal <= row.end_ordinal:
            return tier >= FIRST_REQUEST_FROM_TIER
    return True


def _could_hide(rows: Sequence[CompartmentRow], tiers: Sequence[int]) -> bool:
    # Some request `request_hidden` would say is hidden: a compartment at P3+, or folded ordinals none covers.
    if any(tier >= FIRST_REQUEST_FROM_TIER for tier in tiers):
        return True
    ends = [-1] + [r.end_ordinal for r in rows]
    return any(row.start_ordinal > end + 1 for row, end in zip(rows, ends, strict=False))


def first_request_cap(budget: float) -> int:
    """The quote's token cap: FIRST_REQUEST_BUDGET_SHARE of the history budget, within FIRST_REQUEST_MIN_TOKENS
    to FIRST_REQUEST_MAX_TOKENS; 0 (no quote) when that floor is above FIRST_REQUEST_MAX_SHARE of the budget.
    A budget ≤ 0 (no budget) gives the maximum."""
    if budget <= 0:
        return FIRST_REQUEST_MAX_TOKENS
    cap = max(FIRST_REQUEST_MIN_TOKENS, min(FIRST_REQUEST_MAX_TOKENS, int(budget * FIRST_REQUEST_BUDGET_SHARE)))
    return cap if cap <= budget * FIRST_REQUEST_MAX_SHARE else 0


def _word_prefix(text: str, units: int) -> str:
    # At most `units` UTF-16 units, cut after a word when one ends in the last 40%, then `…`.
    cut = _utf16_prefix(text, units)
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > len(cut) * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


def first_request_block(request: FirstRequest, cap_tokens: int, *, estimate: Estimator = estimate_tokens) -> str:
    """`<first-request ordinal="N">` with the request's text (escaped, heading-guarded), cut at a word with `…`
    so the whole block's estimate is at most `cap_tokens`; "" when not even a word fits."""
    def block(text: str) -> str:
        return f'<first-request ordinal="{request.ordinal}">\n{_guard_body(text)}\n</first-request>'

    text = request.text.strip()
    if not text:
        return ""
    full = block(text)
    cost = estimate(full)
    if cost <= cap_tokens:
        return full
    units = int(utf16_len(text) * cap_tokens / cost)
    while units > 0:
        quoted = block(_word_prefix(text, units))
        over = estimate(quoted) - cap_tokens
        if over <= 0:
            return quoted
        units -= max(1, units * over // (over + cap_tokens))  # shrink by the overshoot's share
    return ""


def decay_render(
    compartments: Iterable[Any],
    budget_tokens: float | None = decay.DEFAULT_HISTORY_BUDGET_TOKENS,
    temporal: bool = True,
    *,
    estimate: Estimator = estimate_tokens,
    first_request: FirstRequest | Callable[[], FirstRequest | None] | None = None,
) -> HistoryRender:
    """Pick tiers by the decay curve, then demote the oldest one tier at a time until it fits.

    The guard runs up to 5·n demotions: first on the sum of per-compartment estimates, then on
    the joined body, as the original does. A budget ≤ 0 disables pressure and the guard.

    With `first_request` (or a function that reads it, called only when the history could hide it: a
    compartment at P3 or terser, or ordinals no compartment covers): when the history rendered with the
    whole budget no longer shows it (`request_hidden`), the body opens with its quote
    (`first_request_block`, capped by `first_request_cap`) and the compartments are rendered again within
    what the quote leaves. Only then does the quote cost budget: a session whose request is still shown
    renders as without it.
    """
    rows = sorted((CompartmentRow.coerce(c) for c in compartments), key=lambda r: r.start_ordinal)
    budget = decay.DEFAULT_HISTORY_BUDGET_TOKENS if budget_tokens is None else budget_tokens
    whole = _decay(rows, budget, temporal, estimate)
    if callable(first_request):
        first_request = first_request() if _could_hide(rows, whole.tiers) else None
    if first_request is None or not request_hidden(rows, whole.tiers, first_request.ordinal):
        return whole
    cap = first_request_cap(budget)
    quote = first_request_block(first_request, cap, estimate=estimate) if cap else ""
    if not quote:
        return whole
    lead = quote + "\n\n"
    rest = _decay(rows, budget - estimate(lead), temporal, estimate) if budget > 0 else whole
    body = lead + rest.body if rest.body else quote
    return HistoryRender(body, rest.tiers, rest.pressure, estimate(body), rest.demotions, True)


def render_session_history(
    compartments: Iterable[Any],
    budget_tokens: float | None,
    temporal: bool,
    estimate: Estimator = estimate_tokens,
    first_request: FirstRequest | Callable[[], FirstRequest | None] | None = None,
) -> str:
    """The m[0] `<session-history>` block; `<session-history></session-history>` when nothing renders."""
    body = decay_render(compartments, budget_tokens, temporal, estimate=estimate, first_request=first_request).body
    return f"<session-history>\n{body}\n</session-history>" if body else EMPTY_SESSION_HISTORY


def render_new_compartments_p1(compartments: Iterable[Any], *, temporal: bool = True) -> str:
    """m[1]'s `<new-compartments>` block: every row at P1, bytes a pure function of the rows; "" if none."""
    rows = sorted((CompartmentRow.coerce(c) for c in compartments), key=lambda r: r.start_ordinal)
    parts = [render_compartment(r, 1, temporal=temporal) for r in rows]
    return "<new-compartments>\n" + "\n\n".join(parts) + "\n</new-compartments>" if parts else ""


def _get(item: Any, name: str, default: Any = None) -> Any:
    # Mappings, sqlite3.Row (keys() + item access) and plain objects alike; None means absent.
    if isinstance(item, Mapping):
        value = item.get(name)
    elif hasattr(item, "keys"):
        value = item[name] if name in item.keys() else None  # noqa: SIM118 - sqlite3.Row `in` tests values
    else:
        value = getattr(item, name, None)
    return default if value is None else value


def _cap_utf8(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


def memory_line(memory: Any) -> str:
    """`#<id>: <content>` (or `#<id> [<project>]: …`), escaped, continuation lines indented two spaces."""
    source = _get(memory, "source_project", "")
    label = f" [{escape_xml(source)}]" if source else ""
    content = escape_xml(_cap_utf8(str(_get(memory, "content", "")), MEMORY_CONTENT_CAP_BYTES))
    content = content.replace("\n", "\n  ")
    return f"#{_get(memory, 'id')}{label}: {content}"


def _category_rank(category: str) -> tuple[int, str]:
    if category in MEMORY_CATEGORY_ORDER:
        return (MEMORY_CATEGORY_ORDER.index(category), "")
    return (len(MEMORY_CATEGORY_ORDER), category)


def _priority(memory: Any) -> tuple[int, float, float, int]:
    recency = max(_get(memory, "last_seen_at", 0), _get(memory, "verified_at", 0))
    permanent = 0 if _get(memory, "status", "active") == "permanent" else 1
    return (permanent, -_get(memory, "importance", 50), -recency, _get(memory, "id", 0))


def select_memories(
    memories: Iterable[Any], budget_tokens: float, *, estimate: Estimator = estimate_tokens, overhead: str = "",
) -> list[Any]:
    """Greedy admission in priority order (permanent, importance desc, recency desc, id) within the budget.

    `overhead` (the block wrapper) is charged first. A memory costs its line plus, the first time its
    category appears, the category wrapper; one that does not fit is skipped and later, smaller ones
    may still fit. Only `active` and `permanent` memories render.
    """
    chosen: list[Any] = []
    seen: set[str] = set()
    used = estimate(overhead) if overhead else 0
    live = [m for m in memories if _get(m, "status", "active") in _RENDERED_MEMORY_STATUSES]
    for memory in sorted(live, key=_priority):
        category = str(_get(memory, "category", ""))
        cost = estimate(memory_line(memory))
        if category not in seen:
            cost += estimate(f"<{category}>\n</{category}>")
        if used + cost > budget_tokens:
            continue
        chosen.append(memory)
        seen.add(category)
        used += cost
    return chosen


def render_memory_block(memories: Sequence[Any], wrapper: str) -> str:
    """Group already-selected memories into `<CATEGORY>` blocks inside `<wrapper>`; "" if none."""
    if not memories:
        return ""
    ordered = sorted(memories, key=lambda m: (_category_rank(str(_get(m, "category", ""))), _get(m, "id", 0)))
    lines = [f"<{wrapper}>"]
    current: str | None = None
    for memory in ordered:
        category = _escape_attr(str(_get(memory, "category", "")))
        if category != current:
            if current is not None:
                lines.append(f"</{current}>")
            lines.append(f"<{category}>")
            current = category
        lines.append(memory_line(memory))
    lines += [f"</{current}>", f"</{wrapper}>"]
    return "\n".join(lines)


def render_project_memory(
    memories: Iterable[Any],
    budget_tokens: float | None = DEFAULT_MEMORY_BUDGET_TOKENS,
    *,
    estimate: Estimator = estimate_tokens,
) -> str:
    """m[0]'s `<project-memory>` block after greedy budget admission; "" when nothing is admitted."""
    budget = DEFAULT_MEMORY_BUDGET_TOKENS if budget_tokens is None else budget_tokens
    wrapper = "project-memory"
    return render_memory_block(select_memories(memories, budget, estimate=estimate,
                                               overhead=f"<{wrapper}>\n</{wrapper}>"), wrapper)


def render_user_profile(
    lines: Iterable[str], budget_tokens: float | None = None, *, wrapper: str = "user-profile",
    estimate: Estimator = estimate_tokens,
) -> str:
    """`- <content>` lines admitted while `tokens("- x") + 4` fits (None: no cap); "" if none."""
    admitted: list[str] = []
    used = 0
    for content in lines:
        line = f"- {escape_xml(content)}"
        cost = estimate(f"- {content}") + 4
        if budget_tokens is not None and used + cost > budget_tokens:
            break
        admitted.append(line)
        used += cost
    return "\n".join([f"<{wrapper}>", *admitted, f"</{wrapper}>"]) if admitted else ""


def render_memory_updates(updates: Iterable[Any]) -> str:
    """m[1]'s `<memory-updates>` block from records {kind, id, category, content, by, by_visible}.

    `update` → `<updated>`; `superseded` → `<superseded by>` when the replacement is visible in
    m[0]/m[1], else `<removed>`; `archive`/`delete` → `<removed>`. "" when there are none.
    """
    lines: list[str] = []
    for update in updates:
        kind, mid = _get(update, "kind", ""), _get(update, "id")
        if kind == "update":
            category = _escape_attr(str(_get(update, "category", "")))
            text = escape_xml(str(_get(update, "content", ""))).replace("\n", "\n  ")
            lines.append(f'  <updated id="{mid}" category="{category}">{text}</updated>')
        elif kind == "superseded" and _get(update, "by") is not None and _get(update, "by_visible", False):
            lines.append(f'  <superseded id="{mid}" by="{_get(update, "by")}"/>')
        elif kind in ("superseded", "archive", "delete"):
            lines.append(f'  <removed id="{mid}"/>')
    if not lines:
        return ""
    header = "These memories changed since the snapshot below — trust these:"
    return "\n".join(["<memory-updates>", header, *lines, "</memory-updates>"])


def render_m1(
    new_compartments: Iterable[Any],
    new_memories: Iterable[Any],
    *,
    memory_updates: Iterable[Any] = (),
    new_user_profile: Iterable[str] = (),
    temporal: bool = True,
    memory_budget_tokens: float | None = DEFAULT_MEMORY_BUDGET_TOKENS,
    profile_budget_tokens: float | None = None,
    estimate: Estimator = estimate_tokens,
) -> str:
    """The m[1] `<session-history-since>` delta, or the exact placeholder when it has nothing.

    Pieces in order: `<memory-updates>`, `<new-compartments>` (always P1), `<new-memories>` and
    `<new-user-profile>` (each trimmed to 25% of its budget), joined by newlines.
    """
    memory_budget = DEFAULT_MEMORY_BUDGET_TOKENS if memory_budget_tokens is None else memory_budget_tokens
    profile_budget = None if profile_budget_tokens is None else profile_budget_tokens * M1_TRIM_RATIO
    pieces = [
        render_memory_updates(memory_updates),
        render_new_compartments_p1(new_compartments, temporal=temporal),
        render_memory_block(select_memories(new_memories, memory_budget * M1_TRIM_RATIO, estimate=estimate),
                            "new-memories"),
        render_user_profile(new_user_profile, profile_budget, wrapper="new-user-profile", estimate=estimate),
    ]
    blocks = [piece for piece in pieces if piece]
    if not blocks:
        return M1_PLACEHOLDER
    return "<session-history-since>\n" + "\n".join(blocks) + "\n</session-history-since>"


__all__ = [
    "DEFAULT_MEMORY_BUDGET_TOKENS",
    "EMPTY_SESSION_HISTORY",
    "FIRST_REQUEST_MAX_TOKENS",
    "M1_PLACEHOLDER",
    "MEMORY_CATEGORY_ORDER",
    "CompartmentRow",
    "Estimator",
    "FirstRequest",
    "HistoryRender",
    "compartment_heading",
    "decay_render",
    "escape_xml",
    "estimate_tokens",
    "first_request_block",
    "first_request_cap",
    "format_date_range",
    "memory_line",
    "render_compartment",
    "render_m1",
    "render_memory_block",
    "render_memory_updates",
    "render_new_compartments_p1",
    "render_project_memory",
    "render_session_history",
    "render_user_profile",
    "request_hidden",
    "sanitize_title",
    "select_memories",
    "tier_body",
    "utf16_len",
]
