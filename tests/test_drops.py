"""transform/drops.py byte by byte: the truncation and live previews, which mode a dropped tag is served in,
what an edit marker keeps, which blocks and messages a drop removes, and what `apply` writes for each mode.
Every served byte here is replayed on later passes, so each expectation is the exact text."""

from __future__ import annotations

import pytest

from magic_context.transform import drops, tagger
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
    placeholder,
)
from magic_context.wire import model as m

# --- truncated -------------------------------------------------------------------------------------


def test_truncated_keeps_text_up_to_250_characters_whole() -> None:
    assert drops.truncated(7, "a" * 250) == "[truncated §7§]\n" + "a" * 250
    assert drops.truncated(7, "") == "[truncated §7§]\n"


def test_truncated_cuts_hard_at_250_without_a_break_in_the_last_30() -> None:
    assert drops.truncated(7, "a" * 251) == "[truncated §7§]\n" + "a" * 250 + "…"
    text = "a" * 100 + " " + "b" * 200  # the only space is before the window
    assert drops.truncated(7, text) == "[truncated §7§]\n" + text[:250] + "…"
    text = "a" * 219 + " " + "b" * 100  # index 219: one before the window
    assert drops.truncated(7, text) == "[truncated §7§]\n" + text[:250] + "…"


def test_truncated_cuts_at_the_last_space_or_newline_in_the_window() -> None:
    assert drops.truncated(2, "a" * 220 + " " + "b" * 100) == "[truncated §2§]\n" + "a" * 220 + "…"  # window start
    assert drops.truncated(2, "a" * 230 + " " + "b" * 100) == "[truncated §2§]\n" + "a" * 230 + "…"
    newline_last = "a" * 225 + " " + "b" * 10 + "\n" + "c" * 100
    assert drops.truncated(2, newline_last) == "[truncated §2§]\n" + "a" * 225 + " " + "b" * 10 + "…"
    space_last = "a" * 225 + "\n" + "b" * 10 + " " + "c" * 100
    assert drops.truncated(2, space_last) == "[truncated §2§]\n" + "a" * 225 + "\n" + "b" * 10 + "…"
    two_spaces = "a" * 222 + " " + "b" * 5 + " " + "c" * 100
    assert drops.truncated(2, two_spaces) == "[truncated §2§]\n" + "a" * 222 + " " + "b" * 5 + "…"  # the last one
    two_newlines = "a" * 222 + "\n" + "b" * 5 + "\n" + "c" * 100
    assert drops.truncated(2, two_newlines) == "[truncated §2§]\n" + "a" * 222 + "\n" + "b" * 5 + "…"
    early_newline = "a" * 100 + "\n" + "b" * 200  # a newline before the window is no cut point either
    assert drops.truncated(2, early_newline) == "[truncated §2§]\n" + early_newline[:250] + "…"
    trailing = "a" * 224 + "  " + "b" * 100  # the cut's trailing blank goes
    assert drops.truncated(2, trailing) == "[truncated §2§]\n" + "a" * 224 + "…"


# --- live preview ----------------------------------------------------------------------------------


def test_cut_moves_to_a_line_boundary_within_400_characters() -> None:
    text = "x" * 100 + "\n" + "y" * 1000
    assert drops._cut(text, 500, forward=True) == 101  # just after the newline at 100 (400 back: inclusive)
    assert drops._cut(text, 501, forward=True) == 501  # 401 back: too far
    assert drops._cut(text, 101, forward=True) == 101  # the newline right before `at`
    assert drops._cut(text, 100, forward=True) == 100  # `at` itself is not searched backwards
    assert drops._cut("\n" + "x" * 10, 5, forward=True) == 1  # a newline at index 0 counts
    assert drops._cut(text, 0, forward=False) == 101  # the first newline at or after `at`
    assert drops._cut(text, 100, forward=False) == 101
    assert drops._cut(text, 101, forward=False) == 101  # 400 ahead: exclusive, and nothing else there
    late = "y" * 1000 + "\n"
    assert drops._cut(late, 601, forward=False) == 1001  # the newline 399 ahead
    assert drops._cut(late, 600, forward=False) == 600  # 400 ahead: out of reach


