"""Strict validation of historian output, with healing (reference §4.3 steps 1–7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from magic_context.errors import MCError
from magic_context.history.parse import parse_historian_output
from magic_context.history.validate import (
    HISTORIAN_BOUNDARY_HEALING_SLACK,
    HistorianValidationError,
    validate_historian_output,
    validate_stored_compartments,
)

FIXTURES = Path(__file__).parent / "fixtures" / "historian"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def comp(start: int, end: int, p1: str = "body", **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return (f'<compartment start="{start}" end="{end}" title="c{start}"{extra}>'
            f"<p1>{p1}</p1><p2>p2</p2><p3>p3</p3><p4/></compartment>")


def output(*compartments: str, unprocessed: int | None = None, tail: str = "") -> str:
    meta = f"<meta><unprocessed_from>{unprocessed}</unprocessed_from></meta>" if unprocessed is not None else ""
    return f"<output><compartments>{''.join(compartments)}</compartments>{tail}{meta}</output>"


def fails(text: str, start: int, end: int, code: str, **kw) -> HistorianValidationError:
    with pytest.raises(HistorianValidationError) as info:
        validate_historian_output(text, start, end, **kw)
    assert info.value.code == code, info.value.message
    assert "\n" not in info.value.message
    return info.value


def ranges(result) -> list[tuple[int, int]]:
    return [(c.start, c.end) for c in result.compartments]


# --- happy paths ---------------------------------------------------------------------------


def test_full_output_with_lookahead():
    result = validate_historian_output(fixture("full_output.xml"), 1, 20)
    assert ranges(result) == [(1, 6), (7, 12)]
    assert result.unprocessed_from == 13 == result.next_start
    assert result.discarded is None and result.promote_unanchored
    assert len(result.facts) == 3 and result.dropped_facts == 2
    assert [e.kind for e in result.events] == ["causal_incident", "trajectory_correction"]
    assert result.user_observations == ("The user prefers exact byte-level test vectors.",)
    # Step 6: only the first primer is kept.
    assert result.primer.question == "How is the decay tier of a compartment chosen?"


def test_accepts_a_parsed_output():
    parsed = parse_historian_output(fixture("full_output.xml"))
    assert ranges(validate_historian_output(parsed, 1, 20)) == [(1, 6), (7, 12)]


def test_mismatched_tier_tags_validate():
    result = validate_historian_output(fixture("mismatched_tiers.xml"), 1, 30)
    first, second = result.compartments
    assert (first.p1, first.p2, first.p3, first.p4) == ("first tier body", "second tier body",
                                                        "third tier without a closer", "anchor only")
    assert (second.p2, second.p3, second.p4) == ("only p1 and p3", "dense p3", "")
    assert result.next_start == 9


def test_importance_is_clamped():
    result = validate_historian_output(output(comp(1, 4, importance="250"), unprocessed=5), 1, 20)
    assert result.compartments[0].importance == 100


# --- step 1 --------------------------------------------------------------------------------


def test_zero_compartments():
    err = fails("<output><facts></facts></output>", 1, 10, "no_compartments")
    assert isinstance(err, MCError)
    assert "no usable compartments" in err.message


# --- step 2: gaps --------------------------------------------------------------------------


@pytest.mark.parametrize("tool_only", [{15, 16, 17}, range(15, 18), lambda o: 15 <= o <= 17])
def test_gap_inside_tool_only_range_is_healed(tool_only):
    result = validate_historian_output(fixture("tool_gap.xml"), 10, 30, tool_only=tool_only)
    assert ranges(result) == [(10, 17), (18, 22)]
    assert result.healed_gaps == ((15, 17),)
    assert result.next_start == 23


def test_narrative_gap_is_rejected():
    err = fails(fixture("tool_gap.xml"), 10, 30, "gap", tool_only={15, 17})
    assert "gap before message 18 (expected 15)" in err.message
    fails(fixture("tool_gap.xml"), 10, 30, "gap")


def test_leading_and_trailing_tool_only_gaps_are_healed():
    text = output(comp(3, 6), comp(7, 9))
    result = validate_historian_output(text, 1, 12, tool_only={1, 2, 10, 11, 12}, emergency=True)
    assert ranges(result) == [(1, 6), (7, 12)]
    assert result.healed_gaps == ((1, 2), (10, 12))
    fails(text, 1, 12, "gap", tool_only={1})


def test_trailing_tool_only_gap_before_unprocessed_from():
    result = validate_historian_output(output(comp(1, 5), unprocessed=8), 1, 20, tool_only={6, 7})
    assert ranges(result) == [(1, 7)]
    assert result.unprocessed_from == 8


# --- step 3: terminal tool arcs ------------------------------------------------------------


def test_terminal_boundary_extends_over_a_completed_arc():
    result = validate_historian_output(output(comp(1, 8), unprocessed=9), 1, 20, tool_arcs=[(8, 10)])
    assert ranges(result) == [(1, 10)]
    assert result.terminal_extended_to == 10
    assert result.unprocessed_from == 11 == result.next_start


def test_terminal_extension_follows_chained_arcs():
    result = validate_historian_output(output(comp(1, 8), unprocessed=9), 1, 20, tool_arcs=[(8, 10), (9, 12)])
    assert ranges(result) == [(1, 12)]


def test_arc_past_the_chunk_end_is_rejected():
    fails(output(comp(1, 8), unprocessed=9), 1, 20, "arc_split", tool_arcs=[(8, 25)])


# --- step 4: ranges ------------------------------------------------------------------------


def test_overlap_is_rejected():
    err = fails(fixture("overlap.xml"), 1, 20, "overlap")
    assert "overlap before message 7" in err.message


def test_missing_p1_is_rejected():
    err = fails(fixture("missing_p1.xml"), 1, 20, "missing_p1")
    assert "compartment 2 (6-10) is missing the tiered paraphrase structure" in err.message


def test_range_checks():
    fails(output(comp(5, 3), unprocessed=6), 1, 20, "invalid_range")
    fails(output(comp(1, 25)), 1, 20, "outside_chunk")
    fails(output(comp(0, 4), unprocessed=5), 1, 20, "outside_chunk")
    fails(output(comp(3, 6), unprocessed=7), 1, 20, "gap")


# --- step 5: unprocessed_from --------------------------------------------------------------


def test_unprocessed_from_mid_chunk():
    result = validate_historian_output(fixture("unprocessed_mid.xml"), 1, 20)
    assert ranges(result) == [(1, 8)]
    assert result.unprocessed_from == 9 == result.next_start


def test_unprocessed_from_rules():
    fails(output(comp(1, 8), unprocessed=11), 1, 20, "unprocessed_from")
    fails(output(comp(1, 8), unprocessed=40), 1, 20, "unprocessed_from")
    err = fails(output(comp(1, 8)), 1, 20, "uncovered")
    assert "<unprocessed_from>9</unprocessed_from>" in err.message
    done = validate_historian_output(output(comp(1, 10), comp(11, 20), unprocessed=21), 1, 20, emergency=True)
    assert done.unprocessed_from == 21


def test_fully_processed_claim_with_uncovered_tail_is_normalized():
    result = validate_historian_output(output(comp(1, 8), unprocessed=21), 1, 20)
    assert result.unprocessed_from == 9
    assert any("uncovered" in w for w in result.warnings)


# --- truncation ----------------------------------------------------------------------------


def test_truncated_output_is_rejected_by_default():
    err = fails(fixture("truncated.xml"), 1, 20, "truncated")
    assert err.truncated
    assert "cut off after compartment 6-9" in err.message


def test_truncated_output_keeps_complete_compartments_when_accepted():
    result = validate_historian_output(fixture("truncated.xml"), 1, 20, accept_truncated=True)
    assert ranges(result) == [(1, 5), (6, 9)]
    assert result.truncated
    assert result.unprocessed_from == 10 == result.next_start


def test_truncated_before_any_compartment():
    err = fails('<output><compartments><compartment start="1" end="4" title="x"><p1>cut', 1, 9, "no_compartments")
    assert err.truncated and "cut off" in err.message


# --- step 7: discard-last ------------------------------------------------------------------


def test_discard_last_with_weak_lookahead():
    result = validate_historian_output(fixture("discard_last.xml"), 1, 20)
    assert ranges(result) == [(1, 10)]
    assert (result.discarded.start, result.discarded.end) == (11, 19)
    assert result.unprocessed_from == 11 == result.next_start
    assert not result.promote_unanchored
    assert [e.fields["summary"] for e in result.events] == ["kept event"]
    assert result.primer is None


def test_discard_last_respects_the_slack():
    assert HISTORIAN_BOUNDARY_HEALING_SLACK == 2
    kept = validate_historian_output(fixture("discard_last.xml"), 1, 22)  # lookahead 3
    assert kept.discarded is None and ranges(kept) == [(1, 10), (11, 19)]
    dropped = validate_historian_output(fixture("discard_last.xml"), 1, 21)  # lookahead 2
    assert dropped.discarded is not None


def test_discard_last_never_splits_a_tool_arc():
    result = validate_historian_output(fixture("discard_last.xml"), 1, 20, tool_arcs=[(10, 11)])
    assert result.discarded is None
    assert ranges(result) == [(1, 10), (11, 19)]


def test_discard_last_disabled_in_emergency_and_for_a_single_compartment():
    assert validate_historian_output(fixture("discard_last.xml"), 1, 20, emergency=True).discarded is None
    single = validate_historian_output(output(comp(1, 20), unprocessed=21), 1, 20)
    assert single.discarded is None and ranges(single) == [(1, 20)]


# --- stored compartments -------------------------------------------------------------------


def test_stored_compartments():
    validate_stored_compartments([(1, 4), (5, 9), (10, 10)])
    validate_stored_compartments([{"start_ordinal": 1, "end_ordinal": 3}, {"start_ordinal": 6, "end_ordinal": 8}],
                                 tool_only={4, 5})
    validate_stored_compartments([])
    with pytest.raises(HistorianValidationError, match="gap"):
        validate_stored_compartments([(1, 3), (6, 8)], tool_only={4})
    with pytest.raises(HistorianValidationError, match="overlap"):
        validate_stored_compartments([(1, 5), (4, 8)])
    with pytest.raises(HistorianValidationError, match="gap"):
        validate_stored_compartments([(2, 5)])
    with pytest.raises(HistorianValidationError, match="invalid range"):
        validate_stored_compartments([(1, 0)])


# --- exact messages, codes and boundaries (mutation survivors) -----------------------------

P_TAGS = "<p2>…</p2><p3>…</p3>"
MESSAGES = [
    (("<output><facts></facts></output>", 1, 10, {}), "no_compartments", False,
     "Historian returned no usable compartments"),
    (('<output><compartments><compartment start="1" end="4" title="x"><p1>cut', 1, 9, {}), "no_compartments", True,
     "Historian returned no usable compartments (the output was cut off before the first </compartment>)"),
    ((fixture("truncated.xml"), 1, 20, {}), "truncated", True,
     "the output was cut off after compartment 6-9 (missing closing tags); return the full XML, shorter, and mark "
     "anything left with <unprocessed_from>"),
    ((output(comp(1, 4), '<compartment start="5" end="9" title="c5">flat</compartment>'), 1, 20, {}), "missing_p1",
     False, "compartment 2 (5-9) is missing the tiered paraphrase structure; re-emit it with its tiers " + P_TAGS),
    ((output(comp(5, 3), unprocessed=6), 1, 20, {}), "invalid_range", False,
     "compartment 1 (5-3) has an invalid range: end is before start"),
    ((output(comp(1, 25)), 1, 20, {}), "outside_chunk", False, "compartment 1 (1-25) is outside the chunk 1-20"),
    ((output(comp(1, 6), comp(5, 9), unprocessed=10), 1, 20, {}), "overlap", False,
     "overlap before message 7: compartment 2 (5-9) starts inside the previous compartment; compartments must not "
     "overlap"),
    ((output(comp(1, 4), comp(6, 9), unprocessed=10), 1, 20, {}), "gap", False,
     "gap before message 6 (expected 5): messages 5-5 contain narrative and must belong to a compartment"),
    ((output(comp(1, 8)), 1, 20, {}), "uncovered", False,
     "output left uncovered messages 9-20 without <unprocessed_from>; cover them or end with "
     "<unprocessed_from>9</unprocessed_from>"),
    ((output(comp(1, 8), unprocessed=40), 1, 20, {}), "unprocessed_from", False,
     "<unprocessed_from> 40 is outside chunk 1-20"),
    ((output(comp(1, 8), unprocessed=11), 1, 20, {}), "unprocessed_from", False,
     "<unprocessed_from> 11 does not match the next uncovered message 9"),
    ((output(comp(3, 8), unprocessed=3), 3, 20, {}), "unprocessed_from", False,  # the chunk start is inside
     "<unprocessed_from> 3 does not match the next uncovered message 9"),
    ((output(comp(1, 8), unprocessed=9), 1, 20, {"tool_arcs": [(8, 25)]}), "arc_split", False,
     "the terminal boundary after message 8 splits a completed tool call/result arc; end the last compartment "
     "after the tool result"),
]


@pytest.mark.parametrize(("given", "code", "truncated", "message"), MESSAGES)
def test_each_rule_fails_with_its_exact_message(given, code, truncated, message):
    text, start, end, kw = given
    err = fails(text, start, end, code, **kw)
    assert (err.message, err.truncated) == (message, truncated)


def test_the_error_defaults():
    err = HistorianValidationError("plain")
    assert (err.message, err.code, err.truncated) == ("plain", "invalid", False)


def test_single_message_tool_only_gaps_are_healed():
    """A gap of one tool-only message, leading, between compartments or trailing, is healed like a longer one."""
    result = validate_historian_output(output(comp(2, 4), comp(6, 9)), 1, 10, tool_only={1, 5, 10}, emergency=True)
    assert ranges(result) == [(1, 5), (6, 10)]
    assert result.healed_gaps == ((1, 1), (5, 5), (10, 10))


def test_terminal_extension_edges():
    # an arc whose result is the chunk's last message is followed
    ended = validate_historian_output(output(comp(1, 8), unprocessed=9), 1, 10, tool_arcs=[(8, 10)])
    assert (ranges(ended), ended.terminal_extended_to, ended.unprocessed_from) == ([(1, 10)], 10, 11)
    # a result right after the boundary is followed; a reversed pair is read as (call, result)
    for arcs in ([(8, 9)], [(9, 8)]):
        next_one = validate_historian_output(output(comp(1, 8), unprocessed=9), 1, 20, tool_arcs=arcs)
        assert (ranges(next_one), next_one.terminal_extended_to, next_one.unprocessed_from) == ([(1, 9)], 9, 10)
    # an arc that starts after the boundary is not crossing it
    after = validate_historian_output(output(comp(1, 8), unprocessed=9), 1, 20, tool_arcs=[(9, 12)])
    assert (ranges(after), after.terminal_extended_to, after.unprocessed_from) == ([(1, 8)], None, 9)


def test_one_uncovered_message_at_the_chunk_end():
    fails(output(comp(1, 19)), 1, 20, "uncovered")
    claimed = validate_historian_output(output(comp(1, 19), unprocessed=21), 1, 20)
    assert claimed.unprocessed_from == 20
    assert claimed.warnings == ("<unprocessed_from> claimed the chunk was done but 20-20 are uncovered",)


def test_unprocessed_from_at_the_chunk_end_bounds_the_trailing_heal():
    result = validate_historian_output(output(comp(1, 17), unprocessed=20), 1, 20, tool_only={18, 19, 20})
    assert (ranges(result), result.healed_gaps, result.unprocessed_from) == ([(1, 19)], ((18, 19),), 20)


def test_an_arc_starting_at_the_boundary_does_not_stop_discard_last():
    """Discarding after message 10 splits only an arc whose call is at or before 10."""
    result = validate_historian_output(fixture("discard_last.xml"), 1, 20, tool_arcs=[(11, 12)])
    assert result.discarded is not None and ranges(result) == [(1, 10)]


def test_discard_last_drops_primers_anchored_in_it_or_unanchored_and_keeps_only_the_first():
    primers = ("<primer_candidates><primer at_compartment=\"{}\">Q one?</primer>"
               "<primer at_compartment=\"5\">Q two?</primer></primer_candidates>")
    for anchor in (11, 19):
        text = output(comp(1, 10), comp(11, 19), unprocessed=20, tail=primers.format(anchor))
        assert validate_historian_output(text, 1, 20).primer is None  # the first is dropped, the second never kept
        kept = validate_historian_output(text, 1, 20, emergency=True).primer
        assert kept is not None and kept.question == "Q one?"
    text = output(comp(1, 10), comp(11, 19), unprocessed=20, tail=primers.format(10))
    assert validate_historian_output(text, 1, 20).primer.question == "Q one?"
    unanchored = output(comp(1, 10), comp(11, 19), unprocessed=20,
                        tail="<primer_candidates><primer>Q?</primer></primer_candidates>")
    assert validate_historian_output(unanchored, 1, 20).primer is None
    assert validate_historian_output(unanchored, 1, 20, emergency=True).primer.question == "Q?"


@pytest.mark.parametrize(("given", "kept"), [("0", 1), ("1", 1), ("2", 2), ("100", 100), ("101", 100)])
def test_importance_is_clamped_to_1_100(given, kept):
    result = validate_historian_output(output(comp(1, 4, importance=given), unprocessed=5), 1, 20)
    assert result.compartments[0].importance == kept


def test_stored_compartments_exact_failures():
    cases = [([(2, 5)], "gap", "gap before message 2 (saw 2-5, expected 1)"),
             ([(1, 5), (4, 8)], "overlap", "overlap before message 6 (saw 4-8, expected 6)"),
             ([(1, 0)], "invalid_range", "invalid range 1-0")]
    for rows, code, message in cases:
        with pytest.raises(HistorianValidationError) as info:
            validate_stored_compartments(rows)
        assert (info.value.code, info.value.message, info.value.truncated) == (code, message, False)


def test_a_one_message_compartment_is_a_valid_range():
    result = validate_historian_output(output(comp(1, 1), comp(2, 4), unprocessed=5), 1, 20)
    assert ranges(result) == [(1, 1), (2, 4)]


def test_three_compartments_truncated_name_the_last_complete_one():
    text = output(comp(1, 3), comp(4, 6), comp(7, 9))[: -len("</compartments></output>")] + \
        '<compartment start="10" end="12" title="cut"><p1>cut'
    err = fails(text, 1, 20, "truncated")
    assert err.message.startswith("the output was cut off after compartment 7-9 (missing closing tags)")
    assert ranges(validate_historian_output(text, 1, 20, accept_truncated=True)) == [(1, 3), (4, 6), (7, 9)]


def test_discard_last_reads_the_lookahead_after_the_last_of_three():
    kept = validate_historian_output(output(comp(1, 3), comp(4, 10), comp(11, 15), unprocessed=16), 1, 20)
    assert kept.discarded is None and ranges(kept) == [(1, 3), (4, 10), (11, 15)]
    dropped = validate_historian_output(output(comp(1, 3), comp(4, 17), comp(18, 19), unprocessed=20), 1, 20)
    assert (dropped.discarded.start, dropped.discarded.end) == (18, 19) and ranges(dropped) == [(1, 3), (4, 17)]


def test_a_lean_answer_is_accepted_with_p1_and_p4_left_to_code():
    """The format a model is asked for (#13): p2 and p3 only; an empty p1 beside a p2 counts as absent. A
    compartment with neither p1 nor p2 is still rejected."""
    lean = ('<compartment start="1" end="9" title="Ported" importance="40"><p2>Ported the parser; kept the old '
            'API because callers pin it.</p2><p3>Ported.</p3></compartment>'
            '<compartment start="10" end="20" title="Docs"><p1> </p1><p2>Wrote the docs.</p2><p4>docs/a.md</p4>'
            '</compartment>')
    result = validate_historian_output(output(lean), 1, 20, emergency=True)
    first, second = result.compartments
    assert first.lean and first.p1 is None and first.p4 is None and first.p3 == "Ported."
    assert second.lean and second.p3 == "Wrote the docs." and second.p4 == "docs/a.md"  # p3 falls back to p2
    assert result.next_start == 21
    fails(output('<compartment start="1" end="20" title="x"><p3>only p3</p3></compartment>'), 1, 20, "missing_p1")
