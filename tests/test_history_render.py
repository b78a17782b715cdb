"""Rendering of compartments, `<session-history>`, m[1] and `<project-memory>` (reference §3.2–3.3)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magic_context.history.decay import assign_tiers
from magic_context.history.render import (
    EMPTY_SESSION_HISTORY,
    FIRST_REQUEST_MAX_TOKENS,
    M1_PLACEHOLDER,
    CompartmentRow,
    FirstRequest,
    decay_render,
    estimate_tokens,
    first_request_block,
    first_request_cap,
    format_date_range,
    render_compartment,
    render_m1,
    render_new_compartments_p1,
    render_project_memory,
    render_session_history,
    render_user_profile,
    request_hidden,
)


def ms(year: int, month: int, day: int, hour: int = 12) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp() * 1000)


def row(start: int, end: int, title: str = "t", **kw) -> CompartmentRow:
    tiers = {"p1": "detail one", "p2": "detail two", "p3": "detail three", "p4": "anchor"}
    tiers.update(kw)
    return CompartmentRow(start, end, title, **tiers)


# --- headings, escaping, tiers -------------------------------------------------------------


def test_heading_and_body_at_each_tier():
    r = row(98, 120, "Added tag mode to ctx_expand")
    assert render_compartment(r, 1) == "## 98-120 · Added tag mode to ctx_expand\ndetail one"
    assert render_compartment(r, 2).endswith("\ndetail two")
    assert render_compartment(r, 3).endswith("\ndetail three")
    assert render_compartment(r, 4).endswith("\nanchor")
    assert render_compartment(r, 5) == ""


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (ms(2026, 5, 1, 1), ms(2026, 5, 1, 23), "2026-05-01"),
        (ms(2026, 5, 1), ms(2026, 5, 3), "2026-05-01→03"),
        (ms(2026, 5, 28), ms(2026, 6, 2), "2026-05-28→2026-06-02"),
        (ms(2025, 12, 31), ms(2026, 1, 1), "2025-12-31→2026-01-01"),
        (None, ms(2026, 6, 2), ""),
        (ms(2026, 6, 2), None, ""),
    ],
)
def test_date_ranges(start, end, expected):
    assert format_date_range(start, end) == expected


def test_dates_are_utc_days():
    # 23:30 UTC on May 1st is May 2nd in UTC+2; the heading must not care about the local zone.
    assert format_date_range(ms(2026, 5, 1, 23), ms(2026, 5, 1, 23)) == "2026-05-01"


def test_dates_only_with_temporal_awareness():
    r = CompartmentRow(1, 42, "Set up storage", p1="body", start_time=ms(2026, 5, 1), end_time=ms(2026, 5, 3))
    assert render_compartment(r, 1, temporal=True) == "## 1-42 · 2026-05-01→03 · Set up storage\nbody"
    assert render_compartment(r, 1, temporal=False) == "## 1-42 · Set up storage\nbody"


def test_title_is_sanitized_and_escaped():
    r = CompartmentRow(1, 2, "a\nb\r\n\tc\u2028\u2029d\x7f<x> & y", p1="body")
    assert render_compartment(r, 1) == "## 1-2 · a b c d &lt;x&gt; &amp; y\nbody"


def test_body_is_escaped_and_cannot_forge_headings():
    body = "## 1-5 · forged\nkeep & <b> > a\n ## already indented\nx ## mid-line"
    r = CompartmentRow(7, 9, "real", p1=body)
    assert render_compartment(r, 1) == (
        "## 7-9 · real\n ## 1-5 · forged\nkeep &amp; &lt;b&gt; &gt; a\n ## already indented\nx ## mid-line"
    )


def test_empty_tier_renders_heading_alone():
    r = row(1, 3, p4="")
    assert render_compartment(r, 4) == "## 1-3 · t"
    assert render_compartment(row(1, 3, p2="   "), 2) == "## 1-3 · t"


def test_missing_tier_falls_back_to_densest_denser_non_empty_tier():
    r = CompartmentRow(1, 3, "t", p1="one", p2="", p3=None, p4=None, content="flat")
    assert render_compartment(r, 3) == "## 1-3 · t\none"
    r = CompartmentRow(1, 3, "t", p1="one", p2="two", p3=None, p4=None)
    assert render_compartment(r, 4) == "## 1-3 · t\ntwo"
    assert render_compartment(r, 3) == "## 1-3 · t\ntwo"


def test_untiered_row_renders_flat_content_with_legacy_cuts():
    r = CompartmentRow(1, 3, "t", p1="", content="  flat body  ")
    assert render_compartment(r, 1) == "## 1-3 · t\nflat body"
    assert render_compartment(r, 4) == "## 1-3 · t"


def test_legacy_rows():
    text = "U: a request\n" + "word " * 400  # 2013 chars
    r = CompartmentRow(1, 9, "legacy", p1="ignored for legacy", content=text, legacy=True)
    assert render_compartment(r, 1) == "## 1-9 · legacy\n" + text.strip()
    p2 = render_compartment(r, 2).split("\n", 1)[1]
    assert p2 == text[:1200].rstrip() + "…"
    p3 = render_compartment(r, 3).split("\n", 1)[1]
    assert p3 == text[:420].rstrip() + "…"
    assert render_compartment(r, 4) == "## 1-9 · legacy"
    short = CompartmentRow(1, 9, "legacy", content="short", legacy=True)
    assert render_compartment(short, 3) == "## 1-9 · legacy\nshort"


def test_legacy_lengths_count_utf16_units():
    r = CompartmentRow(1, 2, "t", content="😀" * 300, legacy=True)  # 600 UTF-16 units
    assert render_compartment(r, 3) == "## 1-2 · t\n" + "😀" * 210 + "…"


def test_sqlite_rows_and_dicts_are_accepted():
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.execute(
        "CREATE TABLE compartments (sequence INTEGER, start_ordinal INTEGER, end_ordinal INTEGER, title TEXT,"
        " p1 TEXT DEFAULT '', p2 TEXT DEFAULT '', p3 TEXT DEFAULT '', p4 TEXT DEFAULT '', content TEXT DEFAULT '',"
        " importance INTEGER DEFAULT 50, episode_type TEXT, legacy INTEGER DEFAULT 0, start_time INTEGER,"
        " end_time INTEGER)"
    )
    conn.execute("INSERT INTO compartments (sequence, start_ordinal, end_ordinal, title, p1, p2, p3, content)"
                 " VALUES (1, 1, 4, 'db row', 'one', 'two', 'three', 'one')")
    db_row = conn.execute("SELECT * FROM compartments").fetchone()
    assert render_compartment(db_row, 2) == "## 1-4 · db row\ntwo"
    assert render_compartment(db_row, 4) == "## 1-4 · db row"  # p4 '' is present and empty
    as_dict = dict(db_row)
    assert render_compartment(as_dict, 1) == "## 1-4 · db row\none"


# --- <session-history> ---------------------------------------------------------------------


def test_empty_session_history():
    assert render_session_history([], 60_000, True) == EMPTY_SESSION_HISTORY == "<session-history></session-history>"


def test_session_history_block_bytes():
    rows = [row(1, 5, "First", p1="alpha"), row(6, 9, "Second", p1="beta")]
    assert render_session_history(rows, 60_000, False) == (
        "<session-history>\n## 1-5 · First\nalpha\n\n## 6-9 · Second\nbeta\n</session-history>"
    )


def test_session_history_sorts_by_start():
    rows = [row(6, 9, "Second", p1="beta"), row(1, 5, "First", p1="alpha")]
    assert render_session_history(rows, 60_000, False).index("First") < render_session_history(
        rows, 60_000, False).index("Second")


def _guard_rows():
    return [
        CompartmentRow(i, i, "t", p1="x" * 100, p2="x" * 50, p3="x" * 20, p4="") for i in (1, 2, 3)
    ]


def test_budget_guard_does_nothing_when_it_fits():
    result = decay_render(_guard_rows(), 300, False, estimate=len)
    assert result.tiers == (2, 1, 1)
    assert result.demotions == 0
    assert result.tokens == len(result.body) == 287


def test_budget_guard_demotes_the_oldest_first():
    result = decay_render(_guard_rows(), 250, False, estimate=len)
    assert result.tiers == (4, 1, 1)
    assert result.demotions == 2
    assert result.body.startswith("## 1-1 · t\n\n## 2-2 · t\n" + "x" * 100)


def test_budget_guard_archives_then_moves_to_the_next_oldest():
    result = decay_render(_guard_rows(), 100, False, estimate=len)
    assert result.tiers == (5, 5, 2)
    assert result.body == "## 3-3 · t\n" + "x" * 50


def test_budget_guard_can_archive_everything():
    assert render_session_history(_guard_rows(), 1, False, estimate=len) == EMPTY_SESSION_HISTORY


def test_no_budget_disables_pressure_and_guard():
    result = decay_render(_guard_rows(), 0, False, estimate=len)
    assert result.pressure == 1.0
    assert result.tiers == (1, 1, 1)


def test_default_estimator_is_ceil_chars_over_3_5():
    assert [estimate_tokens("x" * n) for n in (0, 1, 3, 4, 7, 8)] == [0, 1, 1, 2, 2, 3]
    assert estimate_tokens("😀") == 1  # two UTF-16 units


@given(st.lists(st.tuples(st.integers(1, 100), st.integers(0, 400), st.booleans()), max_size=25),
       st.integers(1, 4000))
def test_guard_fits_or_has_archived_a_prefix(specs, budget):
    rows = []
    for i, (importance, size, legacy) in enumerate(specs, 1):
        rows.append(CompartmentRow(i, i, "t", p1="a" * size or "a", p2="b" * (size // 2), p3="c" * (size // 4),
                                   p4="", content="U: x\n" + "d" * size, importance=importance, legacy=legacy))
    result = decay_render(rows, budget, True)
    assert result.tokens == estimate_tokens(result.body)
    if result.tokens > budget:
        assert all(t == 5 for t in result.tiers)
    # Demotion only ever touches the oldest not-yet-archived row: an archived prefix, then one
    # row at or above its curve tier, then rows exactly at their curve tier.
    initial = assign_tiers(rows, budget)
    k = next((i for i, t in enumerate(result.tiers) if t < 5), len(rows))
    assert all(t == 5 for t in result.tiers[:k])
    if k < len(rows):
        assert result.tiers[k] >= initial[k]
        assert list(result.tiers[k + 1:]) == initial[k + 1:]
    assert result.demotions == sum(result.tiers) - sum(initial)


# --- the first request's quote ------------------------------------------------------------------

ASK = FirstRequest(1, "fix")
QUOTE = '<first-request ordinal="1">\nfix\n</first-request>'  # 48 characters: the cap at these budgets


def test_the_first_request_opens_the_history_once_its_compartment_renders_at_p3():
    result = decay_render(_guard_rows(), 260, False, estimate=len, first_request=ASK)
    assert decay_render(_guard_rows(), 260, False, estimate=len).tiers == (3, 1, 1)  # without it: P3
    assert result.quoted and result.tiers == (5, 2, 1)  # what is left after the quote: the oldest archived
    assert result.body == QUOTE + "\n\n## 2-2 · t\n" + "x" * 50 + "\n\n## 3-3 · t\n" + "x" * 100
    assert render_session_history(_guard_rows(), 260, False, estimate=len, first_request=ASK) == \
        f"<session-history>\n{result.body}\n</session-history>"


def test_no_quote_while_p1_or_p2_shows_the_request_and_then_the_whole_budget_is_the_compartments():
    for budget in (300, 60_000):
        plain = decay_render(_guard_rows(), budget, False, estimate=len)
        assert plain.tiers[0] <= 2
        assert decay_render(_guard_rows(), budget, False, estimate=len, first_request=ASK) == plain
    newest = FirstRequest(3, "fix")  # in the newest compartment, at P1 even at 260
    assert decay_render(_guard_rows(), 260, False, estimate=len, first_request=newest) == \
        decay_render(_guard_rows(), 260, False, estimate=len)


def test_the_quote_is_charged_to_the_history_budget_only_when_shown():
    for budget in (260, 280, 400, 1000):
        rows = _guard_rows() + [CompartmentRow(i, i, "t", p1="y" * 100, p2="y" * 50, p3="y" * 20, p4="")
                                for i in range(4, 12)]
        plain = decay_render(rows, budget, False, estimate=len)
        result = decay_render(rows, budget, False, estimate=len, first_request=ASK)
        assert result.quoted == request_hidden(rows, plain.tiers, 1)
        if result.quoted:
            lead = QUOTE + "\n\n"
            rest = decay_render(rows, budget - len(lead), False, estimate=len)
            assert result.body == lead + rest.body and result.tiers == rest.tiers
            assert result.tokens == len(result.body) <= budget
        else:
            assert result == plain


def test_the_quote_is_cut_at_a_word_to_its_cap_however_long_the_request():
    huge = FirstRequest(7, "please " + "refactor the parser " * 5000)  # 100 000 characters
    assert first_request_cap(60_000) == FIRST_REQUEST_MAX_TOKENS == 300  # a tenth of the budget, at most 300
    assert first_request_cap(1000) == 100 and first_request_cap(0) == 300
    assert first_request_cap(200) == 48  # at least 48 tokens
    block = first_request_block(huge, 300)
    assert 290 <= estimate_tokens(block) <= 300
    assert block.startswith('<first-request ordinal="7">\nplease refactor the parser refactor')
    assert block.endswith(" the…\n</first-request>") or block.endswith(" parser…\n</first-request>") or \
        block.endswith(" refactor…\n</first-request>")
    assert first_request_block(huge, 12) == ""  # the element alone costs 13: nothing fits
    rows = [CompartmentRow(i, i + 9, "t", p1="x" * 400, p2="x" * 200, p3="x" * 80, p4="p")
            for i in range(0, 400, 10)]
    result = decay_render(rows, 2000, False, first_request=huge)
    assert result.quoted and result.body.startswith(first_request_block(huge, 200) + "\n\n## ")
    assert result.tokens <= 2000


def test_the_quote_is_escaped_and_cannot_start_a_compartment():
    ask = FirstRequest(1, "use <b> & keep\n## not a heading")
    assert first_request_block(ask, 300, estimate=len) == (
        '<first-request ordinal="1">\nuse &lt;b&gt; &amp; keep\n ## not a heading\n</first-request>')


def test_where_the_request_is_decides_whether_the_history_hides_it():
    rows = [row(5, 9), row(10, 19), row(30, 39)]
    assert not request_hidden(rows, (5, 5, 5), 40)  # after the last compartment: still in the conversation
    assert not request_hidden([], (), 0)
    assert request_hidden(rows, (1, 1, 1), 2)  # before the first compartment: folded, shown by none
    assert request_hidden(rows, (1, 1, 1), 25)  # in a gap between compartments
    assert [request_hidden(rows, (tier, 1, 1), 7) for tier in (1, 2, 3, 4, 5)] == [False, False, True, True, True]


def test_no_quote_when_the_budget_leaves_it_too_little():
    assert first_request_cap(192) == 48 and first_request_cap(191) == 0  # 48 tokens would be over a quarter
    tiny = decay_render(_guard_rows(), 100, False, estimate=len, first_request=ASK)
    assert not tiny.quoted and tiny == decay_render(_guard_rows(), 100, False, estimate=len)
    assert decay_render(_guard_rows(), 260, False, estimate=len, first_request=FirstRequest(1, "  ")) == \
        decay_render(_guard_rows(), 260, False, estimate=len)


@given(st.lists(st.tuples(st.integers(1, 100), st.integers(0, 400)), min_size=1, max_size=25),
       st.integers(1, 4000), st.integers(0, 30), st.text(min_size=1, max_size=3000))
def test_with_a_quote_the_history_still_fits_its_budget(specs, budget, ordinal, text):
    rows = [CompartmentRow(i, i, "t", p1="a" * size or "a", p2="b" * (size // 2), p3="c" * (size // 4), p4="",
                           importance=importance) for i, (importance, size) in enumerate(specs, 1)]
    ask = FirstRequest(ordinal, text)
    plain = decay_render(rows, budget, True)
    result = decay_render(rows, budget, True, first_request=ask)
    assert result.tokens == estimate_tokens(result.body)
    if not result.quoted:
        assert result == plain
        return
    assert request_hidden(rows, plain.tiers, ordinal)
    assert result.body.startswith(f'<first-request ordinal="{ordinal}">\n')
    assert result.tokens <= budget or all(t == 5 for t in result.tiers)


# --- m[1] ----------------------------------------------------------------------------------


def test_new_compartments_always_p1():
    old = row(1, 4, "Old", p1="full one")
    block = render_new_compartments_p1([row(98, 120, "Added tag mode to ctx_expand", p1="P1 body"), old],
                                       temporal=False)
    assert block == (
        "<new-compartments>\n## 1-4 · Old\nfull one\n\n## 98-120 · Added tag mode to ctx_expand\nP1 body\n"
        "</new-compartments>"
    )
    assert render_new_compartments_p1([]) == ""


def test_m1_placeholder_exact():
    assert render_m1([], []) == M1_PLACEHOLDER
    assert M1_PLACEHOLDER == (
        "<session-history-since>(no new content since last materialization)</session-history-since>"
    )


def test_m1_assembly_order_and_bytes():
    updates = [
        {"kind": "update", "id": 7, "category": "ARCHITECTURE", "content": "new text"},
        {"kind": "superseded", "id": 2, "by": 9, "by_visible": True},
        {"kind": "superseded", "id": 3, "by": 10, "by_visible": False},
        {"kind": "archive", "id": 4},
    ]
    text = render_m1(
        [row(98, 120, "Added tag mode to ctx_expand", p1="P1 body")],
        [{"id": 15, "category": "CONSTRAINTS", "content": "keep m1 small"}],
        memory_updates=updates,
        new_user_profile=["prefers terse answers"],
        temporal=False,
    )
    assert text == (
        "<session-history-since>\n"
        "<memory-updates>\n"
        "These memories changed since the snapshot below — trust these:\n"
        '  <updated id="7" category="ARCHITECTURE">new text</updated>\n'
        '  <superseded id="2" by="9"/>\n'
        '  <removed id="3"/>\n'
        '  <removed id="4"/>\n'
        "</memory-updates>\n"
        "<new-compartments>\n## 98-120 · Added tag mode to ctx_expand\nP1 body\n</new-compartments>\n"
        "<new-memories>\n<CONSTRAINTS>\n#15: keep m1 small\n</CONSTRAINTS>\n</new-memories>\n"
        "<new-user-profile>\n- prefers terse answers\n</new-user-profile>\n"
        "</session-history-since>"
    )


def test_m1_new_memories_trimmed_to_a_quarter_of_the_budget():
    memories = [{"id": 1, "category": "ARCHITECTURE", "content": "hi"}]  # 6 + 30 chars with estimate=len
    assert render_m1([], memories, memory_budget_tokens=100, estimate=len) == M1_PLACEHOLDER
    assert "#1: hi" in render_m1([], memories, memory_budget_tokens=144, estimate=len)


# --- <project-memory> ----------------------------------------------------------------------


def test_project_memory_golden():
    memories = [
        {"id": 2, "category": "CONSTRAINTS", "content": "x < y & z", "status": "active", "importance": 50},
        {"id": 1, "category": "ARCHITECTURE", "content": "the spine holds", "status": "active", "importance": 50},
    ]
    assert render_project_memory(memories, 4000) == (
        "<project-memory>\n<ARCHITECTURE>\n#1: the spine holds\n</ARCHITECTURE>\n"
        "<CONSTRAINTS>\n#2: x &lt; y &amp; z\n</CONSTRAINTS>\n</project-memory>"
    )


def test_project_memory_category_order_and_ids():
    cats = ["ZEBRA", "NAMING", "ALPHA", "CONFIG_VALUES", "CONSTRAINTS", "ARCHITECTURE", "PROJECT_RULES"]
    memories = [{"id": 20 - i, "category": c, "content": c.lower()} for i, c in enumerate(cats)]
    memories.append({"id": 1, "category": "NAMING", "content": "first naming"})
    text = render_project_memory(memories, 4000)
    order = [line[1:-1] for line in text.splitlines() if line.startswith("<") and not line.startswith("</")]
    assert order == ["project-memory", "PROJECT_RULES", "ARCHITECTURE", "CONSTRAINTS", "CONFIG_VALUES", "NAMING",
                     "ALPHA", "ZEBRA"]
    assert "<NAMING>\n#1: first naming\n#19: naming\n</NAMING>" in text


def test_memory_lines_continuations_source_and_cap():
    memories = [
        {"id": 5, "category": "NAMING", "content": "line1\nline2\n#999: forged"},
        {"id": 6, "category": "NAMING", "content": "shared", "source_project": "other-repo"},
        {"id": 7, "category": "NAMING", "content": "é" * 40_000},
    ]
    text = render_project_memory(memories, 10**9)
    assert "#5: line1\n  line2\n  #999: forged\n" in text
    assert "#6 [other-repo]: shared\n" in text
    capped = next(line for line in text.splitlines() if line.startswith("#7: "))
    assert capped == "#7: " + "é" * 32_768


def test_memory_admission_is_greedy_in_priority_order():
    memories = [
        {"id": 4, "category": "CONSTRAINTS", "content": "c", "importance": 20},
        {"id": 2, "category": "ARCHITECTURE", "content": "x" * 100, "importance": 90},
        {"id": 1, "category": "ARCHITECTURE", "content": "hi", "importance": 90},
        {"id": 3, "category": "NAMING", "content": "p", "importance": 10, "status": "permanent"},
        {"id": 9, "category": "NAMING", "content": "gone", "importance": 100, "status": "archived"},
    ]
    # Costs with estimate=len: the wrapper 34, #3 5+18, #1 6+30, #2 104 (skipped), #4 5+28.
    text = render_project_memory(memories, 100, estimate=len)
    assert text == (
        "<project-memory>\n<ARCHITECTURE>\n#1: hi\n</ARCHITECTURE>\n<NAMING>\n#3: p\n</NAMING>\n</project-memory>"
    )
    # A memory that does not fit is skipped and admission goes on: #4 comes after the too-big #2.
    text = render_project_memory(memories, 126, estimate=len)
    assert "#4: c" in text and "#2:" not in text and "#1: hi" in text
    assert "#4: c" not in render_project_memory(memories, 125, estimate=len)
    assert render_project_memory(memories, 0) == ""
    assert "#9" not in render_project_memory(memories, 10**6)


def test_memory_rows_from_sqlite():
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE memories (id INTEGER, category TEXT, content TEXT, status TEXT, importance INTEGER)")
    conn.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?)", [
        (1, "ARCHITECTURE", "the spine holds", "active", 50),
        (2, "CONSTRAINTS", "x < y & z", "active", 50),
        (3, "NAMING", "archived one", "archived", 99),
    ])
    rows = conn.execute("SELECT * FROM memories").fetchall()
    assert render_project_memory(rows, 4000) == (
        "<project-memory>\n<ARCHITECTURE>\n#1: the spine holds\n</ARCHITECTURE>\n"
        "<CONSTRAINTS>\n#2: x &lt; y &amp; z\n</CONSTRAINTS>\n</project-memory>"
    )


def test_memory_recency_breaks_importance_ties():
    memories = [
        {"id": 1, "category": "NAMING", "content": "old", "last_seen_at": 10},
        {"id": 2, "category": "NAMING", "content": "new", "verified_at": 20},
    ]
    # Only room for one line (wrapper 34 + category 18 + line 7): the more recently seen/verified wins.
    text = render_project_memory(memories, 64, estimate=len)
    assert "#2: new" in text and "#1:" not in text


def test_user_profile_admission():
    assert render_user_profile(["a", "b"], None) == "<user-profile>\n- a\n- b\n</user-profile>"
    assert render_user_profile(["a", "b"], 7, estimate=len) == "<user-profile>\n- a\n</user-profile>"
    assert render_user_profile([], None) == ""
