"""transform/nudges.py exactly: what is measured, the level bands, the text of each nudge (it is replayed byte for
byte), the decide() state machine (reset, quiet, escalation, growth, channel 2 claim/release), and anchoring."""

from __future__ import annotations

import pytest

from magic_context.transform import nudges, tagger
from magic_context.transform.tags import DROPPED, Tag
from magic_context.wire import model as m


def tool(number: int, tokens: int, name: str | None = "read", *, results: bool = True) -> tagger.Site:
    block = m.Block(m.TOOL_RESULT, text="x", tool_id=f"t{number}")
    tag = Tag(number, f"k{number}", "tool", f"m{number}", tokens=tokens, tool_name=name)
    return tagger.Site(tag, number, block, m.TOOL, results=[(number, block)] if results else [])


def text(number: int, tokens: int) -> tagger.Site:
    return tagger.Site(Tag(number, f"t{number}", "text", "u", tokens=tokens), 0, None, m.USER)


def test_measure_counts_active_mass_and_unprotected_answered_tool_outputs() -> None:
    dropped = tool(2, 500)
    dropped.tag.status = DROPPED
    sites = [tool(1, 100), dropped, tool(3, 1_000, results=False), text(4, 10_000), tool(5, 7), tool(6, 3)]
    meas = nudges.measure(sites, protected_from=6)
    assert (meas.tail, meas.reclaimable) == (11_110, 107)
    assert [s.tag.number for s in meas.candidates] == [1, 5]  # 6 is the oldest protected tag
    assert meas.share == pytest.approx(107 / 11_110)
    assert nudges.measure([], 1).share == 0.0


@pytest.mark.parametrize(("share", "level"), [(0.6, "urgent"), (0.59, "firm"), (0.4, "firm"), (0.39, "gentle"),
                                              (0.2, "gentle"), (0.19, None)])
def test_level_bands(share: float, level: str | None) -> None:
    assert nudges._level(share) == level


def meas(count: int, each: int, tail: int) -> nudges.Measure:
    return nudges.Measure(tail, count * each, [tool(i, each, None if i == 2 else "bash") for i in range(1, count + 1)])


def test_nudge_texts() -> None:
    five = meas(5, 6_100, 100_000)  # 30.5k tokens
    listing = "oldest reclaimable: §1§ bash · §2§ tool · §3§ bash · §4§ bash · …"
    what = "5 spent tool outputs (~30k tokens)"
    assert nudges.channel1_text("urgent", False, five) == (
        f"\n\n<system-reminder>\nHousekeeping backlog: {what} are reclaimable — a ctx_reduce pass is due.\n"
        f"{listing}\n</system-reminder>")
    assert nudges.channel1_text("firm", False, five) == (
        f"\n\n<system-reminder>\nHousekeeping: {what} are reclaimable — make a ctx_reduce pass at a natural "
        f"stopping point.\n{listing}\n</system-reminder>")
    assert nudges.channel1_text("gentle", False, five) == (
        f"\n\n<system-reminder>\nHousekeeping: {what} are reclaimable — drop the ones you have already processed "
        f"with ctx_reduce at a natural stopping point.\n{listing}\n</system-reminder>")
    assert nudges.channel1_text("urgent", True, five) == (
        f"\n\n<system-reminder>\nReminder: {what} are still reclaimable — ctx_reduce them at a natural stopping "
        f"point.\n{listing}\n</system-reminder>")
    four = meas(4, 500, 100_000)
    assert nudges.channel2_text(four) == (
        "\n\n<system-reminder>\nRoutine housekeeping: 4 spent tool outputs (~2k tokens) are reclaimable — make a "
        "ctx_reduce pass at a natural stopping point. oldest reclaimable: §1§ bash · §2§ tool · §3§ bash · §4§ bash"
        "\n</system-reminder>")


def test_decide_needs_a_60k_tail_and_25k_reclaimable() -> None:
    assert nudges.decide(nudges.Measure(59_999, 30_000, []), {}, quiet=False) is None
    assert nudges.decide(nudges.Measure(100_000, 24_999, []), {}, quiet=False) is None
    state: dict = {}
    fired = nudges.decide(nudges.Measure(60_000, 25_000, []), state, quiet=False)
    assert fired is not None and "Housekeeping: 0 spent tool outputs (~25k tokens) are reclaimable — make" in fired
    assert state == {"level": "firm", "last_u": 25_000}  # 25k of 60k: 42%


def test_decide_escalates_repeats_on_growth_and_resets_when_drops_land() -> None:
    state: dict = {}
    assert nudges.decide(nudges.Measure(100_000, 30_000, []), state, quiet=False) is not None  # gentle
    assert nudges.decide(nudges.Measure(100_000, 39_000, []), state, quiet=False) is None  # same level, +9k
    assert state == {"level": "gentle", "last_u": 30_000}
    firm = nudges.decide(nudges.Measure(100_000, 40_000, []), state, quiet=False)
    assert firm is not None and "make a ctx_reduce pass" in firm and state == {"level": "firm", "last_u": 40_000}
    # Growth of max(25k, 8% of the tail) at the same level: a sticky reminder.
    state.update(last_u=168_001)
    assert nudges.decide(nudges.Measure(400_000, 200_000, []), state, quiet=False) is None  # +31_999 < 32_000
    again = nudges.decide(nudges.Measure(400_000, 200_001, []), state, quiet=False)
    assert again is not None and "Reminder:" in again and state == {"level": "firm", "last_u": 200_001}
    state.update(last_u=80_000)
    assert nudges.decide(nudges.Measure(200_000, 104_999, []), state, quiet=False) is None  # +24_999 < 25k
    assert "Reminder:" in (nudges.decide(nudges.Measure(200_000, 105_000, []), state, quiet=False) or "")
    # Drops landed: the reclaimable mass shrank, the cycle starts over and the same level fires again.
    low = nudges.decide(nudges.Measure(100_000, 41_000, []), state, quiet=False)
    assert low is not None and "Housekeeping:" in low and state == {"level": "firm", "last_u": 41_000}


