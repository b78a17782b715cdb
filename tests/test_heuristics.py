"""Every automatic drop lane (transform/heuristics.py) on hand-built sessions: which tags each drops,
and that none of the newest `protected_tags` is ever dropped by any lane (by hand and as a property)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from magic_context.transform import heuristics, tagger
from magic_context.transform.heuristics import Drop
from magic_context.transform.tags import DROPPED, MODE_EDIT_MARKER, MODE_REMOVED
from magic_context.wire import model as m

_ids = itertools.count()


def tool(name: str, output: str | None = "out", **args: object) -> tuple:
    """One tool arc: an assistant call and (unless output is None) its result."""
    return ("tool", name, args, output)


def say(text: str, *, think: bool = False) -> tuple:
    return ("say", text, think)


def build(*steps: tuple) -> list[m.Message]:
    """A session: a user message, then each step as an assistant turn (call ids are `c<step>`)."""
    out = [m.Message("u0", m.USER, [m.Block(m.TEXT, text="start", key="p0")])]
    for i, step in enumerate(steps):
        if step[0] == "tool":
            _, name, args, output = step
            out.append(m.Message(f"a{i}", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id=f"c{i}", tool_name=name,
                                                                input=dict(args), key="p0")]))
            if output is not None:
                out.append(m.Message(f"r{i}", m.TOOL, [m.Block(m.TOOL_RESULT, text=output, tool_id=f"c{i}",
                                                               tool_name=name, key="p0")]))
        else:
            _, text, think = step
            blocks = [m.Block(m.REASONING, text="hmm", meta={"signature": "s"}, key="r")] if think else []
            out.append(m.Message(f"a{i}", m.ASSISTANT, [*blocks, m.Block(m.TEXT, text=text, key="p0")]))
    return out


def tag_sites(messages: list[m.Message]) -> list[tagger.Site]:
    sites, _new, _counter = tagger.assign(messages, {}, 0, len)
    return sites


def protected_from(sites: list[tagger.Site], count: int) -> int:
    """The oldest protected tag number, exactly as the pass computes it."""
    active = sorted(s.tag.number for s in sites if not s.tag.dropped)
    return active[-count] if len(active) >= count else 0


def number_of(sites: list[tagger.Site], call_id: str) -> int:
    return next(s.tag.number for s in sites if s.call is not None and s.call[1].tool_id == call_id)


def dropped(drops: list[Drop], sites: list[tagger.Site]) -> set[str]:
    """Call ids of the dropped tool tags (text tags would show as 'text:<n>')."""
    out = set()
    for drop in drops:
        site = drop.site
        out.add(site.call[1].tool_id if site.call is not None else f"text:{site.tag.number}")
    return out


# --- age -------------------------------------------------------------------------------------------

def test_age_drops_tool_outputs_at_least_max_age_tags_old() -> None:
    sites = tag_sites(build(*(tool("read", path=f"f{i}.py") for i in range(10))))
    numbers = {s.call[1].tool_id: s.tag.number for s in sites if s.call}
    newest = max(numbers.values())
    assert newest == 11  # the user's text is tag 1, c0..c9 are 2..11
    drops = heuristics.age_drops(sites, newest, max_age=6, protected_from=newest)
    # ages: c0 = 9 … c4 = 5; exactly max_age (c3, age 6) goes, one short (c4, age 5) stays
    assert dropped(drops, sites) == {"c0", "c1", "c2", "c3"}
    assert {d.mode for d in drops} == {MODE_REMOVED} and {d.lane for d in drops} == {"age"}


def test_age_keeps_the_oldest_protected_tag_and_every_newer_one() -> None:
    sites = tag_sites(build(*(tool("read", path=f"f{i}.py") for i in range(10))))
    start = protected_from(sites, 4)  # tags 8..11 protected: c6..c9
    assert start == number_of(sites, "c6")
    drops = heuristics.age_drops(sites, 11, max_age=1, protected_from=start)
    assert dropped(drops, sites) == {"c0", "c1", "c2", "c3", "c4", "c5"}


def test_age_skips_text_unanswered_calls_and_dropped_tags() -> None:
    messages = build(tool("read", path="a"), tool("bash", output=None, cmd="sleep"), say("x" * 50),
                     tool("read", path="b"), tool("read", path="c"))
    sites = tag_sites(messages)
    next(s for s in sites if s.call and s.call[1].tool_id == "c3").tag.status = DROPPED
    drops = heuristics.age_drops(sites, 99, max_age=1, protected_from=99)
    assert dropped(drops, sites) == {"c0", "c4"}


# --- duplicate -------------------------------------------------------------------------------------

def test_duplicate_keeps_only_the_newest_identical_call() -> None:
    messages = build(
        tool("read", path="a.py", limit=10),       # c0: same as c2 and c5 (argument order does not matter)
        tool("read", path="b.py"),                 # c1: unique
        tool("mcp__fs__read", limit=10, path="a.py"),  # c2: same tool once the MCP prefix is gone
        tool("grep", path="a.py"),                 # c3: another tool, same arguments: not a duplicate
        tool("read", path="a.py", limit=11),       # c4: other arguments
        tool("read", limit=10, path="a.py"),       # c5: the newest of its kind: stays
        say("done"),
    )
    sites = tag_sites(messages)
    drops = heuristics.duplicate_drops(sites, protected_from=99)
    assert dropped(drops, sites) == {"c0", "c2"}
    assert {d.lane for d in drops} == {"duplicate"}


def test_duplicate_needs_the_same_tool_not_just_the_same_arguments() -> None:
    sites = tag_sites(build(tool("read", path="a.py"), tool("grep", path="a.py"), tool("Read", path="a.py"),
                            say("done")))
    drops = heuristics.duplicate_drops(sites, protected_from=99)
    assert dropped(drops, sites) == {"c0"}  # "Read" is "read" lower-cased; grep is another tool
    assert [(d.mode, d.lane) for d in drops] == [(MODE_REMOVED, "duplicate")]


def test_duplicate_compares_unserializable_arguments_by_their_repr() -> None:
    """Inputs JSON cannot write (a set, bytes, mixed key types under sort_keys) still compare by value."""
    sites = tag_sites(build(tool("read", path=b"a"), tool("read", path=b"b"), tool("read", path={1, 2}),
                            tool("read", path=b"a"), say("done")))
    assert dropped(heuristics.duplicate_drops(sites, protected_from=99), sites) == {"c0"}
    mixed = tag_sites(build(tool("read", path={1: "x", "k": 2}), tool("read", path={1: "y", "k": 2}), say("end")))
    assert heuristics.duplicate_drops(mixed, protected_from=99) == []


def test_duplicate_never_drops_a_protected_copy() -> None:
    sites = tag_sites(build(*(tool("read", path="a.py") for _ in range(6))))
    start = protected_from(sites, 3)  # c3..c5 protected
    assert dropped(heuristics.duplicate_drops(sites, start), sites) == {"c0", "c1", "c2"}


# --- stale ctx_reduce ------------------------------------------------------------------------------

def test_stale_reduce_keeps_the_newest_three_calls() -> None:
    names = ["ctx_reduce", "read", "mcp__magic-context__ctx_reduce", "ctx_reduce", "bash", "ctx_reduce",
             "ctx_reduce"]
    sites = tag_sites(build(*(tool(name, drop=f"{i}") for i, name in enumerate(names)), say("end")))
    drops = heuristics.stale_reduce_drops(sites, protected_from=99)
    assert dropped(drops, sites) == {"c0", "c2"}  # five reduce calls: the two oldest go
    assert {d.lane for d in drops} == {"stale_reduce"}


def test_stale_reduce_respects_the_protected_window() -> None:
    sites = tag_sites(build(*(tool("ctx_reduce", drop=str(i)) for i in range(8)), say("a"), say("b"), say("c")))
    start = number_of(sites, "c2")  # c2 is the oldest protected tag
    assert dropped(heuristics.stale_reduce_drops(sites, start), sites) == {"c0", "c1"}


# --- smart drops: superseded todo, meta tools, superseded edits ----------------------------------

def test_smart_drops_superseded_todos_meta_tools_and_older_edits() -> None:
    messages = build(
        tool("todowrite", todos="1"),             # c0 superseded
        tool("edit", filePath="a.py", new="1"),   # c1 superseded by c6 → edit marker
        tool("bash_status", id="x"),              # c2 meta tool
        tool("todo_write", todos="2"),            # c3 superseded
        tool("edit", filePath="b.py"),            # c4 newest edit of b.py: stays
        tool("todowrite", todos="3"),             # c5 newest todo: stays
        tool("write", file_path="a.py"),          # c6 newest edit of a.py (another edit tool, another key)
        tool("read", path="a.py"),                # c7 not a smart-drop target
        tool("bash_kill", id="x"),                # c8 meta tool
    )
    sites = tag_sites(messages)
    drops = heuristics.smart_drops(sites, protected_from=99)
    lanes = {d.site.call[1].tool_id: (d.lane, d.mode) for d in drops}
    assert len(lanes) == len(drops)  # no tag claimed twice
    assert lanes == {
        "c0": ("superseded_todo", MODE_REMOVED),
        "c1": ("superseded_edit", MODE_EDIT_MARKER),
        "c2": ("meta_tool", MODE_REMOVED),
        "c3": ("superseded_todo", MODE_REMOVED),
        "c8": ("meta_tool", MODE_REMOVED),
    }


def test_superseded_edits_are_matched_by_any_path_key_and_only_by_path() -> None:
    messages = build(
        tool("edit", path="a.py"), tool("patch", filename="b.py"), tool("edit", path="c.py"),  # c0 c1 c2
        tool("multiedit", filename="a.py"), tool("apply_patch", path="b.py"),                 # c3 c4
        tool("edit", text="no path at all"), tool("edit", text="no path at all"),              # c5 c6
        tool("edit", path=["a.py"]), tool("edit", path=["a.py"]),                              # c7 c8: not a str
    )
    sites = tag_sites(messages)
    next(s for s in sites if s.call and s.call[1].tool_id == "c2").call[1].input = "c.py"  # not a dict
    drops = heuristics.smart_drops(sites, protected_from=99)
    assert {d.site.call[1].tool_id: d.mode for d in drops} == {"c0": MODE_EDIT_MARKER, "c1": MODE_EDIT_MARKER}


def test_smart_drops_leave_the_protected_window_alone() -> None:
    messages = build(tool("todowrite", todos="1"), tool("todowrite", todos="2"), tool("bash_status"),
                     tool("edit", path="a.py"), tool("edit", path="a.py"), tool("todowrite", todos="3"))
    sites = tag_sites(messages)
    start = number_of(sites, "c1")  # everything from the second todo on is protected
    drops = heuristics.smart_drops(sites, start)
    assert dropped(drops, sites) == {"c0"}


# --- old reasoning ---------------------------------------------------------------------------------

def _reasoning_session() -> list[m.Message]:
    return build(say("one", think=True), tool("read", path="a"), say("two", think=True), say("three"),
                 say("four", think=True), say("five", think=True))


def test_old_reasoning_picks_old_unprotected_turns_that_still_hold_reasoning() -> None:
    messages = _reasoning_session()
    sites = tag_sites(messages)
    # tags: u0=1, a0=2, c1=3, a2=4, a3=5, a4=6, a5=7
    got = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=7, max_age=2, protected_from=6)
    assert got == {"a0", "a2"}  # a3 has none; a4 (tag 6) is protected; a5 is the last assistant turn
    got = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=7, max_age=1, protected_from=6)
    assert got == {"a0", "a2"}  # a4 is old enough now, but its tag is the oldest protected one
    assert "a4" in heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=7, max_age=1, protected_from=7)
    got = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=7, max_age=3, protected_from=99)
    assert got == {"a0", "a2"}  # a2 is exactly max_age old (7 - 4 = 3): old enough
    got = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=7, max_age=4, protected_from=99)
    assert got == {"a0"}
    got = heuristics.old_reasoning(messages, sites, m.OPENCODE, newest=7, max_age=1, protected_from=99)
    assert got == {"a0", "a2", "a4"}


def test_old_reasoning_never_takes_the_last_assistant_turn_even_when_old() -> None:
    messages = build(say("one", think=True), say("two", think=True))
    messages += [m.Message(f"u{i}", m.USER, [m.Block(m.TEXT, text=f"more {i}", key="p0")]) for i in range(1, 6)]
    sites = tag_sites(messages)  # u0=1, a0=2, a1=3, then users 4..8
    got = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=8, max_age=1, protected_from=99)
    assert got == {"a0"}  # a1 is old and unprotected, but it is the last assistant turn
    users_only = [msg for msg in messages if msg.role == m.USER]
    assert heuristics.old_reasoning(users_only, tag_sites(users_only), m.ANTHROPIC, newest=6, max_age=1,
                                    protected_from=99) == set()


def test_old_reasoning_ages_a_turn_by_its_newest_tag() -> None:
    """A turn's tags need not rise in block order (tags kept from earlier passes): the newest one counts."""
    turn = m.Message("a0", m.ASSISTANT, [m.Block(m.REASONING, text="hmm", meta={"signature": "s"}, key="r"),
                                         m.Block(m.TEXT, text="first", key="p0"),
                                         m.Block(m.TEXT, text="second", key="p1")])
    messages = [m.Message("u0", m.USER, [m.Block(m.TEXT, text="go", key="p0")]), turn,
                m.Message("a9", m.ASSISTANT, [m.Block(m.TEXT, text="end", key="p0")])]
    sites = tag_sites(messages)
    first, second = (s for s in sites if s.message_index == 1)
    first.tag.number, second.tag.number = 7, 3
    assert heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=8, max_age=2, protected_from=99) == set()
    first.tag.number = 5
    assert heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=8, max_age=2, protected_from=99) == {"a0"}


