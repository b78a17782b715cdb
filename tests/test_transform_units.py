"""Unit tests of the transform's building blocks: ranges, tagging, drops, scheduler, markers, nudges."""

from __future__ import annotations

import pytest

from magic_context.errors import BadInput
from magic_context.transform import drops, guidance, nudges, scheduler, tagger, temporal
from magic_context.transform.ranges import format_ranges, parse_ranges
from magic_context.transform.tags import DROPPED, MODE_EDIT_MARKER, MODE_SKELETON, placeholder
from magic_context.wire import model as m


def test_ranges_parse_and_format() -> None:
    assert parse_ranges("5") == [5]
    assert parse_ranges("3-5, 9,1") == [1, 3, 4, 5, 9]
    assert parse_ranges("1-5,8,12-15") == [1, 2, 3, 4, 5, 8, 12, 13, 14, 15]
    assert parse_ranges("§7§") == [7]
    assert format_ranges([3, 4, 5, 9]) == "3-5,9"
    for bad in ("", "  ", "a", "5-3", "1,,2", "-3", "1-", "1-2000"):
        with pytest.raises(BadInput):
            parse_ranges(bad)


@pytest.mark.parametrize("echo", ["§12§ ", "§12§ §13§ ", '§12">§', '§12">§12§ ', "  §3§\t"])
def test_echoed_tags_are_stripped(echo: str) -> None:
    assert tagger.strip_echo(echo + "Done.") == "Done."
    assert tagger.strip_echo("Section §12§ is fine") == "Section §12§ is fine"


def _conversation() -> list[m.Message]:
    return [
        m.Message("u1", m.USER, [m.Block(m.TEXT, text="please read a.py", key="p0")]),
        m.Message("a1", m.ASSISTANT, [
            m.Block(m.REASONING, text="think", meta={"signature": "sig"}, key="p0"),
            m.Block(m.TEXT, text="§1§ Reading it.", key="p1"),
            m.Block(m.TOOL_CALL, tool_id="t1", tool_name="read", input={"filePath": "a.py"}, key="p2"),
        ]),
        m.Message("r1", m.TOOL, [m.Block(m.TOOL_RESULT, text="print(1)", tool_id="t1", tool_name="read", key="out")]),
        m.Message("u2", m.USER, [m.Block(m.TEXT, text="x" * 400, key="p0"),
                                 m.Block(m.MEDIA, media_type="image/png", key="p1")]),
    ]


def test_tags_are_assigned_in_order_and_reused() -> None:
    messages = _conversation()
    known: dict = {}
    sites, _new, counter = tagger.assign(messages, known, 0, len)
    assert [s.tag.number for s in sites] == [1, 2, 3, 4, 5]
    assert [s.tag.kind for s in sites] == ["text", "text", "tool", "text", "media"]
    assert messages[1].blocks[1].text == "Reading it."  # the model's echo was stripped
    assert sites[2].call is not None and sites[2].results
    again, new_again, counter_again = tagger.assign(_conversation(), known, counter, len)
    assert [s.tag.number for s in again] == [1, 2, 3, 4, 5] and new_again == [] and counter_again == 5
    tagger.write_prefixes(again)
    assert again[0].block.text == "§1§ please read a.py"
    assert again[2].results[0][1].text == "§3§ print(1)"
    assert again[4].block.media_type == "image/png"  # media: tagged, no visible prefix


def test_drops_replay_the_same_bytes() -> None:
    outputs = []
    for _ in range(2):
        messages = _conversation()
        sites, _, _ = tagger.assign(messages, {}, 0, len)
        for site in sites:
            if site.tag.number in (2, 3, 4, 5):
                site.tag.status = DROPPED
        kept = drops.apply(messages, sites, set())
        outputs.append([(msg.id, [(b.kind, b.text) for b in msg.blocks]) for msg in kept])
    assert outputs[0] == outputs[1]
    ids = [msg_id for msg_id, _ in outputs[0]]
    assert "r1" not in ids  # the tool arc went whole, its result message with it
    assistant = dict(outputs[0])["a1"]
    assert (m.TEXT, placeholder(2)) in assistant and all(kind != m.TOOL_CALL for kind, _ in assistant)
    user = dict(outputs[0])["u2"]
    assert user[0][1].startswith("[truncated §4§]\n") and user[0][1].endswith("…")
    assert user[1] == (m.TEXT, placeholder(5))


def test_truncation_preview_rules() -> None:
    assert drops.truncated(3, "short") == "[truncated §3§]\nshort"
    text = ("word " * 100).strip()
    preview = drops.truncated(3, text).split("\n", 1)[1]
    assert len(preview) <= drops.PREVIEW_CHARS + 1 and preview.endswith("…") and not preview[:-1].endswith(" ")