def test_decide_quiet_resets_and_fires_nothing() -> None:
    state = {"level": "urgent", "last_u": 90_000}
    assert nudges.decide(nudges.Measure(100_000, 95_000, []), state, quiet=True) is None
    assert state == {"level": None, "last_u": 95_000}


def test_channel2_fires_once_and_is_released_below_the_share() -> None:
    state: dict = {}
    big = nudges.Measure(100_000, 75_000, [])
    first = nudges.decide(big, state, quiet=False)
    assert first is not None and "Routine housekeeping" in first and state == {"channel2": True}
    second = nudges.decide(big, state, quiet=False)  # channel 2 claimed: channel 1 speaks (urgent)
    assert second is not None and "Housekeeping backlog" in second and state["channel2"] is True
    assert nudges.decide(nudges.Measure(100_000, 74_999, []), {}, quiet=False) is not None
    assert "Routine" not in (nudges.decide(nudges.Measure(100_000, 74_999, []), {}, quiet=False) or "")
    assert "Routine" not in (nudges.decide(nudges.Measure(100_000, 49_999, []), {"channel2": False}, quiet=False)
                             or "")  # below 50k (share ≥ 0.75 with a small tail)
    small = {"channel2": True}
    nudges.decide(nudges.Measure(59_999, 59_000, []), small, quiet=False)  # share still ≥ 0.75: kept
    assert small == {"channel2": True}
    nudges.decide(nudges.Measure(100_000, 74_999, []), small, quiet=False)
    assert small["channel2"] is False
    assert "Routine" in (nudges.decide(nudges.Measure(60_000, 50_000, []), {}, quiet=False) or "")


def msg(id_: str, *blocks: m.Block, synthetic: bool = False) -> m.Message:
    return m.Message(id_, m.USER, list(blocks), synthetic=synthetic)


def test_anchor_block_is_the_last_text_or_tool_output() -> None:
    first, result = m.Block(m.TEXT, text="a", key="p0"), m.Block(m.TOOL_RESULT, text="r", key="p1")
    assert nudges.anchor_block(msg("x", first, result, m.Block(m.MEDIA, key="p2"))) is result
    assert nudges.anchor_block(msg("x", first, m.Block(m.REASONING, text="r", key="p3"))) is first
    assert nudges.anchor_block(msg("x", m.Block(m.TOOL_CALL, key="p0"))) is None


def test_fire_appends_to_the_newest_real_message_and_keeps_64_anchors() -> None:
    messages = [msg("u1", m.Block(m.TEXT, text="one", key="p0")), msg("u2", m.Block(m.TEXT, text="two", key="p0")),
                msg("inj", m.Block(m.TEXT, text="injected", key="p0"), synthetic=True)]
    anchors = [{"key": f"old{i}:p0", "text": "!"} for i in range(64)]
    assert nudges.fire(messages, anchors, "<n>")
    assert [b.text for x in messages for b in x.blocks] == ["one", "two<n>", "injected"]
    assert len(anchors) == 64 and anchors[0]["key"] == "old1:p0" and anchors[-1] == {"key": "u2:p0", "text": "<n>"}
    blocked = [msg("u1", m.Block(m.TEXT, text="one", key="p0")), msg("a1", m.Block(m.TOOL_CALL, key="p0"))]
    assert not nudges.fire(blocked, [], "<n>") and blocked[0].blocks[0].text == "one"
    assert not nudges.fire([], [], "<n>")


def test_replay_appends_every_nudge_of_an_anchor_in_order() -> None:
    messages = [msg("u1", m.Block(m.TEXT, text="one", key="p0"), m.Block(m.MEDIA, key="p1")),
                msg("u2", m.Block(m.TOOL_RESULT, text="two", key="p0"))]
    nudges.replay(messages, [{"key": "u1:p0", "text": "<a>"}, {"key": "u2:p0", "text": "<b>"},
                             {"key": "u1:p0", "text": "<c>"}, {"key": "u1:p1", "text": "<m>"},
                             {"key": "gone:p0", "text": "<g>"}])
    assert [b.text for x in messages for b in x.blocks] == ["one<a><c>", "", "two<b>"]
    nudges.replay(messages, [])
    assert messages[0].blocks[0].text == "one<a><c>"


def test_rounded_thousands_in_the_texts() -> None:
    """30_510 tokens read as ~31k (a per-1000 rounding, half up here), 2_501 as ~3k."""
    cands = meas(4, 1, 100_000).candidates
    assert "(~31k tokens)" in nudges.channel1_text("firm", False, nudges.Measure(100_000, 30_510, cands))
    assert "(~3k tokens)" in nudges.channel2_text(nudges.Measure(100_000, 2_501, cands))


def test_decide_reset_is_saved_even_when_nothing_fires() -> None:
    state = {"level": "urgent", "last_u": 90_000}
    assert nudges.decide(nudges.Measure(100_000, 10_000, []), state, quiet=False) is None
    assert state == {"level": None, "last_u": 10_000}
    empty: dict = {}
    assert nudges.decide(nudges.Measure(100_000, 0, []), empty, quiet=False) is None
    assert empty == {}  # nothing reclaimable on a fresh state: nothing to reset


def test_channel2_is_kept_at_exactly_three_quarters() -> None:
    state = {"channel2": True}
    nudges.decide(nudges.Measure(40_000, 30_000, []), state, quiet=False)  # share 0.75, but a small tail
    assert state["channel2"] is True