def test_old_reasoning_only_where_the_provider_allows_removing_it() -> None:
    messages = _reasoning_session()
    sites = tag_sites(messages)
    for harness in (m.OPENAI, m.OPENAI_RESPONSES):
        assert heuristics.old_reasoning(messages, sites, harness, newest=7, max_age=1, protected_from=99) == set()
    assert heuristics.old_reasoning(messages, sites, m.PI, newest=7, max_age=1, protected_from=99) == {"a0", "a2",
                                                                                                        "a4"}


# --- dedupe and names ------------------------------------------------------------------------------

def test_dedupe_keeps_the_first_lane_and_skips_dropped_tags() -> None:
    sites = tag_sites(build(tool("read", path="a"), tool("read", path="a"), tool("ctx_reduce")))
    first, second = sites[1], sites[2]
    lanes = [Drop(first, MODE_REMOVED, "ctx_reduce"), Drop(first, MODE_EDIT_MARKER, "age"),
             Drop(second, MODE_REMOVED, "duplicate")]
    assert [(d.site.tag.number, d.lane) for d in heuristics.dedupe(lanes)] == [(2, "ctx_reduce"), (3, "duplicate")]
    second.tag.status = DROPPED
    assert [d.lane for d in heuristics.dedupe(lanes)] == ["ctx_reduce"]