def test_skeleton_and_edit_marker_keep_the_call() -> None:
    messages = _conversation()
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    tool = sites[2]
    tool.tag.status, tool.tag.drop_mode = DROPPED, MODE_EDIT_MARKER
    kept = drops.apply(messages, sites, set())
    call = next(b for msg in kept for b in msg.blocks if b.kind == m.TOOL_CALL)
    assert call.input == {"filePath": "a.py", "dropped": placeholder(3)}
    result = next(b for msg in kept for b in msg.blocks if b.kind == m.TOOL_RESULT)
    assert result.text == placeholder(3)
    messages = _conversation()
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    sites[2].tag.status, sites[2].tag.drop_mode = DROPPED, MODE_SKELETON
    kept = drops.apply(messages, sites, set())
    assert any(b.kind == m.TOOL_CALL and b.input == {"filePath": "a.py"} for msg in kept for b in msg.blocks)


def test_whole_turn_goes_with_its_reasoning() -> None:
    messages = _conversation()
    messages[1].blocks.pop(1)  # the assistant turn is now reasoning + the tool call only
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    next(s for s in sites if s.tag.kind == "tool").tag.status = DROPPED
    kept = drops.apply(messages, sites, set())
    assert [msg.id for msg in kept] == ["u1", "u2"]


@pytest.mark.parametrize("mode", [None, MODE_EDIT_MARKER, MODE_SKELETON])
def test_a_pinned_call_of_an_atomic_message_stays(mode: str | None) -> None:
    """A reply the provider rejects partially (OpenAI Responses with reasoning) keeps its call, unedited."""
    from magic_context.transform import accounting, reclaim

    messages = _conversation()
    messages[1].blocks.pop(1)  # reasoning + the call only: unpinned, the whole turn would go (test above)
    messages[1].atomic = True
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    tool = next(s for s in sites if s.tag.kind == "tool")
    assert tool.pinned
    tool.tag.status, tool.tag.drop_mode = DROPPED, mode
    assert drops.mode_of(tool) == MODE_SKELETON
    assert reclaim.saving(tool) == max(0, tool.tag.tokens - drops.PLACEHOLDER_TOKENS)
    assert accounting.savings_by_message(sites) == {2: max(0, tool.tag.tokens - drops.PLACEHOLDER_TOKENS)}
    kept = drops.apply(messages, sites, set())
    assert [msg.id for msg in kept] == ["u1", "a1", "r1", "u2"]
    assert [b.kind for b in kept[1].blocks] == [m.REASONING, m.TOOL_CALL]
    assert kept[1].blocks[1].input == {"filePath": "a.py"} and kept[2].blocks[0].text == placeholder(2)


def test_scheduler_limits_and_decisions() -> None:
    assert scheduler.resolve_limit(500, "claude-sonnet-4-5").tokens == 200_000  # implausible → table
    assert scheduler.resolve_limit(50_000, None).proven
    assert scheduler.resolve_limit(None, "gpt-4o").tokens == 128_000
    assert scheduler.resolve_limit(None, "mystery").source == "default"
    assert scheduler.threshold_percent(65, None, 100_000) == 65
    assert scheduler.threshold_percent(65, 30_000, 100_000) == 30
    warm = scheduler.decide(50_000, 100_000, 65, now_ms=1000, last_activity_ms=0, ttl_ms=300_000)
    assert not warm.execute and not warm.force
    hot = scheduler.decide(70_000, 100_000, 65, now_ms=1000, last_activity_ms=0, ttl_ms=300_000)
    assert hot.execute and not hot.force
    cold = scheduler.decide(10_000, 100_000, 65, now_ms=400_000, last_activity_ms=0, ttl_ms=300_000)
    assert cold.execute and cold.ttl_expired
    never = scheduler.decide(10_000, 100_000, 65, now_ms=10**12, last_activity_ms=0, ttl_ms=float("inf"))
    assert not never.execute
    band = scheduler.decide(96_000, 100_000, 65, now_ms=0, last_activity_ms=None, ttl_ms=300_000)
    assert band.force and band.block_band
    raised = scheduler.decide(87_000, 100_000, 88, now_ms=0, last_activity_ms=None, ttl_ms=300_000)
    assert not raised.force  # the force band follows a raised threshold (threshold + 2 = 90%)
    assert scheduler.decide(91_000, 100_000, 88, now_ms=0, last_activity_ms=None, ttl_ms=300_000).force


