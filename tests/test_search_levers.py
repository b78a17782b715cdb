"""The fourth round's search levers (bench/search_levers.py "r4:", README "Round four") do what their rows say:
the abbreviation table, the embedded-text variants and the session-misspellings lever, on real SQLite."""

from __future__ import annotations

from contextlib import ExitStack

from historian_helpers import NOW, PiBuilder, store_pi
from search_helpers import fold

from bench import search_abbrev as abbrev
from bench import search_levers as levers
from magic_context.search import engine


def test_abbreviations_map_both_ways_plurals_included_and_leave_other_words_alone() -> None:
    assert abbrev.counterparts("background") == ["bg"]
    assert abbrev.counterparts("bg") == ["background"]
    assert set(abbrev.counterparts("messages")) == {"msg", "msgs"}
    assert abbrev.counterparts("zebra") == []
    for short, full in abbrev.ABBREVIATIONS.items():
        assert short != full and short in abbrev.FULL_WORDS[full]
    for ambiguous in ("res", "ts", "ws", "kb", "rm"):  # more than one common meaning in code: left out
        assert ambiguous not in abbrev.ABBREVIATIONS


def test_expansions_read_identifier_parts_and_can_skip_paths() -> None:
    assert abbrev.identifier_parts("toolBgColor") == ["tool", "bg", "color"]
    assert abbrev.identifier_parts("HTTPServer_msg-id") == ["http", "server", "msg", "id"]
    text = "set toolBgColor in packages/tui/src/theme.ts and log the err"
    assert abbrev.expansions(text) == ["background", "source", "error"]
    assert abbrev.expansions(text, paths=False) == ["background", "error"]


def test_embedded_text_variants() -> None:
    text = 'Edited packages/tui/src/theme.ts: toolBgColor uses msg_id → A: "ok"'
    assert levers.embedded_text("same", text) == text
    assert "tool bg color" in levers.embedded_text("split", text) and "msg id" in levers.embedded_text("split", text)
    assert "tool background color uses message id" in levers.embedded_text("split+expand", text)
    assert levers.embedded_text("split+expand", text).startswith("Edited ")  # plain words keep their case
    assert levers.embedded_text("expand", text).endswith("\nsource background message")  # first seen first
    assert "packages/" not in levers.embedded_text("no-paths", text)
    summary = '[1-4] U: "make the footer warn" → Ran `npm test` → A: "done"\n[5-6] U: "ship it"'
    assert levers.embedded_text("user1", summary) == summary + "\nmake the footer warn ship it"


def test_edits_one_step_away() -> None:
    assert levers._edits1("usage", "swap") == {"suage", "uasge", "usgae", "usaeg"}
    with_deletions = levers._edits1("usage", "swap+del")
    assert {"sage", "usge", "usag"} <= with_deletions and "usage" not in with_deletions
    assert "usafe" in levers._edits1("usage", "all") and "usagee" in levers._edits1("usage", "all")


def test_the_sessions_misspelling_of_a_query_word_reaches_its_message(conn) -> None:
    b = PiBuilder()
    b.user("show the token usage in the footer")  # 0
    b.say("The footer now shows the usage as a percentage.")  # 1
    b.user("the context suage in the footer should turn yellow over seventy percent")  # 2: the person's typo
    b.say("Done: yellow over 70%, red over 90%.")  # 3
    b.user("now rename the walrus module")  # 4
    b.say("Renamed walrus to pinniped.")  # 5
    b.user("live tail")  # 6
    pk = store_pi(conn, b.messages, session_id="typo", project_id="dir:typo")
    fold(conn, pk, 0, 5, "footer and walrus")

    def ordinals() -> set[int | None]:
        return {h.ordinal for h in engine.search(conn, "usage indicator", session_pks=[pk],
                                                 project_id="dir:typo", sources=["message"], now_ms=NOW).hits}

    before = ordinals()
    with ExitStack() as stack:
        levers.typo_variants(3, ops="swap")(stack)
        after = ordinals()
    assert 2 not in before and 2 in after  # "suage" is one transposition from "usage", rarer than it
    with ExitStack() as stack:
        levers.typo_variants(3, min_len=6, ops="swap")(stack)
        assert 2 not in ordinals()  # "usage" is shorter than 6 letters: left alone
