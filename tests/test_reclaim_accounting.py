"""transform/reclaim.py and transform/accounting.py in figures: what dropping each kind of tag saves, the order and
stopping point of a pressure reclaim, and how the served size is attributed message by message."""

from __future__ import annotations

from magic_context.transform import accounting, drops, reclaim, tagger
from magic_context.transform.tags import (
    DROPPED,
    KIND_MEDIA,
    KIND_TEXT,
    KIND_TOOL,
    MODE_EDIT_MARKER,
    MODE_PREVIEW,
    MODE_REMOVED,
    MODE_SKELETON,
    MODE_TRUNCATED,
    Tag,
)
from magic_context.wire import model as m

PLACEHOLDER = drops.PLACEHOLDER_TOKENS  # 8
PREVIEW = drops.PREVIEW_TOKENS  # 91


def test_the_cost_constants() -> None:
    assert (PLACEHOLDER, PREVIEW, drops.LIVE_PREVIEW_TOKENS) == (8, 91, 4060)


def tool(number: int, tokens: int, *, index: int | None = None, input_tokens: int = 0, call: bool = True,
         pinned: bool = False, results: bool = True) -> tagger.Site:
    at = number if index is None else index
    result = m.Block(m.TOOL_RESULT, text="out", tool_id=f"t{number}")
    call_block = m.Block(m.TOOL_CALL, tool_id=f"t{number}", tool_name="read")
    tag = Tag(number, f"tool:{number}", KIND_TOOL, f"r{number}", tokens=tokens, input_tokens=input_tokens)
    return tagger.Site(tag, at + 1, result, m.TOOL, call=(at, call_block) if call else None,
                       results=[(at + 1, result)] if results else [], pinned=pinned)


def text(number: int, tokens: int, role: str, *, index: int | None = None, kind: str = KIND_TEXT) -> tagger.Site:
    block = m.Block(m.TEXT, text="t", key="p0")
    tag = Tag(number, f"x:{number}", kind, f"m{number}", tokens=tokens)
    return tagger.Site(tag, number if index is None else index, block, role)


# --- saving ----------------------------------------------------------------------------------------


def test_saving_per_kind() -> None:
    assert reclaim.saving(tool(1, 100, input_tokens=30)) == 130  # the call goes too
    assert reclaim.saving(tool(1, 100, input_tokens=30, call=False)) == 100  # an orphan output
    assert reclaim.saving(tool(1, 100, input_tokens=30, pinned=True)) == 92  # the call stays: a placeholder
    assert reclaim.saving(tool(1, 5, pinned=True)) == 0
    assert reclaim.saving(text(1, 100, m.USER)) == 9  # a truncated preview stays
    assert reclaim.saving(text(1, 90, m.USER)) == 0
    assert reclaim.saving(text(1, 100, m.ASSISTANT)) == 92
    assert reclaim.saving(text(1, 3, m.ASSISTANT)) == 0
    assert reclaim.saving(text(1, 3, m.USER, kind=KIND_MEDIA)) == 500


# --- plan ------------------------------------------------------------------------------------------


def sites() -> list[tagger.Site]:
    """user text 1 (300), assistant text 2 (200), tool 3 (1000 + 50), media 4, tool 5 without results,
    tool 6 (400), user text 7 in the live message (5000)."""
    return [text(1, 300, m.USER, index=0), text(2, 200, m.ASSISTANT, index=1), tool(3, 1_000, index=2, input_tokens=50),
            text(4, 0, m.USER, index=4, kind=KIND_MEDIA), tool(5, 700, index=5, results=False), tool(6, 400, index=6),
            text(7, 5_000, m.USER, index=9)]


def picked(plan: reclaim.ReclaimPlan) -> list[tuple[int, str, str]]:
    return [(d.site.tag.number, d.mode, d.lane) for d in plan.drops]


def test_plan_drops_tools_then_media_then_assistant_then_user_text() -> None:
    plan = reclaim.plan(sites(), 10_000, 0, 99, include_protected=False)
    assert picked(plan) == [(3, MODE_REMOVED, "reclaim"), (6, MODE_REMOVED, "reclaim"), (4, "placeholder", "reclaim"),
                            (2, "placeholder", "reclaim"), (1, MODE_TRUNCATED, "reclaim")]  # 7 is the live turn
    assert (plan.reclaimed_tokens, plan.target_tokens) == (1_050 + 400 + 500 + 192 + 209, 0)