def test_temporal_markers() -> None:
    assert temporal.format_gap(5 * 60_000) == "+5m"
    assert temporal.format_gap((2 * 60 + 15) * 60_000) == "+2h 15m"
    assert temporal.format_gap(3 * 3_600_000) == "+3h"
    assert temporal.format_gap((26) * 3_600_000) == "+1d 2h"
    assert temporal.format_gap(15 * 86_400_000) == "+2w 1d"
    messages = [
        m.Message("u1", m.USER, [m.Block(m.TEXT, text="a", key="p0")], created_at=0),
        m.Message("a1", m.ASSISTANT, [m.Block(m.TEXT, text="b", key="p0")], created_at=1000, completed_at=2000),
        m.Message("u2", m.USER, [m.Block(m.TEXT, text="c", key="p0")], created_at=2000 + 8_100_000),
        m.Message("u3", m.USER, [m.Block(m.TEXT, text="d", key="p0")], created_at=2000 + 8_160_000),
    ]
    found = temporal.markers(messages)
    assert found == {"u2": "<!-- +2h 15m -->\n"}
    temporal.apply(messages, found)
    temporal.apply(messages, found)
    assert messages[2].blocks[0].text == "<!-- +2h 15m -->\nc"
    assert temporal.MARKER_RE.match(messages[2].blocks[0].text)


def test_guidance_join_and_skip() -> None:
    text = guidance.guidance_text(reduce_available=True, frozen_date="Today's date: 2026-01-01")
    assert "ctx_reduce" in text and text.endswith("Today's date: 2026-01-01")
    assert "ctx_reduce tool" not in guidance.guidance_text(reduce_available=False, frozen_date="d")
    joined = guidance.join("You are helpful.", text)
    assert joined == "You are helpful.\n\n" + text
    assert guidance.join(joined, text) == joined
    assert guidance.skipped("x <!-- magic-context: skip --> y", ["<!-- magic-context: skip -->"])


def _sites(sizes: list[int]) -> list[tagger.Site]:
    out = []
    for number, size in enumerate(sizes, start=1):
        tag = tagger.Tag(number, f"k{number}", "tool", f"m{number}", tokens=size, tool_name="read")
        block = m.Block(m.TOOL_RESULT, text="x", tool_id=f"t{number}")
        call = m.Block(m.TOOL_CALL, tool_id=f"t{number}", tool_name="read")
        out.append(tagger.Site(tag, number, block, m.TOOL, call=(number, call), results=[(number, block)]))
    return out


def test_nudge_channels() -> None:
    state: dict = {}
    quiet = nudges.measure(_sites([1000] * 10), protected_from=100)
    assert nudges.decide(quiet, state, quiet=False) is None  # T < 60k
    sites = [*_sites([3000] * 30), tagger.Site(tagger.Tag(99, "t", "text", "u"), 0, None, m.USER)]
    sites[-1].tag.tokens = 60_000
    meas = nudges.measure(sites, protected_from=25)
    text = nudges.decide(meas, state, quiet=False)
    assert text and "<system-reminder>" in text and "§1§ read" in text and state["level"] == "firm"
    assert nudges.decide(meas, state, quiet=False) is None  # no escalation, no growth: quiet
    assert nudges.decide(meas, state, quiet=True) is None and state["level"] is None
    big = nudges.measure(_sites([4000] * 60), protected_from=61)
    assert "Routine housekeeping" in (nudges.decide(big, {}, quiet=False) or "")


def test_nudge_replay_is_stable() -> None:
    messages = _conversation()
    anchors: list = []
    assert nudges.fire(messages, anchors, "\n\n<system-reminder>x</system-reminder>")
    first = [b.text for msg in messages for b in msg.blocks]
    fresh = _conversation()
    nudges.replay(fresh, anchors)
    assert [b.text for msg in fresh for b in msg.blocks] == first


def test_session_fingerprint_covers_a_bodys_conversation_mark() -> None:
    from magic_context.transform import protocol
    from magic_context.wire import identity

    def sid(doc: dict, **flags: str) -> str:
        return protocol.read_input(doc, {"--project": "/p", **{f"--{k}": v for k, v in flags.items()}}).session_id

    codex = {"model": "gpt-5-codex", "prompt_cache_key": "thread-a",
             "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}]}]}
    assert sid(codex) == sid(dict(codex)) != sid(dict(codex, prompt_cache_key="thread-b"))
    assert sid(codex, session="s9") == "s9"
    unmarked = {k: v for k, v in codex.items() if k != "prompt_cache_key"}
    assert sid(unmarked) == "fp-" + identity.digest(b"/p\x00<env/>", 8)  # bodies without a mark keep their ids
    claude = {"model": "claude-opus-5-5", "system": "s", "messages": [{"role": "user", "content": "hi"}],
              "metadata": {"user_id": '{"device_id":"d","account_uuid":"","session_id":"1"}'}}
    other = dict(claude, metadata={"user_id": '{"device_id":"d","account_uuid":"","session_id":"2"}'})
    assert sid(claude) != sid(other) and sid(claude).startswith("fp-")
