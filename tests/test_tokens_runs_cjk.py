"""Issue #14 item 9: the estimator on long runs of repeated characters and on CJK text, within ±25% of
exact cl100k (the offline encoding), over generated text classes (hypothesis) and real CJK text."""

from __future__ import annotations

import glob
import sysconfig

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magic_context import tokens

TOLERANCE = 0.25
SLACK = 3  # tokens: the joins between a run and its neighbours


def _close(text: str) -> tuple[bool, int, int]:
    exact, estimate = tokens.count_exact(text), tokens.estimate(text)
    return abs(estimate - exact) <= TOLERANCE * exact + SLACK, exact, estimate


ASCII = st.characters(min_codepoint=32, max_codepoint=126)
ANY_CHAR = st.one_of(
    ASCII,
    st.sampled_from("\n\t"),
    st.characters(min_codepoint=0xA0, max_codepoint=0x24F),  # Latin-1 and Latin Extended
    st.characters(min_codepoint=0x2500, max_codepoint=0x257F),  # box drawing
    st.sampled_from("—–…•→★"),
    st.characters(min_codepoint=0x3041, max_codepoint=0x30FF),  # kana
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK unified
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1F64F),  # emoji
)
WORDS = ("the", "test", "suite", "failed", "in", "module", "run", "it", "again", "with", "a", "fix", "for", "path",
         "def", "return", "None", "error:", "line", "42", "ok", "\n", "#", "result", "=", "value")
PROSE = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join)  # words: random letters are no text


def _run(unit: str, count: int) -> str:
    return unit * count


ONE_CHAR_RUNS = st.builds(_run, ANY_CHAR, st.integers(100, 20_000))
TWO_CHAR_RUNS = st.builds(_run, st.tuples(ASCII, ASCII).map("".join), st.integers(60, 10_000))
MIXED_TWO_CHAR_RUNS = st.builds(_run, st.tuples(ANY_CHAR, ANY_CHAR).map("".join), st.integers(60, 5_000))
RUN_IN_PROSE = st.builds(lambda a, run, b: a + run + b, PROSE, st.one_of(ONE_CHAR_RUNS, TWO_CHAR_RUNS), PROSE)
CJK_RANDOM = st.text(alphabet=st.one_of(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
                                        st.characters(min_codepoint=0x3041, max_codepoint=0x30FF),
                                        st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),
                                        st.sampled_from("。、，！？「」 \n")), min_size=200, max_size=3000)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(ONE_CHAR_RUNS)
def test_runs_of_one_repeated_character(text):
    ok, exact, estimate = _close(text)
    assert ok, f"{text[:1]!r}×{len(text)}: exact {exact}, estimate {estimate}"


@PROPERTY
@given(TWO_CHAR_RUNS)
def test_runs_of_two_repeated_ascii_characters(text):
    ok, exact, estimate = _close(text)
    assert ok, f"{text[:2]!r}×{len(text) // 2}: exact {exact}, estimate {estimate}"


@PROPERTY
@given(MIXED_TWO_CHAR_RUNS)
def test_runs_of_two_repeated_characters_of_any_width(text):
    """Pairs beyond the ASCII pair table cost what their characters cost alone: never far below cl100k,
    and at most ~2× above when cl100k happens to merge the two (the safe direction for budgets)."""
    exact, estimate = tokens.count_exact(text), tokens.estimate(text)
    assert (1 - TOLERANCE) * exact - SLACK <= estimate <= 2.1 * exact + SLACK, \
        f"{text[:2]!r}×{len(text) // 2}: exact {exact}, estimate {estimate}"


@PROPERTY
@given(RUN_IN_PROSE)
def test_a_run_inside_prose(text):
    ok, exact, estimate = _close(text)
    assert ok, f"{text[:80]!r}…: exact {exact}, estimate {estimate}"


@PROPERTY
@given(CJK_RANDOM)
def test_generated_cjk_text(text):
    ok, exact, estimate = _close(text)
    assert ok, f"{text[:20]!r}…: exact {exact}, estimate {estimate}"


REAL_CJK = sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/test/cjkencodings/*-utf8.txt"))


@pytest.mark.skipif(not REAL_CJK, reason="this Python ships without test/cjkencodings")
@pytest.mark.parametrize("path", [p for p in REAL_CJK if "hkscs" not in p])  # hkscs: 15 characters, mostly Latin
def test_real_cjk_text(path):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    ok, exact, estimate = _close(text)
    assert ok, f"{path}: exact {exact}, estimate {estimate}"


def test_the_reported_cases():
    """The issue's numbers: 100 000 repeated characters estimated at 2 tokens; CJK at ~0.55× of cl100k."""
    for unit in ("a", "ab", " ", "=", "0", "中"):
        text = unit * (100_000 // len(unit))
        ok, exact, estimate = _close(text)
        assert ok, f"{unit!r}: exact {exact}, estimate {estimate}"


def test_run_detection_costs_nothing_on_text_without_runs():
    text = "def handler(request):\n    return {'status': 200, 'items': [1, 2, 3]}\n" * 50
    assert tokens._periodic_runs(text.encode()) == []  # a repeated 70-byte line is not a unit of ≤ 60 bytes
    assert tokens.estimate(text) == tokens._estimate_plain(text, text.encode())


def test_runs_are_found_across_block_seams():
    text = "x" * (tokens._CHUNK - 50) + "=" * 200 + "y"
    runs = tokens._periodic_runs(text.encode())
    assert [(start, end) for start, end, _unit in runs][-1] == (tokens._CHUNK - 50, tokens._CHUNK + 150)


def test_the_generated_tables_match_cl100k():
    """A sample of `token_tables` against the encoding (bench/token_tables.py regenerates them whole)."""
    import random

    from magic_context import token_tables

    rng = random.Random(14)
    for cp in [rng.randrange(0x80, 0x20000) for _ in range(300)] + [0x4E2D, 0xAC00, 0x1F642, 0xE9]:
        if 0xD800 <= cp < 0xE000:
            continue
        assert tokens.char_cost(cp) == tokens.count_exact(chr(cp)), hex(cp)
    for char in "a =-#\n0":
        run = char * 1200
        assert round(2 * len(run) / tokens.count_exact(run)) == token_tables.ASCII_RUN[ord(char)]