def test_plan_stops_once_the_target_is_reached() -> None:
    plan = reclaim.plan(sites(), 10_000, 10_000 - 1_050, 99, include_protected=False)
    assert picked(plan) == [(3, MODE_REMOVED, "reclaim")] and plan.reclaimed_tokens == 1_050
    plan = reclaim.plan(sites(), 10_000, 10_000 - 1_051, 99, include_protected=False)
    assert [d.site.tag.number for d in plan.drops] == [3, 6]
    assert reclaim.plan(sites(), 10_000, 10_000, 99, include_protected=False).drops == []


def test_plan_spares_dropped_protected_and_small_gains() -> None:
    spared = sites()
    spared[2].tag.status = DROPPED
    plan = reclaim.plan(spared, 10_000, 0, 4, include_protected=False)  # tags 4.. protected
    assert [d.site.tag.number for d in plan.drops] == [2, 1]
    plan = reclaim.plan(sites(), 10_000, 0, 4, include_protected=True)
    assert [d.site.tag.number for d in plan.drops] == [3, 6, 4, 2, 1]
    plan = reclaim.plan(sites(), 10_000, 0, 99, include_protected=False, floor_saving=400)
    assert [d.site.tag.number for d in plan.drops] == [3, 4]  # 400 itself is not above the floor
    assert reclaim.plan([], 10, 0, 99, include_protected=True) == reclaim.ReclaimPlan([], 0, 0)


# --- savings by message ----------------------------------------------------------------------------


def dropped(site: tagger.Site, mode: str | None = None) -> tagger.Site:
    site.tag.status, site.tag.drop_mode = DROPPED, mode
    return site


def test_savings_by_message_per_mode() -> None:
    assert accounting.savings_by_message([tool(1, 100, input_tokens=30), text(2, 100, m.USER)]) == {}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=30))]) == {2: 100, 1: 30}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=30, call=False))]) == {2: 100}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=30), MODE_SKELETON)]) == {2: 92}
    assert accounting.savings_by_message([dropped(tool(1, 5), MODE_SKELETON)]) == {2: 0}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=30), MODE_EDIT_MARKER)]) == {2: 92, 1: 6}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=10), MODE_EDIT_MARKER)]) == {2: 92, 1: 0}
    assert accounting.savings_by_message([dropped(tool(1, 100, input_tokens=30, pinned=True))]) == {2: 92}
    assert accounting.savings_by_message([dropped(tool(1, 100, results=False))]) == {}
    assert accounting.savings_by_message([dropped(text(3, 100, m.USER))]) == {3: 9}
    assert accounting.savings_by_message([dropped(text(3, 100, m.USER), "placeholder")]) == {3: 92}
    assert accounting.savings_by_message([dropped(text(3, 100, m.ASSISTANT))]) == {3: 92}
    assert accounting.savings_by_message([dropped(text(3, 50, m.USER))]) == {3: 0}
    assert accounting.savings_by_message([dropped(text(3, 0, m.USER, kind=KIND_MEDIA))]) == {3: 492}


def test_savings_of_a_preview_land_where_it_is_served() -> None:
    served_elsewhere = dropped(tool(1, 10_000, input_tokens=30), MODE_PREVIEW)
    served_elsewhere.message_index = 9  # the output is served in its first result's message (index 2)
    assert accounting.savings_by_message([served_elsewhere]) == {2: 5_940}
    assert accounting.savings_by_message([dropped(text(3, 10_000, m.USER), MODE_PREVIEW)]) == {3: 5_940}
    assert accounting.savings_by_message([dropped(text(3, 4_000, m.USER), MODE_PREVIEW)]) == {3: 0}
    orphan = dropped(tool(1, 10_000, results=False), MODE_PREVIEW)
    orphan.message_index = 7
    assert accounting.savings_by_message([orphan]) == {7: 5_940}  # no result: the site's own message