def test_base_name() -> None:
    assert heuristics.base_name("mcp__magic-context__ctx_reduce") == "ctx_reduce"
    assert heuristics.base_name("TodoWrite") == "todowrite"
    assert heuristics.base_name(None) == ""


# --- the protected window, for every lane ----------------------------------------------------------

def all_lanes(messages: list[m.Message], sites: list[tagger.Site], start: int, max_age: int) -> tuple[list[Drop],
                                                                                                      set[str]]:
    newest = max((s.tag.number for s in sites), default=0)
    drops = [*heuristics.duplicate_drops(sites, start), *heuristics.stale_reduce_drops(sites, start),
             *heuristics.age_drops(sites, newest, max_age, start), *heuristics.smart_drops(sites, start)]
    reasoning = heuristics.old_reasoning(messages, sites, m.ANTHROPIC, newest=newest, max_age=max_age,
                                         protected_from=start)
    return drops, reasoning


def test_no_lane_drops_the_oldest_protected_tag_when_every_lane_wants_it() -> None:
    """The tag at `protected_from` is old, a duplicate, a stale reduce, a superseded todo and edit."""
    for name, args in [("read", {"path": "a"}), ("ctx_reduce", {"drop": "1"}), ("todowrite", {"todos": "x"}),
                       ("edit", {"path": "a.py"}), ("bash_status", {})]:
        steps = [tool(name, **args) for _ in range(6)]
        messages = build(*steps)
        sites = tag_sites(messages)
        start = number_of(sites, "c0")  # the very first call is the oldest protected tag
        drops, _ = all_lanes(messages, sites, start, max_age=1)
        assert drops == [], name
        start = number_of(sites, "c1")
        drops, _ = all_lanes(messages, sites, start, max_age=1)
        assert dropped(drops, sites) == {"c0"}, name