def test_live_preview_of_3000_lines_shows_whole_head_and_tail_lines() -> None:
    text = "\n".join(f"L{i:09d}" for i in range(3000))  # 11 characters a line with its newline
    head, tail = text[:5995], text[31009:]  # lines 0..544 | lines 2819..2999
    assert head.endswith("L000000544\n") and tail.startswith("L000002819\n")
    assert drops.live_preview(9, text, 12_345) == (
        "[preview §9§: 3,000 lines, ~12,345 tokens, too large for the context window; shown: the first 545 and "
        "last 180 lines. The full text: `mc expand 9` (ctx_expand §9§)]\n"
        + head + "\n[… 2,274 lines / 25,014 characters omitted …]\n" + tail)


def test_live_preview_of_one_long_line_never_repeats_what_the_head_shows() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(7000))
    assert drops.live_preview(3, text, 2_000) == (
        "[preview §3§: 1 lines, ~2,000 tokens, too large for the context window; shown: the first 0 and "
        "last 0 lines. The full text: `mc expand 3` (ctx_expand §3§)]\n"
        + text[:6000] + "\n[… 0 lines / 0 characters omitted …]\n" + text[6000:])


# --- modes -----------------------------------------------------------------------------------------


def site(kind: str, role: str, *, mode: str | None = None, pinned: bool = False) -> tagger.Site:
    return tagger.Site(Tag(4, "k", kind, "m", status=DROPPED, drop_mode=mode), 0, None, role, pinned=pinned)


def test_default_mode_by_kind_and_role() -> None:
    assert drops.default_mode(site(KIND_TOOL, m.TOOL)) == MODE_REMOVED
    assert drops.default_mode(site(KIND_TEXT, m.USER)) == MODE_TRUNCATED
    assert drops.default_mode(site(KIND_TEXT, m.ASSISTANT)) == "placeholder"
    assert drops.default_mode(site(KIND_MEDIA, m.USER)) == "placeholder"


def test_mode_of_prefers_the_frozen_mode_and_never_removes_a_pinned_call() -> None:
    assert drops.mode_of(site(KIND_TOOL, m.TOOL, mode=MODE_SKELETON)) == MODE_SKELETON
    assert drops.mode_of(site(KIND_TEXT, m.USER, mode="placeholder")) == "placeholder"
    assert drops.mode_of(site(KIND_TOOL, m.TOOL, mode=MODE_EDIT_MARKER)) == MODE_EDIT_MARKER
    assert drops.mode_of(site(KIND_TOOL, m.TOOL, pinned=True)) == MODE_SKELETON
    assert drops.mode_of(site(KIND_TOOL, m.TOOL, mode=MODE_EDIT_MARKER, pinned=True)) == MODE_SKELETON
    assert drops.mode_of(site(KIND_TOOL, m.TOOL, mode=MODE_PREVIEW, pinned=True)) == MODE_PREVIEW
    assert drops.mode_of(site(KIND_TEXT, m.USER, pinned=True)) == MODE_TRUNCATED


@pytest.mark.parametrize(("value", "expected"), [
    ({"filePath": "a.py", "path": "b.py", "content": "x" * 99}, [("filePath", "a.py")]),
    ({"file_path": 5, "path": "p.py", "new_string": "y"}, [("path", "p.py")]),  # a non-string path is skipped
    ({"file_path": "c.py"}, [("file_path", "c.py")]),
    ({"filename": "d.py", "file": "e.py"}, [("filename", "d.py")]),
    ({"file": "e.py"}, [("file", "e.py")]),
    ({"content": "x"}, []),
    ("a patch as a string", []),
    (None, []),
])
def test_edit_marker_input_keeps_only_the_first_path_key(value: object, expected: list) -> None:
    out = drops.edit_marker_input(value, 3)
    assert isinstance(out, dict) and list(out.items()) == [*expected, ("dropped", "[dropped §3§]")]


# --- removed blocks and gone messages --------------------------------------------------------------