def test_savings_add_up_per_message() -> None:
    assert accounting.savings_by_message([dropped(tool(1, 100, index=4)), dropped(tool(2, 50, index=4)),
                                          dropped(text(5, 108, m.ASSISTANT))]) == {5: 250, 4: 0}


# --- served tokens and reasoning -------------------------------------------------------------------


def conversation() -> list[m.Message]:
    return [m.Message("u0", m.USER, [m.Block(m.TEXT, text="q", key="p0")]),
            m.Message("a1", m.ASSISTANT, [m.Block(m.REASONING, text="abcdef", key="r"),
                                          m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", key="p0")]),
            m.Message("r1", m.TOOL, [m.Block(m.TOOL_RESULT, text="out", tool_id="c1", key="p0")]),
            m.Message("a2", m.ASSISTANT, [m.Block(m.REASONING, text="xyz", key="r"), m.Block(m.REASONING, text="uv",
                                                                                            key="r2"),
                                          m.Block(m.TEXT, text="done", key="p0")])]


def test_reasoning_tokens_are_estimated_once_per_stripped_message() -> None:
    cache = {"a1": 99}
    accounting.reasoning_tokens(conversation(), {"a1", "a2", "gone"}, cache, len)
    assert cache == {"a1": 99, "a2": 5}


def test_served_tokens_drop_emptied_messages_and_stripped_reasoning() -> None:
    messages = conversation()
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    arc = next(s for s in sites if s.tag.kind == KIND_TOOL)
    arc.tag.tokens, arc.tag.input_tokens = 30, 20
    sizes = [10, 60, 40, 70]
    assert accounting.served_tokens(messages, sizes, sites) == 180
    arc.tag.status = DROPPED
    assert accounting.served_tokens(messages, sizes, sites) == 80  # a1 and r1 go whole
    assert accounting.served_tokens(messages, sizes, sites, kept=[messages[0], messages[1], messages[3]]) == 120
    assert accounting.served_tokens(messages, sizes, sites, stripped={"a2"}, reasoning={"a2": 5}) == 75
    assert accounting.served_tokens(messages, sizes, sites, stripped={"a2"}) == 80  # no cache: nothing known
    assert accounting.served_tokens(messages, sizes, sites, stripped=set(), reasoning={"a2": 5}) == 80
    assert accounting.served_tokens(messages, sizes, sites, stripped={"a2"}, reasoning={"a2": 500}) == 10


def test_plan_takes_a_one_token_saving_by_default() -> None:
    tiny = [text(1, 9, m.ASSISTANT, index=0), text(2, 50, m.USER, index=1)]  # saves 9 - 8 = 1; index 1 is live
    assert picked(reclaim.plan(tiny, 100, 0, 99, include_protected=False)) == [(1, "placeholder", "reclaim")]


def test_savings_of_several_drops_in_one_message_add_up() -> None:
    """Two parts of one message dropped in the same mode: both savings count (each mode's branch)."""
    assert accounting.savings_by_message([dropped(text(1, 5_000, m.USER, index=3), MODE_PREVIEW),
                                          dropped(text(2, 5_000, m.USER, index=3), MODE_PREVIEW)]) == {3: 1_880}
    assert accounting.savings_by_message([dropped(text(1, 0, m.USER, index=3, kind=KIND_MEDIA)),
                                          dropped(text(2, 0, m.USER, index=3, kind=KIND_MEDIA))]) == {3: 984}
    for mode, calls in ((MODE_SKELETON, {}), (MODE_EDIT_MARKER, {0: 12}), (MODE_REMOVED, {0: 60})):
        pair = [dropped(tool(1, 100, index=0, input_tokens=30), mode), dropped(tool(2, 50, index=0, input_tokens=30),
                                                                              mode)]
        first = {1: 92 + 42} if mode != MODE_REMOVED else {1: 150}
        assert accounting.savings_by_message(pair) == {**first, **calls}, mode


def test_served_tokens_subtract_nothing_for_a_stripped_message_without_a_cached_cost() -> None:
    messages = conversation()
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    assert accounting.served_tokens(messages, [10, 60, 40, 70], sites, stripped={"u0", "a2"},
                                    reasoning={"a2": 5}) == 175
