"""The deterministic decay curve: which paraphrase tier each compartment renders at.

Index `i` counts from 1 at the newest compartment. A compartment's half-life (in compartments)
is `H50 · 2^((importance − 50)/D) / max(p, P_FLOOR)`; its age in half-lives `z = (i − 1) / H`
is compared with the log-cost boundaries `Z` to pick P1..P4, or P5 (archived, not rendered).
The budget pressure `p` is computed once per render from the natural (p = 1) cost of all
non-legacy compartments against the history budget. No LLM call, no clock: same rows, same tiers.
Constants and formula are the original system's (reference §3.3); stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from magic_context.lazyre import lazy

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


H50 = 24
"""Half-life in compartments at importance 50 and pressure 1."""
D = 25
"""Importance points per doubling of the half-life (75 → 2×, 100 → 4×)."""
G = 2
"""Anchor-overlap extension of the archive boundary, in half-lives (callers pass overlap 0)."""
Z1, Z2, Z3, Z4 = 0.201, 0.729, 1.322, 2.587
Z = (Z1, Z2, Z3, Z4)
"""Tier boundaries P1→P2, P2→P3, P3→P4, P4→P5 (lower-inclusive for the older tier)."""
P_FLOOR = 0.1
"""Minimum pressure: avoids division by zero and caps relaxation at 10×."""
TIER_COST = (0, 322, 109, 35, 20, 5)
"""Average tokens of one compartment at P1..P5 (index 0 unused)."""
DEFAULT_HISTORY_BUDGET_TOKENS = 60_000
DEFAULT_IMPORTANCE = 50
ARCHIVED = 5

_USER_LINE = lazy(r"^U:", re.MULTILINE)


def clamp_importance(importance: float | None) -> float:
    """Importance clamped to 1..100; missing means 50."""
    if importance is None:
        return DEFAULT_IMPORTANCE
    return max(1, min(100, importance))


def _age_in_half_lives(index: int, importance: float | None, pressure: float) -> float:
    # Same operation order as the original so boundary cases round identically.
    a = max(index, 1) - 1
    f = 2 ** ((clamp_importance(importance) - 50) / D)
    h = (H50 * f) / max(pressure, P_FLOOR)
    return a / h


def _tier_of_z(z: float) -> int:
    if z < Z1:
        return 1
    if z < Z2:
        return 2
    if z < Z3:
        return 3
    if z < Z4:
        return 4
    return 5


def base_tier(index: int, importance: float | None, pressure: float) -> int:
    """The raw curve tier 1..5, ignoring archive protection (what pressure costing uses)."""
    return _tier_of_z(_age_in_half_lives(index, importance, pressure))


def tier_for(index: int, importance: float | None, pressure: float, overlap: float = 0) -> int:
    """The rendered tier 1..5 of the compartment at `index` (1 = newest).

    5 means archived: z ≥ Z4 + G·overlap. Otherwise the curve tier capped at 4, so a positive
    anchor overlap keeps a compartment at P4 for up to G more half-lives.
    """
    z = _age_in_half_lives(index, importance, pressure)
    if z >= Z4 + G * max(0.0, min(1.0, overlap)):
        return ARCHIVED
    return min(_tier_of_z(z), 4)


def pressure(importances: Iterable[float | None], budget: float | None = DEFAULT_HISTORY_BUDGET_TOKENS) -> float:
    """Budget pressure from the non-legacy importances, listed oldest → newest.

    `p = max(P_FLOOR, natural_cost / budget)` where the natural cost prices every compartment at
    its p = 1 tier (archived costs 0). A budget ≤ 0 disables pressure (p = 1); None means the default.
    """
    if budget is None:
        budget = DEFAULT_HISTORY_BUDGET_TOKENS
    if budget <= 0:
        return 1.0
    values = list(importances)
    n = len(values)
    cost = 0
    for position, importance in enumerate(values):
        natural = base_tier(n - position, importance, 1.0)
        cost += 0 if natural >= ARCHIVED else TIER_COST[natural]
    return max(P_FLOOR, cost / budget)


def legacy_tier(content: str | None) -> int:
    """Initial tier of a legacy (flat) row: P3 if any line starts with `U:`, else P4."""
    return 3 if content and _USER_LINE.search(content) else 4


def _field(item: Any, name: str, default: Any = None) -> Any:
    # Mappings, sqlite3.Row (keys() + item access) and plain objects alike.
    if isinstance(item, Mapping):
        return item.get(name, default)
    if hasattr(item, "keys"):
        return item[name] if name in item.keys() else default  # noqa: SIM118 - sqlite3.Row `in` tests values
    return getattr(item, name, default)


def _is_legacy(item: Any) -> bool:
    return not isinstance(item, (int, float)) and item is not None and bool(_field(item, "legacy", False))


def _importance(item: Any) -> float | None:
    if item is None or isinstance(item, (int, float)):
        return item
    return _field(item, "importance")


def assign_tiers(compartments: Sequence[Any], budget: float | None = DEFAULT_HISTORY_BUDGET_TOKENS) -> list[int]:
    """Tiers for compartments listed oldest → newest, before the render budget guard.

    Each item is an importance (number or None) or a row (mapping or object) with `importance`
    and optionally `legacy` and `content`. Legacy rows take `legacy_tier(content)` and are left out
    of both the pressure and the curve indexes, so they never push tiered rows down.
    """
    curve = [item for item in compartments if not _is_legacy(item)]
    p = pressure([_importance(item) for item in curve], budget)
    remaining = len(curve)
    tiers: list[int] = []
    for item in compartments:
        if _is_legacy(item):
            tiers.append(legacy_tier(_field(item, "content", "")))
            continue
        tiers.append(tier_for(remaining, _importance(item), p))
        remaining -= 1
    return tiers


__all__ = [
    "ARCHIVED",
    "DEFAULT_HISTORY_BUDGET_TOKENS",
    "DEFAULT_IMPORTANCE",
    "H50",
    "P_FLOOR",
    "TIER_COST",
    "Z1",
    "Z2",
    "Z3",
    "Z4",
    "D",
    "G",
    "Z",
    "assign_tiers",
    "base_tier",
    "clamp_importance",
    "legacy_tier",
    "pressure",
    "tier_for",
]