STEPS = st.one_of(
    st.builds(lambda n, p, out: tool(n, output=out, path=p),
              st.sampled_from(["read", "bash", "edit", "write", "ctx_reduce", "mcp__mc__ctx_reduce", "todowrite",
                               "bash_status", "bash_kill", "grep"]),
              st.sampled_from(["a.py", "b.py", "c.py"]), st.sampled_from(["out", "longer output", None])),
    st.builds(say, st.sampled_from(["ok", "done", "x" * 30]), think=st.booleans()),
)


@settings(max_examples=examples(300), deadline=None)
@given(steps=st.lists(STEPS, min_size=1, max_size=40), count=st.integers(1, 30), max_age=st.integers(1, 40),
       predropped=st.sets(st.integers(0, 60), max_size=8))
def test_property_no_lane_ever_touches_the_newest_protected_tags(steps, count, max_age, predropped) -> None:
    messages = build(*steps)
    sites = tag_sites(messages)
    for site in sites:
        if site.tag.number in predropped:
            site.tag.status = DROPPED
    start = protected_from(sites, count)
    active = sorted(s.tag.number for s in sites if not s.tag.dropped)
    protected = set(active[-count:])
    drops, reasoning = all_lanes(messages, sites, start, max_age)
    for drop in drops:
        assert drop.site.tag.number not in protected, (drop.lane, drop.site.tag.number, sorted(protected))
        assert not drop.site.tag.dropped and drop.site.tag.kind == "tool" and drop.site.results
    tag_of = {}
    for site in sites:
        tag_of[site.message_index] = max(tag_of.get(site.message_index, 0), site.tag.number)
    for index, message in enumerate(messages):
        if message.id in reasoning:
            assert tag_of[index] not in protected
    kept = {d.site.tag.number for d in heuristics.dedupe(drops)}
    assert kept == {d.site.tag.number for d in drops}  # dedupe loses no tag, only repeated claims


