"""The protected-tail boundary: true token sizes, atomic tool arcs, stale open arcs, the newest message,
the oversize leading arc under the head cap, and keep-N for wrapup."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.history import boundary as bd


def items(n: int, size: int = 100, prompts: tuple[int, ...] = (), start: int = 0) -> list[bd.TailItem]:
    return [bd.TailItem(o, size, o in prompts) for o in range(start, start + n)]


def test_token_mode_protects_the_newest_tokens() -> None:
    b = bd.protected_tail_boundary(items(20), [], start=0, protect_tokens=500, live_prompt_floor=False)
    assert (b.start, b.end) == (0, 14)  # the newest five messages (500 tokens) stay raw
    assert b.eligible_tokens == 1500 and b.eligible_messages == 15 and b.tail_tokens == 2000
    assert not b.empty


def test_true_sizes_not_message_counts() -> None:
    tail = items(20)
    tail[18] = bd.TailItem(18, 5_000)
    b = bd.protected_tail_boundary(tail, [], start=0, protect_tokens=1_000, live_prompt_floor=False)
    assert b.end == 17  # one huge message fills the protected budget


def test_everything_small_stays_raw() -> None:
    b = bd.protected_tail_boundary(items(5), [], start=0, protect_tokens=10_000, live_prompt_floor=False)
    assert b.empty and b.eligible_tokens == 0


def test_start_is_the_last_compartment_end_plus_one() -> None:
    b = bd.protected_tail_boundary(items(30), [], start=10, protect_tokens=300, live_prompt_floor=False)
    assert (b.start, b.end) == (10, 26)
    assert b.eligible_messages == 17


def test_live_prompt_floor() -> None:
    tail = items(40, prompts=(0, 10, 30))
    b = bd.protected_tail_boundary(tail, [], start=0, protect_tokens=200, live_prompt_floor=True)
    assert b.end == 29 and "live prompt" in b.reason
    # in the emergency band the floor goes and the size walk decides
    b = bd.protected_tail_boundary(tail, [], start=0, protect_tokens=200, live_prompt_floor=False)
    assert b.end == 37


def test_completed_arcs_are_atomic() -> None:
    # a call at 12 answered at 16 straddles the size-walk cut at 14
    b = bd.protected_tail_boundary(items(20), [(12, 16)], start=0, protect_tokens=500, live_prompt_floor=False)
    assert b.end == 11 and "tool arc" in b.reason
    # nested / chained arcs fence transitively
    b = bd.protected_tail_boundary(items(20), [(8, 13), (12, 16)], start=0, protect_tokens=500,
                                   live_prompt_floor=False)
    assert b.end == 7
    assert bd.fence(14, [(12, 16)], 0) == 11
    assert bd.fence(16, [(12, 16)], 0) == 16  # a cut after the result splits nothing


def test_stale_open_arc_does_not_freeze_the_historian() -> None:
    # a call at 3 that never got a result (interrupted), followed by plenty of history
    spans = [(3, None), (5, 6)]
    b = bd.protected_tail_boundary(items(40), spans, start=0, protect_tokens=500, live_prompt_floor=False)
    assert b.end == 34
    keep = bd.keep_boundary(items(40), spans, start=0, keep=10)
    assert keep.end == 29


def test_newest_message_and_its_arc_are_never_folded() -> None:
    b = bd.protected_tail_boundary(items(10), [], start=0, protect_tokens=0, live_prompt_floor=False)
    assert b.end == 8 and b.newest == 9
    # the newest message is the result of a call made three messages earlier (parallel calls)
    b = bd.protected_tail_boundary(items(10), [(6, 9), (6, 8)], start=0, protect_tokens=0, live_prompt_floor=False)
    assert b.end == 5
    # the newest message is an open call
    b = bd.protected_tail_boundary(items(10), [(9, None)], start=0, protect_tokens=0, live_prompt_floor=False)
    assert b.end == 8
    assert bd.keep_boundary(items(10), [(6, 9)], start=0, keep=0).end == 5


def test_head_cap_keeps_arcs_whole() -> None:
    sizes = [(o, 100) for o in range(20)]
    assert bd.apply_head_cap(sizes, [], 0, 19, 1_000) == 9
    assert bd.apply_head_cap(sizes, [(8, 11)], 0, 19, 1_000) == 7
    assert bd.apply_head_cap(sizes, [], 0, 19, 10_000) == 19


def test_head_cap_admits_an_oversize_leading_arc_whole() -> None:
    # a call at 0 whose result (at 3) carries 50 000 tokens: the cap of 8 000 lands inside the arc
    sizes = [(0, 200), (1, 100), (2, 100), (3, 50_000), (4, 100), (5, 100)]
    assert bd.apply_head_cap(sizes, [(0, 3)], 0, 5, 8_000) == 3
    # chained leading arcs are one atomic unit
    assert bd.apply_head_cap(sizes, [(0, 2), (1, 3)], 0, 5, 8_000) == 3
    assert bd.component_end(0, [(0, 2), (1, 3), (4, 5)]) == 3
    # a single oversize message is admitted alone
    assert bd.apply_head_cap([(7, 90_000), (8, 10)], [], 7, 8, 8_000) == 7


def test_keep_mode_counts_messages_including_tools() -> None:
    b = bd.keep_boundary(items(50), [], start=0, keep=20)
    assert (b.start, b.end) == (0, 29) and b.eligible_messages == 30
    assert "newest 20" in b.reason
    # arcs stay intact: a call at 28 answered at 31 keeps the whole arc raw
    assert bd.keep_boundary(items(50), [(28, 31)], start=0, keep=20).end == 27
    # nothing to fold when the tail is no longer than N
    assert bd.keep_boundary(items(20), [], start=0, keep=20).empty
    assert bd.keep_boundary(items(25, start=30), [], start=30, keep=20).end == 34


def test_protected_tail_tokens() -> None:
    assert bd.protected_tail_tokens(200_000, 65) == 19_500  # 15% of 130 000 usable
    assert bd.protected_tail_tokens(120_000, 65) == 11_700
    assert bd.protected_tail_tokens(40_000, 65) == 3_900  # 15% of 26 000 usable
    assert bd.protected_tail_tokens(8_000, 65) == 1_000  # the floor
    assert bd.protected_tail_tokens(2_000, 50) == 400  # 40% of a tiny usable window caps the floor
    assert bd.protected_tail_tokens(2_000_000, 80) == 96_000


def test_unsafe_cuts() -> None:
    assert bd.unsafe_cuts([(2, 5), (7, None)]) == frozenset({2, 3, 4})


# --- invariants over random tails ------------------------------------------------------------------------------


@st.composite
def tails(draw: st.DrawFn) -> tuple[int, list[bd.TailItem], list[bd.Span]]:
    """A tail from `start`: random sizes and prompts, and tool arcs (completed, chained, or open) inside it."""
    start = draw(st.integers(0, 5))
    n = draw(st.integers(8, 40))
    sizes = draw(st.lists(st.integers(1, 800), min_size=n, max_size=n))
    prompts = draw(st.sets(st.integers(start, start + n - 1), min_size=1, max_size=12))
    arcs: list[bd.Span] = []
    for _ in range(draw(st.integers(1, 8))):
        call = draw(st.integers(start, start + n - 2))
        result = draw(st.integers(call + 1, min(call + 6, start + n - 1)))
        arcs.append((call, None if draw(st.integers(0, 4)) == 0 else result))  # one in five never answered
    return start, [bd.TailItem(start + i, s, start + i in prompts) for i, s in enumerate(sizes)], arcs


@settings(max_examples=examples(400), deadline=None)
@given(tails(), st.integers(0, 4_000), st.booleans())
def test_no_cut_ever_splits_a_tool_arc_or_folds_the_newest(case: tuple[int, list[bd.TailItem], list[bd.Span]],
                                                            protect: int, floor: bool) -> None:
    start, tail, arcs = case
    b = bd.protected_tail_boundary(tail, arcs, start=start, protect_tokens=protect, live_prompt_floor=floor)
    newest = tail[-1].ordinal
    assert start - 1 <= b.end < newest
    assert b.empty or b.end not in bd.unsafe_cuts(arcs)
    assert b.eligible_tokens == sum(i.tokens for i in tail if i.ordinal <= b.end)