def conversation() -> list[m.Message]:
    """u0: text + image; a1: reasoning, text, call c1; r1, r1b: two results of c1; a2: call c2; r2: its result;
    r3: an orphan result (no call); a3: reasoning + text."""
    return [
        m.Message("u0", m.USER, [m.Block(m.TEXT, text="look " * 80, key="p0"),
                                 m.Block(m.MEDIA, media_type="image/png", key="p1")]),
        m.Message("a1", m.ASSISTANT, [m.Block(m.REASONING, text="hmm", meta={"signature": "s"}, key="r"),
                                      m.Block(m.TEXT, text="reading", key="p0"),
                                      m.Block(m.TOOL_CALL, tool_id="c1", tool_name="edit",
                                              input={"path": "a.py", "new": "zzz"}, key="p1")]),
        m.Message("r1", m.TOOL, [m.Block(m.TOOL_RESULT, text="first", tool_id="c1", tool_name="edit", key="p0")]),
        m.Message("r1b", m.TOOL, [m.Block(m.TOOL_RESULT, text="second", tool_id="c1", tool_name="edit",
                                          key="p0")]),
        m.Message("a2", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c2", tool_name="read", input={"path": "b"},
                                              key="p0")]),
        m.Message("r2", m.TOOL, [m.Block(m.TOOL_RESULT, text="bbb", tool_id="c2", tool_name="read", key="p0")]),
        m.Message("r3", m.TOOL, [m.Block(m.TOOL_RESULT, text="orphan", tool_id="c9", tool_name="bash", key="p0")]),
        m.Message("a3", m.ASSISTANT, [m.Block(m.REASONING, text="more", meta={"signature": "t"}, key="r"),
                                      m.Block(m.TEXT, text="done", key="p0")]),
    ]


def tagged() -> tuple[list[m.Message], dict[str, tagger.Site]]:
    messages = conversation()
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    by = {}
    for s in sites:
        name = s.call[1].tool_id if s.call is not None else (s.results[0][1].tool_id if s.results else None)
        by[name or f"{messages[s.message_index].id}:{s.block.key if s.block else ''}"] = s
    return messages, by


def drop(s: tagger.Site, mode: str | None = None) -> tagger.Site:
    s.tag.status, s.tag.drop_mode = DROPPED, mode
    return s


def test_the_conversation_is_tagged_as_expected() -> None:
    _, by = tagged()
    assert sorted(by) == ["a1:p0", "a3:p0", "c1", "c2", "c9", "u0:p0", "u0:p1"]
    assert [i for i, _ in by["c1"].results] == [2, 3] and by["c1"].call is not None and by["c1"].call[0] == 1
    assert by["c9"].call is None and [i for i, _ in by["c9"].results] == [6]


def test_removed_blocks_take_a_removed_arc_whole() -> None:
    messages, by = tagged()
    removed, touched = drops.removed_blocks([drop(by["c1"]), by["c2"], by["u0:p0"]])
    assert removed == {id(messages[1].blocks[2]), id(messages[2].blocks[0]), id(messages[3].blocks[0])}
    assert touched == {1, 2, 3}


@pytest.mark.parametrize("mode", [MODE_SKELETON, MODE_EDIT_MARKER, MODE_PREVIEW])
def test_removed_blocks_keep_the_call_and_first_result_of_a_kept_arc(mode: str) -> None:
    messages, by = tagged()
    removed, touched = drops.removed_blocks([drop(by["c1"], mode)])
    assert removed == {id(messages[3].blocks[0])} and touched == {3}


def test_removed_blocks_of_an_orphan_result_take_it_even_as_a_skeleton() -> None:
    messages, by = tagged()
    removed, touched = drops.removed_blocks([drop(by["c9"], MODE_SKELETON)])
    assert removed == {id(messages[6].blocks[0])} and touched == {6}


def test_removed_blocks_ignore_dropped_text() -> None:
    _, by = tagged()
    assert drops.removed_blocks([drop(by["a1:p0"]), drop(by["u0:p1"])]) == (set(), set())


def test_fully_dropped_needs_content_and_all_of_it_removed() -> None:
    messages = conversation()
    call, text = messages[1].blocks[2], messages[1].blocks[1]
    assert not drops.fully_dropped(messages[1], {id(call)})  # its text stays
    assert drops.fully_dropped(messages[1], {id(call), id(text)})  # reasoning is not content
    only_reasoning = m.Message("x", m.ASSISTANT, [m.Block(m.REASONING, text="r", key="r")])
    assert not drops.fully_dropped(only_reasoning, set())
    assert drops.fully_dropped(messages[4], {id(messages[4].blocks[0])})


def test_gone_messages_are_the_touched_messages_left_empty() -> None:
    messages, by = tagged()
    removed, gone = drops.gone_messages(messages, [drop(by["c1"]), drop(by["c2"])])
    assert gone == {2, 3, 4, 5}  # a1 keeps its text; a2 held only the call
    assert len(removed) == 5


# --- apply -----------------------------------------------------------------------------------------


