"""The chunk renderer and the extractive historian, on synthetic histories and on a real Pi session
(pi_large-session.jsonl), plus the golden file of its compartments."""

from __future__ import annotations

import itertools

from historian_helpers import GOLDEN_EXTRACTIVE, NOW, PI_LARGE, PiBuilder, compartments, golden_markdown, load_pi

from magic_context import tokens
from magic_context.history import chunk, extractive, tiers, wording, wrapup
from magic_context.history.validate import validate_historian_output
from magic_context.store.db import open_db
from magic_context.store.raw import message_tokens
from magic_context.wire import model as m
from magic_context.wire import pi


def decoded(builder: PiBuilder) -> tuple[list[chunk.Digest], list]:
    messages = pi.decode(builder.messages)
    for i, msg in enumerate(messages):
        msg.ordinal = i
    return chunk.digest_messages(messages, [message_tokens(x, tokens.estimate) for x in messages], root="/work/syn")


def test_chunk_lines_roles_tools_commits_and_errors() -> None:
    b = PiBuilder().user("fix the failing parser test")
    b.call("read", {"path": "/work/syn/src/parse.py"}, "def parse(): ...", text="Let me look at the parser.")
    b.call("bash", {"command": "cd /work/syn && pytest -q"}, "E   AssertionError: boom\n1 failed", error=True)
    b.call("edit", {"path": "src/parse.py", "oldText": "a", "newText": "b"}, "Successfully replaced text")
    b.call("edit", {"path": "src/parse.py", "oldText": "c", "newText": "d"}, "Successfully replaced text")
    b.call("bash", {"command": "git commit -am 'Fix parser'"}, "[main 4f3e2d1] Fix parser\n 1 file changed")
    b.say("Fixed the parser: the test passes and the fix is committed.")
    b.user("thanks, now the docs")
    digests, spans = decoded(b)
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=50_000)
    lines = c.text.splitlines()
    assert lines[0] == "[0] U: fix the failing parser test"
    assert lines[1].startswith("[1-11] A: commits: 4f3e2d1 / Let me look at the parser. / TC: read(src/parse.py)")
    assert "TC: bash(pytest -q) ✗ E AssertionError: boom" in lines[1]
    assert "TC: edit(src/parse.py) ×2" in lines[1]
    assert "TC: bash(git commit -am 'Fix parser') → 1 file changed" in lines[1]
    assert lines[1].endswith("Fixed the parser: the test passes and the fix is committed.")
    assert lines[2] == "[12] U: thanks, now the docs"
    assert c.start == 0 and c.end == 12 and not c.has_more
    assert (1, 2) in c.arcs and len(c.arcs) == 5
    assert 2 in c.tool_only and 0 not in c.tool_only and 1 not in c.tool_only  # 1 carries prose
    assert c.commit_clusters == 1


def test_extract_commits() -> None:
    assert chunk.extract_commits("[main 45ffe0a] Release v0.8.0\n 48 files changed") == ["45ffe0a"]
    assert chunk.extract_commits("[feature/x (root-commit) 0a1b2c3] init") == ["0a1b2c3"]
    assert chunk.extract_commits("I committed it as a1b2c3d and then cherry-picked 9f8e7d6c5b4a") == \
        ["a1b2c3d", "9f8e7d6c5b4a"]
    assert chunk.extract_commits("Merge branch x into y: merged 1234abc") == ["1234abc"]
    assert chunk.extract_commits("Successfully rebased onto 7e8f9a0b; reverted 0c1d2e3") == ["7e8f9a0b", "0c1d2e3"]
    # hex without the commit context, pure numbers and pure words are not commits
    assert chunk.extract_commits("the colour is #b5bd68 and 1234567") == []
    assert chunk.extract_commits("commit deadbeef is fine; commit 2025112") == []
    assert len(chunk.extract_commits(" ".join(f"commit {i}abcdef{i}" for i in range(9)))) == 5


def test_key_arguments() -> None:
    def key(name: str, args: dict) -> tuple[str, str]:
        use = chunk.tool_use(m.Block(m.TOOL_CALL, tool_name=name, input=args), root="/repo")
        return use.key_arg, use.action

    assert key("Read", {"file_path": "/repo/src/a.py", "limit": 20}) == ("src/a.py", "read")
    assert key("Edit", {"file_path": "/elsewhere/b.py", "old_string": "x"}) == ("/elsewhere/b.py", "edit")
    assert key("Bash", {"command": "cd /repo && make test\necho done", "timeout": 5}) == ("make test", "run")
    assert key("Grep", {"pattern": "def main", "path": "src"}) == ("def main in src", "search")
    assert key("WebFetch", {"url": "https://x.org/a", "prompt": "summarise"}) == ("https://x.org/a", "other")
    assert key("mcp__magic-context__ctx_search", {"query": "lease"}) == ("lease", "other")
    assert key("todo", {}) == ("", "other")


