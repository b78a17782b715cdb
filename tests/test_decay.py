"""The decay curve: published vectors, the derived tier table, pressure examples, monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magic_context.history import decay
from magic_context.history.decay import assign_tiers, pressure, tier_for

# crates/mc-module/testdata/score-projection-parity.json (reference §3.3): budget 1000, 16 rows.
VECTORS = [
    ([50] * 16, 2.809, [4, 4, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1]),
    ([100] + [50] * 15, 3.022, [2, 4, 4, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1]),
]

# (p, importance) -> first index (1 = newest) rendered at P2, P3, P4, P5.
FIRST_INDEX = [
    (1.0, 10, (3, 7, 12, 22)),
    (1.0, 30, (4, 12, 20, 37)),
    (1.0, 50, (6, 19, 33, 64)),
    (1.0, 75, (11, 36, 65, 126)),
    (1.0, 90, (16, 55, 98, 190)),
    (1.0, 100, (21, 71, 128, 250)),
    (0.5, 50, (11, 36, 65, 126)),
    (2.0, 50, (4, 10, 17, 33)),
]


def test_constants_are_the_originals():
    assert (decay.H50, decay.D, decay.G) == (24, 25, 2)
    assert decay.Z == (0.201, 0.729, 1.322, 2.587)
    assert decay.P_FLOOR == 0.1
    assert decay.TIER_COST[1:] == (322, 109, 35, 20, 5)
    assert decay.DEFAULT_HISTORY_BUDGET_TOKENS == 60_000


@pytest.mark.parametrize(("importances", "expected_pressure", "expected_tiers"), VECTORS)
def test_published_vectors(importances, expected_pressure, expected_tiers):
    assert pressure(importances, 1000) == expected_pressure
    assert round(pressure(importances, 1000), 3) == expected_pressure
    assert assign_tiers(importances, 1000) == expected_tiers
    rows = [{"importance": imp, "legacy": 0} for imp in importances]
    assert assign_tiers(rows, 1000) == expected_tiers


def test_sqlite_rows_are_accepted():
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE c (importance INTEGER, legacy INTEGER, content TEXT)")
    conn.executemany("INSERT INTO c VALUES (?, 0, '')", [(imp,) for imp in VECTORS[1][0]])
    assert assign_tiers(conn.execute("SELECT * FROM c").fetchall(), 1000) == VECTORS[1][2]


def test_natural_cost_check():
    # 5·322 + 11·109 = 2809
    assert pressure([50] * 16, 1) == 2809


@pytest.mark.parametrize(("p", "importance", "firsts"), FIRST_INDEX)
def test_first_index_per_tier(p, importance, firsts):
    found = {}
    for index in range(1, 400):
        found.setdefault(tier_for(index, importance, p), index)
    assert found[1] == 1
    assert (found[2], found[3], found[4], found[5]) == firsts


@pytest.mark.parametrize(
    ("count", "budget", "expected"),
    [(100, 60_000, 0.1), (100, 2000, 2.0685), (200, 5000, 0.8274)],
)
def test_pressure_examples(count, budget, expected):
    assert pressure([50] * count, budget) == pytest.approx(expected, abs=1e-12)


def test_pressure_edge_cases():
    assert pressure([50] * 10, 0) == 1.0
    assert pressure([50] * 10, -5) == 1.0
    assert pressure([], 1000) == decay.P_FLOOR
    assert pressure([None] * 16, 1000) == pressure([50] * 16, 1000)
    assert pressure([50] * 100, None) == pressure([50] * 100, 60_000)


def test_importance_is_clamped():
    assert tier_for(30, 500, 1.0) == tier_for(30, 100, 1.0)
    assert tier_for(30, -7, 1.0) == tier_for(30, 1, 1.0)
    assert tier_for(30, None, 1.0) == tier_for(30, 50, 1.0)


def test_archives_even_at_top_importance():
    assert tier_for(100_000, 100, 1.0) == 5
    assert tier_for(1, 1, 1000.0) == 1


def test_anchor_overlap_extends_p4():
    # index 64 at imp 50 / p 1 is the first archived one; overlap keeps it at P4 for up to G half-lives.
    assert tier_for(64, 50, 1.0) == 5
    assert tier_for(64, 50, 1.0, overlap=1.0) == 4
    assert tier_for(64 + 2 * 24, 50, 1.0, overlap=1.0) == 5
    assert tier_for(64, 50, 1.0, overlap=-3) == 5


def test_legacy_rows_are_outside_the_curve():
    tiered = [{"importance": 50}] * 16
    legacy_user = {"legacy": 1, "content": "summary\nU: please keep this"}
    legacy_plain = {"legacy": True, "content": "no user lines here"}
    tiers = assign_tiers([legacy_user, legacy_plain, *tiered], 1000)
    assert tiers[:2] == [3, 4]
    assert tiers[2:] == VECTORS[0][2]
    assert decay.legacy_tier("xU: not at line start") == 4
    assert decay.legacy_tier(None) == 4


indexes = st.integers(min_value=1, max_value=5000)
importances = st.integers(min_value=-20, max_value=130)
pressures = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)


@given(indexes, importances, pressures)
def test_older_never_gets_a_lower_tier(index, importance, p):
    assert tier_for(index + 1, importance, p) >= tier_for(index, importance, p)


@given(indexes, importances, pressures)
def test_more_important_never_gets_a_higher_tier(index, importance, p):
    assert tier_for(index, importance + 1, p) <= tier_for(index, importance, p)


@given(indexes, importances, pressures, st.floats(min_value=0.0, max_value=10.0, allow_nan=False))
def test_more_pressure_never_gets_a_lower_tier(index, importance, p, extra):
    assert tier_for(index, importance, p + extra) >= tier_for(index, importance, p)


@given(importances, pressures)
def test_newest_is_always_p1(importance, p):
    assert tier_for(1, importance, p) == 1
    assert tier_for(0, importance, p) == 1


@given(st.lists(st.integers(min_value=1, max_value=100), max_size=80), st.integers(min_value=-10, max_value=20_000))
def test_assign_tiers_matches_tier_for(imps, budget):
    p = pressure(imps, budget)
    assert p >= decay.P_FLOOR or budget <= 0
    tiers = assign_tiers(imps, budget)
    assert tiers == [tier_for(len(imps) - i, imp, p) for i, imp in enumerate(imps)]
    assert all(1 <= t <= 5 for t in tiers)
    if imps:
        assert tiers[-1] == 1


def test_clamp_importance_bounds():
    assert [decay.clamp_importance(v) for v in (-7, 0, 1, 2, 50.5, 99, 100, 101, 500)] == [
        1, 1, 1, 2, 50.5, 99, 100, 100, 100]
    assert decay.clamp_importance(None) == decay.DEFAULT_IMPORTANCE == 50


# (index, pressure) at importance 50 whose age in half-lives, (index − 1) · p / 24, is exactly a boundary.
EXACT_BOUNDARIES = [(10, 0.536, decay.Z1), (3, 8.748, decay.Z2), (3, 15.864, decay.Z3), (4, 20.696, decay.Z4)]


@pytest.mark.parametrize(("index", "p", "z"), EXACT_BOUNDARIES)
def test_a_boundary_belongs_to_the_older_tier(index, p, z):
    """Z1..Z4 are lower-inclusive for the older tier: z == Z_k renders at P(k+1), a hair less at P(k)."""
    assert decay._age_in_half_lives(index, 50, p) == z  # the vector really sits on the boundary
    older = decay.Z.index(z) + 2
    assert decay.base_tier(index, 50, p) == older
    assert decay.base_tier(index, 50, p * (1 - 1e-9)) == older - 1
    assert tier_for(index, 50, p) == (decay.ARCHIVED if older == 5 else older)  # z == Z4 is archived
    assert tier_for(index, 50, p * (1 - 1e-9)) == older - 1


def test_base_tier_is_at_most_p5_and_ignores_the_overlap_cap():
    assert decay.base_tier(10_000, 50, 1.0) == decay.ARCHIVED == 5
    assert decay.base_tier(64, 50, 1.0) == 5 and tier_for(64, 50, 1.0, overlap=1.0) == 4


def test_overlap_counts_at_most_one():
    """An overlap above 1 extends the archive boundary by G half-lives, no more (index 112 is z = 4.625)."""
    assert tier_for(64 + 2 * 24, 50, 1.0, overlap=2.0) == 5
    assert tier_for(64 + 2 * 24 - 1, 50, 1.0, overlap=2.0) == 4


def test_rows_as_objects_and_as_sqlite_rows_without_the_optional_columns():
    """Rows may be plain objects or sqlite3.Row; `legacy` and `content` are optional in both."""
    import sqlite3
    from types import SimpleNamespace

    importances = [100] + [50] * 15
    objects = [SimpleNamespace(importance=imp) for imp in importances]
    assert assign_tiers(objects, 1000) == VECTORS[1][2]
    legacy = SimpleNamespace(importance=None, legacy=1, content="x\nU: keep")
    assert assign_tiers([legacy, *objects], 1000) == [3, *VECTORS[1][2]]

    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE c (importance INTEGER)")
    conn.executemany("INSERT INTO c VALUES (?)", [(imp,) for imp in importances])
    assert assign_tiers(conn.execute("SELECT importance FROM c").fetchall(), 1000) == VECTORS[1][2]
