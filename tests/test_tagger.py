"""transform/tagger.py field by field: which parts get a tag, the part keys that make a tag stable across
passes, the recorded sizes, tool arcs with several results, pinned calls, and the visible prefixes."""

from __future__ import annotations

from magic_context.transform import tagger
from magic_context.transform.tags import DROPPED, KIND_MEDIA, KIND_TEXT, KIND_TOOL, Tag
from magic_context.wire import model as m


def words(text: str) -> int:
    """A visible stand-in estimate: one token a word (0 for no text would hide the `if text` branch)."""
    return len(text.split()) + 100


def session() -> list[m.Message]:
    return [
        m.Message("s", m.SYSTEM, [m.Block(m.TEXT, text="system rules", key="p0")]),
        m.Message("u1", m.USER, [m.Block(m.TEXT, text="§4§ fix it é", key="p0"),  # a user's § stays
                                 m.Block(m.TEXT, text=" \n\t", key="p1"),  # blank: untagged
                                 m.Block(m.MEDIA, media_type="image/png", key="p2")]),
        m.Message("a1", m.ASSISTANT, [
            m.Block(m.REASONING, text="think", key="r"),
            m.Block(m.TEXT, text='§12">§ On it.', key="p0"),
            m.Block(m.TOOL_CALL, tool_id="c1", tool_name="Bash", input={"cmd": "ls"}, key="p1"),
        ]),
        m.Message("r1", m.TOOL, [m.Block(m.TOOL_RESULT, text="a.py", tool_id="c1", key="p0"),
                                 m.Block(m.TOOL_RESULT, text="b.py", tool_id="c1", key="p1")]),
        m.Message("r9", m.TOOL, [m.Block(m.TOOL_RESULT, text="lost", tool_id="c9", tool_name="grep", key="p0")]),
        m.Message("sum", m.USER, [m.Block(m.TEXT, text="summary", key="p0")], compaction=m.COMPACTION_SUMMARY),
        m.Message("inj", m.USER, [m.Block(m.TEXT, text="injected", key="p0")], synthetic=True),
        m.Message("a2", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c2", tool_name="read", input={"p": 1},
                                              key="p0")], atomic=True),
        m.Message("r2", m.TOOL, [m.Block(m.TOOL_RESULT, text="", tool_id="c2", tool_name="read", key="p0")]),
    ]


def test_assign_tags_each_taggable_part_once_with_stable_keys() -> None:
    messages = session()
    known: dict[str, Tag] = {}
    sites, new, counter = tagger.assign(messages, known, 10, words)
    assert [(s.tag.number, s.tag.part_key, s.tag.kind, s.tag.message_id, s.message_index, s.role) for s in sites] == [
        (11, "u1:p0", KIND_TEXT, "u1", 1, m.USER),
        (12, "u1:p2", KIND_MEDIA, "u1", 1, m.USER),
        (13, "a1:p0", KIND_TEXT, "a1", 2, m.ASSISTANT),
        (14, "tool:c1@a1", KIND_TOOL, "r1", 3, m.TOOL),  # keyed by the call's message
        (15, "tool:c9@r9", KIND_TOOL, "r9", 4, m.TOOL),  # an orphan: keyed by its own message
        (16, "tool:c2@a2", KIND_TOOL, "r2", 8, m.TOOL),
    ]
    assert counter == 16 and new == [s.tag for s in sites] and all(t.new for t in new)
    assert set(known) == {s.tag.part_key for s in sites}
    assert [s.tag.role for s in sites] == [m.USER, m.USER, m.ASSISTANT, m.TOOL, m.TOOL, m.TOOL]


def test_assign_records_sizes_names_and_arcs() -> None:
    messages = session()
    sites, _, _ = tagger.assign(messages, {}, 0, words)
    text, media, reply, arc, orphan, pinned = sites
    assert (text.tag.byte_size, text.tag.tokens) == (len("§4§ fix it é".encode()), 104)
    assert text.block is messages[1].blocks[0] and text.block.text == "§4§ fix it é"
    assert (media.tag.byte_size, media.tag.tokens, media.block is messages[1].blocks[2]) == (0, 0, True)
    assert reply.block is not None and reply.block.text == "On it."  # the echo is stripped before sizing
    assert (reply.tag.byte_size, reply.tag.tokens) == (6, 102)
    assert arc.tag.tool_name == "Bash"  # the call's name when the result has none
    assert arc.call == (2, messages[2].blocks[2]) and arc.results == [(3, messages[3].blocks[0]),
                                                                      (3, messages[3].blocks[1])]
    assert (arc.tag.byte_size, arc.tag.tokens) == (9, 102)  # "a.py\nb.py"
    assert arc.tag.input_tokens == words('{"cmd": "ls"}') + tagger.TOOL_CALL_OVERHEAD == 114
    assert arc.text == "a.py\nb.py" and not arc.pinned
    assert orphan.tag.tool_name == "grep" and orphan.call is None and orphan.results == [(4, messages[4].blocks[0])]
    assert orphan.tag.input_tokens == 0 and not orphan.pinned
    assert (pinned.tag.tokens, pinned.tag.byte_size) == (0, 0) and pinned.pinned  # no text: no estimate
    assert pinned.tag.input_tokens == words('{"p": 1}') + 12