def test_chunk_budget_cuts_between_arcs_and_admits_an_oversize_head() -> None:
    assert chunk.chunk_budget() == 32_000
    assert chunk.chunk_budget(16_000) == 8_000 and chunk.chunk_budget(1_000_000) == 50_000
    b = PiBuilder()
    for i in range(30):
        b.user(f"request {i} " + "detail " * 40).call("bash", {"command": f"echo {i}"}, "done " * 20)
    digests, spans = decoded(b)
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=1_000)
    assert c.has_more and c.end < len(digests) - 1
    assert c.tokens <= 1_000
    assert not any(call <= c.end < result for call, result in spans if result is not None)  # arcs whole
    big = PiBuilder().user("go").call("read", {"path": "big.txt"}, "lorem ipsum " * 20_000).say("read it")
    digests, spans = decoded(big)
    c = chunk.build_chunk(digests, spans, start=1, end=3, budget=500)
    assert (c.start, c.end) == (1, 3) and c.tokens < 100  # tool output is summarised, not copied
    c = chunk.build_chunk(digests, spans, start=1, end=3, budget=5)
    assert (c.start, c.end) == (1, 2) and c.oversize and c.has_more  # the leading arc is admitted whole


def test_extractive_output_validates_and_covers_the_chunk() -> None:
    b = PiBuilder()
    for i in range(8):
        b.turn(f"please refactor module {i} to use the new api", f"src/mod{i}.py", padding=12_000)
    b.user("Always run the linter before committing. Don't push to main.")
    b.call("bash", {"command": "git commit -am 'lint'"}, "[main abc1234] lint")
    b.say("Committed as abc1234.")
    digests, spans = decoded(b)
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=50_000)
    lean = extractive.ExtractiveProvider(c, target=150).complete("", "").text  # small compartments
    assert lean == extractive.extractive_output(c, target=150, lean=True)  # deterministic
    text = extractive.extractive_output(c, target=150)
    out = validate_historian_output(text, c.start, c.end, tool_only=c.tool_only, tool_arcs=c.arcs, emergency=True)
    filled = tiers.fill(validate_historian_output(lean, c.start, c.end, tool_only=c.tool_only, tool_arcs=c.arcs,
                                                  emergency=True), c, narrative=False, target=150)
    assert filled == out  # the answer in the model's lean format, completed by code, is the full answer
    comps = out.compartments
    assert comps[0].start == 0 and comps[-1].end == c.end
    assert all(a.end + 1 == b.start for a, b in itertools.pairwise(comps))
    assert len(comps) >= 2
    assert all(x.p1 and x.p2 and x.p3 for x in comps)
    assert any("abc1234" in (x.p4 or "") for x in comps)
    assert {f.content for f in out.facts} == {"Always run the linter before committing.", "Don't push to main."}
    assert comps[-1].importance > comps[0].importance  # a commit and stated rules outrank a single edit


def test_find_rules_only_plain_rules() -> None:
    rules = wording.find_rules
    assert rules("never use tabs in yaml files") == ["Never use tabs in yaml files."]
    assert rules("ok, use uv for python packaging. thanks") == ["Use uv for python packaging."]
    assert rules("my dude, invalid themes must NEVER explode") == ["Invalid themes must NEVER explode."]
    assert rules("can you always check this?") == []  # a question is no rule
    assert rules("what's footer using? should be dimmer, don't modify the theme") == []  # a task, mid-sentence
    assert rules("that should never happen") == []  # no subject
    assert rules("use the dark theme") == []


