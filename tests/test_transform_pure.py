"""The small pure parts of the transform at their edges: ctx_reduce ranges (with the exact error a model reads
back), temporal markers (gap units and the 5-minute floor), and the system-prompt guidance and date line."""

from __future__ import annotations

import pytest

from magic_context.errors import BadInput
from magic_context.transform import guidance, temporal
from magic_context.transform.ranges import format_ranges, parse_ranges
from magic_context.wire import model as m

# --- ranges ----------------------------------------------------------------------------------------

EXAMPLE = 'give tag numbers like "3-5,9"'


def test_parse_ranges_accepts_spaces_and_tag_marks() -> None:
    assert parse_ranges(" 3 - 5 ,§9§, 0") == [0, 3, 4, 5, 9]
    assert parse_ranges("§§7§§") == [7]
    assert parse_ranges("4-4,4") == [4]


def test_parse_ranges_up_to_1000_tags() -> None:
    assert len(parse_ranges("1-1000")) == 1000
    assert len(parse_ranges("1-500,501-1000")) == 1000
    assert parse_ranges("0-999")[-1] == 999


@pytest.mark.parametrize(("text", "message", "fix"), [
    ("", "empty drop range", EXAMPLE),
    (" \t", "empty drop range", EXAMPLE),
    (5, "empty drop range", EXAMPLE),
    ("1,,2", "empty element in range '1,,2'", EXAMPLE),
    ("1, §§", "empty element in range '1, §§'", EXAMPLE),
    ("a", "'a' is not a tag number or range", 'use bare integers: "3-5,9"'),
    (" 1-x ", "'1-x' is not a tag number or range", 'use bare integers: "3-5,9"'),
    ("-3", "'-3' is not a tag number or range", 'use bare integers: "3-5,9"'),
    ("1-", "'1-' is not a tag number or range", 'use bare integers: "3-5,9"'),
    ("2,5-3 ", "reversed range '5-3'", "write ranges low-high, e.g. 3-5"),
    ("1-1001", "range '1-1001' names more than 1000 tags", "drop in smaller batches"),
    ("1-999,1000-1001", "range '1-999,1000-1001' names more than 1000 tags", "drop in smaller batches"),
    ("1-1000,5", "range '1-1000,5' names more than 1000 tags", "drop in smaller batches"),
])
def test_parse_ranges_errors(text: object, message: str, fix: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_ranges(text)  # type: ignore[arg-type]
    assert (caught.value.message, caught.value.fix) == (message, fix)


def test_format_ranges() -> None:
    assert format_ranges([]) == ""
    assert format_ranges([5]) == "5"
    assert format_ranges([2, 1]) == "1-2"
    assert format_ranges([9, 3, 5, 4, 4, 11, 12, 13, 20]) == "3-5,9,11-13,20"


# --- temporal --------------------------------------------------------------------------------------

MINUTE = 60_000


@pytest.mark.parametrize(("ms", "text"), [
    (5 * MINUTE - 1, "+4m"), (59 * MINUTE + 59_999, "+59m"), (60 * MINUTE, "+1h"), (61 * MINUTE, "+1h 1m"),
    (23 * 60 * MINUTE + 59 * MINUTE, "+23h 59m"), (24 * 60 * MINUTE, "+1d"), (25 * 60 * MINUTE + 30 * MINUTE, "+1d 1h"),
    (6 * 1440 * MINUTE + 23 * 60 * MINUTE, "+6d 23h"), (7 * 1440 * MINUTE, "+1w"),
    (7 * 1440 * MINUTE + 5 * 60 * MINUTE, "+1w"), (8 * 1440 * MINUTE, "+1w 1d"), (20 * 1440 * MINUTE, "+2w 6d"),
])
def test_format_gap_units(ms: int, text: str) -> None:
    assert temporal.format_gap(ms) == text


def user(id_: str, at: int | None, text: str = "hi") -> m.Message:
    return m.Message(id_, m.USER, [m.Block(m.TEXT, text=text, key="p0")], created_at=at)


def test_markers_from_five_minutes_after_the_previous_message_ends() -> None:
    messages = [
        user("u1", 0),
        m.Message("a1", m.ASSISTANT, [m.Block(m.TEXT, text="b", key="p0")], created_at=MINUTE,
                  completed_at=10 * MINUTE),
        user("u2", 15 * MINUTE - 1),  # 5 min after a1 completed, less 1 ms
        user("u3", 20 * MINUTE - 1),  # exactly 5 min after u2
        user("u4", None),  # no time: no marker, and the clock stays at u3
        m.Message("a4", m.ASSISTANT, [m.Block(m.TEXT, text="c", key="p0")], created_at=40 * MINUTE),  # never marked
        user("u5", 40 * MINUTE + 61 * MINUTE),
    ]
    assert temporal.markers(messages) == {"u3": "<!-- +5m -->\n", "u5": "<!-- +1h 1m -->\n"}
    assert temporal.markers([user("u1", 10**12)]) == {}  # the first message has nothing before it


def test_apply_marks_the_first_non_blank_text_once() -> None:
    message = m.Message("u", m.USER, [m.Block(m.MEDIA, media_type="image/png", key="p0"),
                                      m.Block(m.TEXT, text=" \n", key="p1"),
                                      m.Block(m.TEXT, text="§4§ back", key="p2"),
                                      m.Block(m.TEXT, text="more", key="p3")])
    other = user("v", 0, "untouched")
    temporal.apply([message, other], {"u": "<!-- +3h -->\n"})
    temporal.apply([message, other], {"u": "<!-- +4h -->\n"})  # already marked: the first marker stays
    assert [b.text for b in message.blocks] == ["", " \n", "<!-- +3h -->\n§4§ back", "more"]
    assert other.blocks[0].text == "untouched"


# --- guidance --------------------------------------------------------------------------------------


def test_date_line_is_the_utc_day() -> None:
    assert guidance.date_line(0) == "Today's date: 1970-01-01"
    assert guidance.date_line(86_399_999) == "Today's date: 1970-01-01"
    assert guidance.date_line(1_767_225_600_000) == "Today's date: 2026-01-01"


def test_guidance_text_is_the_body_then_the_date() -> None:
    assert guidance.guidance_text(reduce_available=True, frozen_date="D") == guidance.REDUCE_GUIDANCE + "\nD"
    assert guidance.guidance_text(reduce_available=False, frozen_date="D") == guidance.PLAIN_GUIDANCE + "\nD"
    assert guidance.REDUCE_GUIDANCE.startswith("## Magic Context\nEvery message part")
    assert guidance.PLAIN_GUIDANCE.startswith("## Magic Context\nOlder history")


def test_join() -> None:
    assert guidance.join("Be brief.  \n", "G") == "Be brief.\n\nG"
    assert guidance.join("", "G") == "G"
    assert guidance.join(" \n ", "G") == "G"
    assert guidance.join("Be brief.\n\nG", "G") == "Be brief.\n\nG"


def test_skipped() -> None:
    assert guidance.skipped("a SKIP b", ["x", "SKIP"])
    assert not guidance.skipped("a b", ["", "x"])  # an empty signature never matches
    assert not guidance.skipped("a b", [])


def test_apply_marks_every_marked_message() -> None:
    first, second = user("u1", 0, "one"), user("u2", 0, "two")
    temporal.apply([first, second], {"u1": "<!-- +5m -->\n", "u2": "<!-- +1h -->\n"})
    assert [first.blocks[0].text, second.blocks[0].text] == ["<!-- +5m -->\none", "<!-- +1h -->\ntwo"]