def test_known_tags_are_reused_and_new_ones_continue_the_counter() -> None:
    known: dict[str, Tag] = {}
    _, _, counter = tagger.assign(session(), known, 0, words)
    grown = [*session(), m.Message("u3", m.USER, [m.Block(m.TEXT, text="next", key="p0")])]
    sites, new, counter2 = tagger.assign(grown, known, counter, words)
    assert [s.tag.number for s in sites] == [1, 2, 3, 4, 5, 6, 7] and counter2 == 7
    assert [t.part_key for t in new] == ["u3:p0"]
    kept = known["a1:p0"]
    kept.role = ""
    tagger.assign(session(), known, counter2, words)
    assert known["a1:p0"] is kept and kept.role == m.ASSISTANT  # a reused tag still learns its role


def test_call_tokens_falls_back_to_str_for_unserializable_input() -> None:
    block = m.Block(m.TOOL_CALL, tool_id="c", tool_name="x", input={"a": b"\x00"})
    assert tagger.call_tokens(block, len) == len(str({"a": b"\x00"})) + 12
    assert tagger.call_tokens(m.Block(m.TOOL_CALL, tool_id="c", input={"é": 1}), len) == len('{"é": 1}') + 12


def test_pair_tool_blocks_maps_results_to_calls_and_back() -> None:
    messages = session()
    call_of, results_of = tagger.pair_tool_blocks(messages)
    call = messages[2].blocks[2]
    first, second = messages[3].blocks
    assert call_of[id(first)] == (2, call) and call_of[id(second)] == (2, call)
    assert results_of[id(call)] == [(3, first), (3, second)]
    assert id(messages[4].blocks[0]) not in call_of  # the orphan has no call
    assert set(results_of) == {id(call), id(messages[7].blocks[0])}


def test_write_prefixes_marks_active_text_and_the_first_tool_output_only() -> None:
    messages = session()
    sites, _, _ = tagger.assign(messages, {}, 0, words)
    sites[2].tag.status = DROPPED
    tagger.write_prefixes(sites)
    assert messages[1].blocks[0].text == "§1§ §4§ fix it é"
    assert messages[1].blocks[2].text == ""  # media: no visible prefix
    assert messages[2].blocks[1].text == "On it."  # dropped: untouched
    assert [b.text for b in messages[3].blocks] == ["§4§ a.py", "b.py"]
    assert messages[8].blocks[0].text == "§6§ "
    assert tagger.prefix(42) == "§42§ "


def test_strip_echo_only_at_the_start() -> None:
    assert tagger.strip_echo("§3§ §4§ two echoes") == "two echoes"
    assert tagger.strip_echo("no echo §3§ here") == "no echo §3§ here"


def test_strip_echo_takes_echoes_split_by_newlines_at_once_so_a_second_strip_changes_nothing() -> None:
    """A refolding pass tags stripped text again: a second strip must leave it as the first left it."""
    for text in ("§4§\n§9§ Fixed it.", "§4§ \n\n §9§\tFixed it.", "§4§\nFixed it.", "§4§\n"):
        once = tagger.strip_echo(text)
        assert tagger.strip_echo(once) == once
    assert tagger.strip_echo("§4§\n§9§ Fixed it.") == "Fixed it."
    assert tagger.strip_echo("§4§\nFixed it.") == "\nFixed it."  # the line break after the echo stays


def test_tagging_the_tagged_messages_again_finds_the_same_parts() -> None:
    """`refold` runs `assign` again on messages it already stripped: a reply part that was only an echo (now
    blank) keeps its tag, a blank part never had one, and no new tag is made."""
    messages = [m.Message("u", m.USER, [m.Block(m.TEXT, text="go", key="p0"), m.Block(m.TEXT, text=" ", key="p1")]),
                m.Message("a", m.ASSISTANT, [m.Block(m.TEXT, text="§4§ ", key="p0"),
                                             m.Block(m.TEXT, text="§4§\n§5§ done", key="p1")])]
    known: dict[str, Tag] = {}
    sites, new, counter = tagger.assign(messages, known, 0, words)
    assert [(s.tag.number, s.message_index, s.block.text) for s in sites] == [(1, 0, "go"), (2, 1, ""), (3, 1, "done")]
    again, new, counter = tagger.assign(messages, known, counter, words)
    assert [(s.tag.number, s.message_index, s.block.text) for s in again] == [(1, 0, "go"), (2, 1, ""), (3, 1, "done")]
    assert (new, counter) == ([], 3)


def test_a_second_result_of_an_arc_does_not_hide_the_parts_after_it() -> None:
    messages = [
        m.Message("a1", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={}, key="p0")]),
        m.Message("u1", m.USER, [m.Block(m.TOOL_RESULT, text="one", tool_id="c1", key="p0"),
                                 m.Block(m.TOOL_RESULT, text="two", tool_id="c1", key="p1"),
                                 m.Block(m.TEXT, text="and a remark", key="p2"),
                                 m.Block(m.TOOL_RESULT, text="lost", tool_id="c7", key="p3")]),
    ]
    sites, _, _ = tagger.assign(messages, {}, 0, len)
    assert [s.tag.part_key for s in sites] == ["tool:c1@a1", "u1:p2", "tool:c7@u1"]
    assert sites[0].block is messages[1].blocks[0]  # a tool site's block is its first result
    assert sites[2].tag.tool_name is None  # an orphan without a name stays unnamed