def test_wrapup_of_a_real_session() -> None:
    conn = open_db()
    pk, messages, cwd = load_pi(conn)
    result = wrapup.wrapup(conn, pk, keep=20, provider="extractive", now_ms=NOW)
    assert result.disposition == wrapup.COMPLETED and result.providers == ["extractive"]
    rows = compartments(conn, pk)
    assert rows[0]["start_ordinal"] == 0
    for a, b in itertools.pairwise(rows):
        assert b["start_ordinal"] == a["end_ordinal"] + 1
    last = rows[-1]["end_ordinal"]
    assert len(messages) - 1 - last >= 20  # the kept tail
    assert len(messages) - 1 - last <= 25  # …and little more (tool arcs kept whole)
    assert all(r["p1"] and r["p2"] and r["p3"] and r["title"] for r in rows)
    assert all(r["start_message_id"] and r["end_message_id"] and r["start_time"] for r in rows)
    # at least 90% of the files touched in the folded part are named in their compartment's p1 or p4
    touched: dict[str, int] = {}
    for index, msg in enumerate(messages[: last + 1]):
        for block in msg.blocks:
            if block.kind == m.TOOL_CALL and isinstance(block.input, dict) and isinstance(block.input.get("path"), str):
                touched.setdefault(chunk.tool_use(block, cwd).path, index)
    assert len(touched) >= 20
    found = 0
    for path, ordinal in touched.items():
        row = next(r for r in rows if r["start_ordinal"] <= ordinal <= r["end_ordinal"])
        found += path in row["p1"] or path in row["p4"]
    assert found / len(touched) >= 0.9
    # a second wrapup has nothing left to do
    again = wrapup.wrapup(conn, pk, keep=20, provider="extractive", now_ms=NOW)
    assert again.disposition == wrapup.NOTHING_TO_COMPACT and "keeping 20" in again.reason
    conn.close()


def test_golden_extractive_compartments() -> None:
    """Regenerate with `python tests/golden/make_extractive_golden.py` after deliberate changes, then READ it."""
    conn = open_db()
    pk, _, _ = load_pi(conn)
    wrapup.wrapup(conn, pk, keep=20, provider="extractive", now_ms=NOW)
    text = golden_markdown(conn, pk, PI_LARGE.name)
    conn.close()
    assert text == GOLDEN_EXTRACTIVE.read_text(encoding="utf-8"), \
        "extractive output changed: run `python tests/golden/make_extractive_golden.py` and review the diff"


def test_finding_drops_the_next_step_announced_at_the_end() -> None:
    finding = wording.finding
    assert finding("It's not exported as a type. Let me fix by using the inline type:") == \
        "It's not exported as a type."
    assert finding("The fix works: the config loads once. Now let me run the full suite.") == \
        "The fix works: the config loads once."
    assert finding("All 12 tests pass. Next, I'll update the docs. Then let me commit:") == "All 12 tests pass."
    assert finding("I found it. The key is stale when the parent is saved later.") == \
        "I found it. The key is stale when the parent is saved later."  # nothing announced: unchanged
    assert finding("Let me look at the file.") == ""  # it only announces
    assert finding("Great, I will do that. The cache uses the name.") == \
        "Great, I will do that. The cache uses the name."  # only a trailing announcement goes


def theme_fix() -> PiBuilder:
    b = PiBuilder().user("why does the build fail on the theme types?")
    b.call("read", {"path": "/work/syn/src/theme.ts"}, "type ThemeBg = ...", text="Let me look at the theme module.")
    b.call("bash", {"command": "cd /work/syn && npx tsc --noEmit"},
           "error TS2305: Module has no exported member 'ThemeBg'", error=True,
           text="It's not exported as a type. Let me fix by using the inline type:")
    b.call("edit", {"path": "src/theme.ts", "oldText": "ThemeBg", "newText": "string"}, "Successfully replaced text")
    return b.say("Now let me run the type check again:")


def test_closing_words_keep_the_finding_before_an_announced_next_step() -> None:
    # the last two texts announce a next step; before, the whole of each was skipped and the closing words were
    # the first lead-in ("Let me look at the theme module."); now the finding before the announcement is kept
    digests, spans = decoded(theme_fix())
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=50_000)
    comp = validate_historian_output(extractive.extractive_output(c), 0, 7, tool_only=c.tool_only, tool_arcs=c.arcs,
                                     emergency=True).compartments[0]
    assert comp.p1 == ('[0-7] U: "why does the build fail on the theme types?" → Edited src/theme.ts; ran '
                       "`npx tsc --noEmit` ✗ error TS2305: Module has no exported member 'ThemeBg' → "
                       'A: "It\'s not exported as a type."')
    assert comp.p2 == ('U: "why does the build fail on the theme types?". Edited src/theme.ts. '
                       "Outcome: It's not exported as a type.")