# --- queued ctx_reduce drops land on the next busting pass ----------------------------------------

def _serve(native: list, now: int) -> tuple[list, dict]:
    import orjson

    from magic_context.transform import pipeline, protocol

    doc = {"messages": native, "harness": m.ANTHROPIC, "session_id": "queued", "project_dir": "/tmp", "now": now,
           "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "context_limit": 200_000}}
    result = pipeline.run(protocol.read_input(protocol.parse_document(orjson.dumps(doc)), {}))
    return orjson.loads(orjson.dumps(result.document["messages"])), result.report


def test_queued_reduce_drops_wait_for_the_next_busting_pass() -> None:
    from magic_context.store import db
    from magic_context.tools.reduce import find_session, queue_drops
    from magic_context.transform.protocol import CODECS

    steps = [tool("read", output=f"OUTPUT-{i:02d} " + "x" * 40, path=f"f{i}.py") for i in range(30)]
    native = CODECS[m.ANTHROPIC].encode(build(*steps))
    now = 1_700_000_000_000
    _out, first = _serve(native, now)
    assert first["pass"] != "defer"  # first render busts
    conn = db.open_db()
    try:
        pk = find_session(conn, "queued", m.ANTHROPIC)
        queue_drops(conn, pk, "3-5", protected_tags=20, now_ms=now)
        conn.commit()
    finally:
        conn.close()

    def status() -> tuple[dict[int, str], list[int]]:
        conn = db.open_db()
        try:
            tags = dict(conn.execute("SELECT tag_number, status FROM tags WHERE session_pk = ?", (pk,)).fetchall())
            queued = [r[0] for r in conn.execute("SELECT tag_number FROM pending_ops WHERE session_pk = ? "
                                                 "ORDER BY tag_number", (pk,))]
            return tags, queued
        finally:
            conn.close()

    out, report = _serve(native, now + 1_000)  # cache warm, far below the threshold: defer
    assert report["pass"] == "defer"
    tags, queued = status()
    assert [tags[n] for n in (3, 4, 5)] == ["active"] * 3 and queued == [3, 4, 5]
    assert "OUTPUT-01" in str(out)  # tag 3 is c1's output (tag 1 the user's text, tag 2 c0)

    out, report = _serve(native, now + 10 * 60_000)  # the TTL expired: this pass busts, the queue lands
    assert report["pass"] != "defer"
    tags, queued = status()
    assert [tags[n] for n in (2, 3, 4, 5, 6)] == ["active", "dropped", "dropped", "dropped", "active"]
    assert queued == []
    text = str(out)
    assert "OUTPUT-00" in text and "OUTPUT-04" in text
    assert not any(f"OUTPUT-0{i}" in text for i in (1, 2, 3))