def served(kept: list[m.Message]) -> list[tuple[str, list[tuple[str, str | None]]]]:
    return [(msg.id, [(b.kind, b.text if b.kind != m.TOOL_CALL else repr(b.input)) for b in msg.blocks])
            for msg in kept]


def test_apply_with_nothing_dropped_changes_nothing() -> None:
    messages, by = tagged()
    assert served(drops.apply(messages, list(by.values()), set())) == served(conversation())


def test_apply_text_modes() -> None:
    messages, by = tagged()
    user, assistant = drop(by["u0:p0"]), drop(by["a1:p0"])
    kept = drops.apply(messages, [user, assistant], set())
    assert kept[0].blocks[0].text == drops.truncated(user.tag.number, "look " * 80)
    assert kept[1].blocks[1].text == placeholder(assistant.tag.number)
    messages, by = tagged()
    drops.apply(messages, [drop(by["u0:p0"], "placeholder")], set())
    assert messages[0].blocks[0].text == placeholder(by["u0:p0"].tag.number)


def test_apply_replaces_media_in_place_with_a_synthetic_placeholder() -> None:
    messages, by = tagged()
    image = by["u0:p1"]
    kept = drops.apply(messages, [drop(image)], set())
    block = kept[0].blocks[1]
    assert (block.kind, block.text, block.key, block.synthetic) == (m.TEXT, placeholder(image.tag.number),
                                                                    "p1:dropped", True)
    assert [b.kind for b in kept[0].blocks] == [m.TEXT, m.TEXT]


def test_apply_removed_arc_goes_with_any_turn_it_empties() -> None:
    messages, by = tagged()
    kept = drops.apply(messages, [drop(by["c1"]), drop(by["c2"])], set())
    assert [msg.id for msg in kept] == ["u0", "a1", "r3", "a3"]
    assert [b.kind for b in kept[1].blocks] == [m.REASONING, m.TEXT]


def test_apply_skeleton_and_edit_marker() -> None:
    messages, by = tagged()
    number = by["c1"].tag.number
    kept = drops.apply(messages, [drop(by["c1"], MODE_SKELETON)], set())
    assert [msg.id for msg in kept] == ["u0", "a1", "r1", "a2", "r2", "r3", "a3"]  # r1b: the second result goes
    assert kept[2].blocks[0].text == placeholder(number)
    assert kept[1].blocks[2].input == {"path": "a.py", "new": "zzz"}
    messages, by = tagged()
    kept = drops.apply(messages, [drop(by["c1"], MODE_EDIT_MARKER)], set())
    assert kept[2].blocks[0].text == placeholder(number)
    assert kept[1].blocks[2].input == {"path": "a.py", "dropped": placeholder(number)}


def test_apply_previews_a_tool_output_and_a_text() -> None:
    messages, by = tagged()
    tool, text = drop(by["c2"], MODE_PREVIEW), drop(by["a1:p0"], MODE_PREVIEW)
    tool.tag.tokens, text.tag.tokens = 777, 55
    kept = drops.apply(messages, [tool, text], set())
    assert [msg.id for msg in kept] == [msg.id for msg in conversation()]
    assert kept[5].blocks[0].text == drops.live_preview(tool.tag.number, "bbb", 777)
    assert kept[1].blocks[1].text == drops.live_preview(text.tag.number, "reading", 55)
    assert kept[4].blocks[0].input == {"path": "b"}
    messages, by = tagged()
    both = drop(by["c1"], MODE_PREVIEW)
    drops.apply(messages, [both], set())
    assert messages[2].blocks[0].text == drops.live_preview(both.tag.number, "first\nsecond", both.tag.tokens)


def test_apply_strips_reasoning_only_of_the_listed_messages() -> None:
    messages, by = tagged()
    kept = drops.apply(messages, list(by.values()), {"a3"})
    assert [b.kind for b in kept[-1].blocks] == [m.TEXT]
    assert [b.kind for b in kept[1].blocks] == [m.REASONING, m.TEXT, m.TOOL_CALL]


def test_apply_an_orphan_output_frozen_as_an_edit_marker_goes_whole() -> None:
    """A tag frozen as an edit marker replays on later passes; once the harness pruned the call's message the
    output is an orphan: it is removed like any orphan (there is no call input to mark)."""
    messages, by = tagged()
    orphan = drop(by["c9"], MODE_EDIT_MARKER)
    kept = drops.apply(messages, [orphan], set())
    assert [msg.id for msg in kept] == ["u0", "a1", "r1", "r1b", "a2", "r2", "a3"]