RULE = "─" * 85
CRASH_PASTE = "\n".join([
    "i switched the palette while you were building and the whole thing crashed, that must never happen.",
    "",
    " ⠼ Building... (esc to interrupt)                                                    ",
    "",
    RULE,
    "  solarized                       (current)",
    "→ gruvbox",
    "  monokai",
    RULE,
    "~/code/termapp",
    "↑1.2k ↓40k R1203k W88k 12.41 61.0%                                   some-model-name",
    "/home/dev/code/termapp/src/palette/load.ts:88",
    "        throw new TypeError(`Unknown swatch: ${name}`);",
    "        ^",
    "",
    "TypeError: Unknown swatch: mutedTeal",
    "    at resolveSwatch (/home/dev/code/termapp/src/palette/load.ts:88:15)",
    "    at buildPalette (/home/dev/code/termapp/src/palette/load.ts:120:22)",
    "    at PaletteList.onPreview (/home/dev/code/termapp/src/ui/palette-list.ts:41:7)",
    "",
    "Node.js v22.1.0",
])


def test_chrome_lines() -> None:
    assert wording.chrome(RULE) and wording.chrome("╭" + "─" * 30 + "╮")
    assert wording.chrome(" ⠼ Building... (esc to interrupt)   ")  # a spinner's status line
    assert wording.chrome("████████████░░░░░░░░ 61%")  # a progress bar
    assert wording.chrome("\x1b[2m" + "─" * 40 + "\x1b[0m")  # a coloured rule
    assert not wording.chrome("│ name  │ value │")  # a table row keeps its words
    assert not wording.chrome("→ gruvbox") and not wording.chrome("TypeError: Unknown swatch: mutedTeal")
    assert not wording.chrome("") and not wording.chrome("   ")


def test_quote_of_a_pasted_crash_keeps_its_error_line_within_the_budget() -> None:
    old = chunk.clip(" ".join(CRASH_PASTE.split()), extractive.PROMPT_CHARS)  # the quote before: chrome, no error
    assert "─" * 20 in old and "mutedTeal" not in old
    for limit in (extractive.PROMPT_CHARS, 160):
        quoted = wording.quote(CRASH_PASTE, limit)
        assert len(quoted) <= limit + 1  # the budget of a plain clip (`…` included)
        assert quoted.startswith("i switched the palette while you were building")  # the person's words first
        assert quoted.endswith("… TypeError: Unknown swatch: mutedTeal")  # the exception, not the `throw` line
        assert "─" not in quoted and "⠼" not in quoted and "Building..." not in quoted
    trace = "\n".join(["the importer dies on the sample file:", "Traceback (most recent call last):",
                       *[f'  File "/srv/app/step{i}.py", line {i}, in run' for i in range(12)],
                       "KeyError: 'checksum'"])
    assert wording.quote(trace, 160).endswith("… KeyError: 'checksum'")  # Python: the exception, not the header


def test_quote_leaves_ordinary_messages_as_they_were() -> None:
    request = "please refactor the loader so that it reads the palette once.\n\nthen run the tests " * 6
    assert wording.quote(request, 300) == chunk.clip(" ".join(request.split()), 300)  # no error line: a plain clip
    short = "fix the TypeError in src/load.ts"
    assert wording.quote(short, 300) == short  # fits: verbatim
    assert wording.quote("see '/tmp/shot.png' please", 300) == "see [image] please"
    assert wording.quote(RULE, 300) == chunk.clip(RULE, 300)  # nothing but chrome: kept as it is
    early = "TypeError: Unknown swatch: mutedTeal\n" + "    at resolveSwatch (src/palette/load.ts:88:15)\n" * 12
    assert wording.quote(early, 160) == chunk.clip(" ".join(early.split()), 160)  # the error is in the head already
    cut = "npx tsx src/cli.ts -c\nnode:fs:443\nError: ENOENT: no such file or directory, open '/srv/x/package.json'"
    assert wording.quote(cut, 80) == chunk.clip(" ".join(cut.split()), 80)  # the head shows the error's opening
    assert wording.quote(cut, 60) == "npx tsx src/cli.ts -c node:fs:443 Error: ENOENT: no…"  # too little: moved, once


def test_episode_line_quotes_a_pasted_crash_by_its_error() -> None:
    b = PiBuilder().user(CRASH_PASTE)
    b.call("edit", {"path": "src/palette/load.ts", "oldText": "a", "newText": "b"}, "Successfully replaced text")
    b.say("The palette loader now falls back to the default swatch instead of throwing.")
    digests, spans = decoded(b)
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=50_000)
    comp = validate_historian_output(extractive.extractive_output(c), c.start, c.end, tool_only=c.tool_only,
                                     tool_arcs=c.arcs, emergency=True).compartments[0]
    assert "TypeError: Unknown swatch: mutedTeal" in comp.p1 and "TypeError: Unknown swatch: mutedTeal" in comp.p2
    assert "─" not in comp.p1 and "─" not in comp.p2
