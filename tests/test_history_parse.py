"""Lenient parsing of historian output (reference §4.2–4.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magic_context.history.parse import (
    ParsedEvent,
    ParsedFact,
    ParsedPrimer,
    extract_tier,
    parse_historian_output,
    unescape_xml,
)

FIXTURES = Path(__file__).parent / "fixtures" / "historian"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_full_output():
    out = parse_historian_output(fixture("full_output.xml"))
    assert not out.truncated
    first, second = out.compartments
    assert (first.start, first.end, first.title) == (1, 6, "Set up the SQLite store & fence")
    assert first.importance == 80
    assert first.episode_type == "design,infra"
    assert first.p1.startswith('U: "keep everything in one context.db"')
    assert first.p1.endswith("x < y.")
    assert first.content == first.p1
    assert first.p4 == "context.db + fence"
    assert first.tiered and first.closed
    assert (second.start, second.end, second.importance, second.episode_type) == (7, 12, None, None)
    assert second.p4 == ""
    assert out.facts == [
        ParsedFact("PROJECT_RULES", "Never commit; the lead engineer commits."),
        ParsedFact("PROJECT_RULES", "Lines are at most 120 characters."),
        ParsedFact("ARCHITECTURE", "All state lives in one SQLite database & is shared by every harness."),
    ]
    assert out.dropped_facts == 2
    assert out.dropped_categories == ["WORKFLOW_RULES"]
    assert out.events == [
        ParsedEvent("causal_incident", 1, {
            "summary": "Migration failed on an old database",
            "affected_surface": "environment",
            "symptom": "sqlite3.OperationalError",
            "cause_summary": "executescript committed mid-migration",
            "disposition": "fixed",
            "evidence": "tests/test_store.py",
        }),
        ParsedEvent("trajectory_correction", 2, {
            "summary": "Switched from float to integer token estimate",
            "correction_source": "self_review",
        }),
    ]
    assert out.user_observations == ["The user prefers exact byte-level test vectors."]
    assert out.primers == [
        ParsedPrimer("How is the decay tier of a compartment chosen?", 7),
        ParsedPrimer("Where does state live?", 1),
    ]
    assert out.messages_processed == (1, 12)
    assert out.unprocessed_from == 13


def test_mismatched_and_missing_tiers():
    out = parse_historian_output(fixture("mismatched_tiers.xml"))
    a, b = out.compartments
    assert (a.p1, a.p2, a.p3, a.p4) == ("first tier body", "second tier body", "third tier without a closer",
                                        "anchor only")
    # Missing p2 falls back to p1, missing p4 is "".
    assert (b.p1, b.p2, b.p3, b.p4) == ("only p1 and p3", "only p1 and p3", "dense p3", "")


def test_missing_p3_falls_back_to_p2():
    out = parse_historian_output('<compartment start="1" end="2" title="x"><p1>a</p1><p2>b</p2></compartment>')
    c = out.compartments[0]
    assert (c.p1, c.p2, c.p3, c.p4) == ("a", "b", "b", "")


@pytest.mark.parametrize(
    ("inner", "n", "expected"),
    [
        ("<p1>a</p1>", 1, "a"),
        ("<p1/>", 1, ""),
        ("<p1 />", 1, ""),
        ("<p2>b</p2>", 1, None),
        ("<p1>a</p3><p2>b</p1>", 2, "b"),
        ("<p3>open\n<p4>x</p4>", 3, "open"),
        ("<p4>  &lt;tag&gt; &amp;amp;  </p4>", 4, "<tag> &amp;"),
        ("<p1>no closer at all", 1, "no closer at all"),
    ],
)
def test_extract_tier(inner, n, expected):
    assert extract_tier(inner, n) == expected


def test_attributes_in_any_order_and_single_quotes():
    text = "<compartment importance='70' title='T &quot;q&quot;' end='9' start='3'><p1>x</p1></compartment>"
    c = parse_historian_output(text).compartments[0]
    assert (c.start, c.end, c.title, c.importance) == (3, 9, 'T "q"', 70)


def test_required_attributes():
    text = (
        '<compartment start="1" title="no end"><p1>x</p1></compartment>'
        '<compartment start="1" end="2" title=""><p1>x</p1></compartment>'
        '<compartment start="a" end="2" title="bad start"><p1>x</p1></compartment>'
        '<compartment start="5" end="6" title="ok"><p1>x</p1></compartment>'
    )
    out = parse_historian_output(text)
    assert [c.title for c in out.compartments] == ["ok"]
    assert len(out.warnings) == 3


def test_flat_content_fallback():
    out = parse_historian_output(fixture("missing_p1.xml"))
    tiered, flat = out.compartments
    assert tiered.tiered
    assert not flat.tiered
    assert flat.p1 is None
    assert flat.content == "U: do the thing\nI did the thing in foo.py."
    empty = parse_historian_output('<compartment start="1" end="2" title="x">  </compartment>')
    assert empty.compartments == []


def test_sorted_by_start():
    text = "".join(
        f'<compartment start="{s}" end="{s}" title="c{s}"><p1>x</p1></compartment>' for s in (9, 1, 5)
    )
    assert [c.start for c in parse_historian_output(text).compartments] == [1, 5, 9]


def test_forgotten_closing_tag_is_tolerated():
    text = (
        "<compartments>"
        '<compartment start="1" end="2" title="a"><p1>one</p1>'
        '<compartment start="3" end="4" title="b"><p1>two</p1></compartment>'
        '<compartment start="5" end="6" title="c"><p1>three</p1>'
        "</compartments>"
    )
    out = parse_historian_output(text)
    assert [(c.start, c.p1, c.closed) for c in out.compartments] == [(1, "one", False), (3, "two", True),
                                                                     (5, "three", False)]
    assert not out.truncated
    assert len(out.warnings) == 2


def test_truncated_output():
    out = parse_historian_output(fixture("truncated.xml"))
    assert out.truncated
    assert [(c.start, c.end) for c in out.compartments] == [(1, 5), (6, 9)]
    assert out.unprocessed_from is None
    assert any("cut off" in w for w in out.warnings)


@pytest.mark.parametrize(
    "text",
    [
        '<compartment start="1" end="2" title="a"><p1>x</p1></compartment><compartment start="3" en',
        '<output><compartments><compartment start="1" end="2" title="a"><p1>x</p1></compartment></compartments>'
        "<facts><NAMING>\n* half",
        '<compartment start="1" end="2" title="a"><p1>x</p1></compartment><user_observations>\n* cut',
    ],
)
def test_truncation_is_detected_anywhere(text):
    out = parse_historian_output(text)
    assert out.truncated
    assert [c.start for c in out.compartments] == [1]
    assert out.facts == [] and out.user_observations == []


def test_facts_only_inside_facts_block():
    text = (
        '<compartment start="1" end="2" title="a"><p1>x</p1></compartment>'
        "<events><causal_incident at_compartment=\"1\"><summary>s</summary>"
        "<NAMING>\n* not a fact\n</NAMING></causal_incident></events>"
        "<NAMING>\n* bare block, not a fact either\n</NAMING>"
    )
    assert parse_historian_output(text).facts == []


def test_fact_categories_are_case_insensitive_and_empty_items_skipped():
    text = "<facts><naming>\n*\n* first\n</naming></facts>"
    assert parse_historian_output(text).facts == [ParsedFact("NAMING", "first")]
    text = ("<facts><naming>\n* snake_case files\n*   \n*\n</naming>"
            "<CONFIG_VALUES>\n* budget=60000\n</CONFIG_VALUES></facts>")
    out = parse_historian_output(text)
    assert out.facts == [ParsedFact("NAMING", "snake_case files"), ParsedFact("CONFIG_VALUES", "budget=60000")]


def test_events_are_kind_agnostic():
    text = (
        "<events>"
        '<new_kind_of_event severity="high" at_compartment="3">'
        "<what>a &amp; b</what><empty></empty><x/></new_kind_of_event>"
        "<no_anchor><summary>ignored</summary></no_anchor>"
        '<odd at_compartment="two"><summary>kept, anchor unknown</summary></odd>'
        "</events>"
    )
    events = parse_historian_output(text).events
    assert events == [
        ParsedEvent("new_kind_of_event", 3, {"what": "a & b"}),
        ParsedEvent("odd", None, {"summary": "kept, anchor unknown"}),
    ]


def test_primer_bullet_form():
    text = "<primer_candidates>\n* How does X work?\n- Why Y?\n3. When Z?\n</primer_candidates>"
    assert parse_historian_output(text).primers == [
        ParsedPrimer("How does X work?"), ParsedPrimer("Why Y?"), ParsedPrimer("When Z?"),
    ]


def test_meta():
    out = parse_historian_output("<meta><messages_processed> 4 - 9 </messages_processed>"
                                 "<unprocessed_from> 8 </unprocessed_from></meta>")
    assert out.messages_processed == (4, 9)
    assert out.unprocessed_from == 8
    assert parse_historian_output("<messages_processed>7</messages_processed>").messages_processed == (7, 7)
    assert parse_historian_output("<unprocessed_from>x</unprocessed_from>").unprocessed_from is None


def test_unescape_is_single_pass():
    assert unescape_xml("&amp;lt; &lt; &gt; &quot; &apos; &#65; &#x42; &bogus; &") == "&lt; < > \" ' A B &bogus; &"


def _well_formed(out) -> None:
    """What holds for any parse: sorted compartments with numbers and titles, a truncation says why."""
    starts = [c.start for c in out.compartments]
    assert starts == sorted(starts)
    assert all(c.title and c.content for c in out.compartments)
    assert not out.truncated or out.warnings


@given(st.text())
def test_never_raises_and_finds_nothing_in_text_without_tags(text):
    out = parse_historian_output(text)
    _well_formed(out)
    if "<" not in text:
        assert (out.compartments, out.facts, out.events, out.primers, out.truncated) == ([], [], [], [], False)


@given(st.text(alphabet="<>/p1234 compartmentsaxyz=\"'\n&;", max_size=200))
def test_never_raises_on_tag_soup(text):
    out = parse_historian_output(text)
    _well_formed(out)
    if "<compartment" not in text:
        assert out.compartments == []


NOISE = st.text(alphabet=st.characters(blacklist_characters="<&"), max_size=80)


@given(NOISE, NOISE, st.integers(0, 10_000), st.integers(0, 50))
def test_a_compartment_in_noise_is_read_exactly(before, after, start, length):
    text = f'{before}<compartment start="{start}" end="{start + length}" title="Fix &amp; test">body {start}' \
           f"</compartment>{after}"
    out = parse_historian_output(text)
    assert [(c.start, c.end, c.title, c.content) for c in out.compartments] == [
        (start, start + length, "Fix & test", f"body {start}")]
    assert out.truncated is False
