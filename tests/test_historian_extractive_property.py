"""Property: the extractive historian answers validly for ANY chunk — it is the offline default and the
last fallback of every chain, so an invalid answer would stall the historian for good.

Histories are generated as canonical messages: prompts rare or absent (long autonomous runs), tool arcs
answered in a tool message, in a user message or in the call's own message, parallel calls, open calls,
orphan results, reasoning, empty and awkward texts, holes in the ordinals; chunks start anywhere and are
cut by any budget; compartments are sized by any target."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magic_context import tokens
from magic_context.history import chunk, extractive, tiers, wording
from magic_context.history.validate import ValidatedOutput, validate_historian_output
from magic_context.store.raw import message_tokens
from magic_context.wire import model as m

TEXTS = [
    "", " ", "\n\n", "ok", "continue", "/compact", "Let me look at the `pre_save` method of Field:",
    "```python\nprint('only code')\n```", "## Heading only", "; ; ; ; ;", "…", "Perfect!",
    "Always run the linter before committing. Don't push to main.", 'quotes " & <tags> </p1> <compartment start="1">',
    "THOUGHT: the test fails because the cache key is wrong. I will fix related.py and rerun the tests.",
    "fix the failing parser test in src/parse.py", "ümlaut ✓ 日本語 \u200b", "&amp; &#65; &lt;/output&gt;",
    "word " * 400, "Ran it.\n- item one\n- item two\n| a | b |",
    "it crashed:\n ⠇ Working...\n" + "─" * 85 + "\n" + "─" * 85 + "\nError: boom\n    at f (a.ts:1:1)\n" * 8,
]
COMMANDS = ["pytest -q", "cd /testbed && python reproduce.py", "git commit -am 'fix' ", "sed -i 's/a/b/' x.py",
            "grep -rn foo src", "", "echo done", "cat <<'EOF' > /tmp/t.py\nprint(1)\nEOF"]
OUTPUTS = ["", "ok", "[main 4f3e2d1] fix\n 1 file changed", "Traceback (most recent call last):\nError: boom",
           "lorem ipsum " * 300, "(no output)"]

text = st.sampled_from(TEXTS)


@st.composite
def tool_call(draw: st.DrawFn, n: int) -> m.Block:
    name = draw(st.sampled_from(["bash", "read", "edit", "write", "grep", "str_replace_editor", "todo", "Task"]))
    args = draw(st.sampled_from([{"command": c} for c in COMMANDS] + [{"path": "src/a.py"}, {"file_path": "/x/b.ts"},
                                 {"pattern": "def main", "path": "src"}, {}, {"query": 3}, "not a dict"]))
    return m.Block(m.TOOL_CALL, tool_id=f"c{n}", tool_name=name, input=args)


def result(call: m.Block, draw: st.DrawFn) -> m.Block:
    return m.Block(m.TOOL_RESULT, text=draw(st.sampled_from(OUTPUTS)), tool_id=call.tool_id,
                   tool_name=call.tool_name, is_error=draw(st.booleans()))


@st.composite
def history(draw: st.DrawFn) -> list[m.Message]:
    """Canonical messages with ordinals set (holes allowed)."""
    out: list[m.Message] = []
    ids = itertools.count()

    def add(role: str, blocks: list[m.Block], **kw: object) -> None:
        out.append(m.Message(f"m{len(out)}", role, blocks, **kw))

    if draw(st.booleans()):
        add(m.SYSTEM, [m.Block(m.TEXT, text="You are an agent.")])
    if draw(st.integers(0, 3)):
        add(m.USER, [m.Block(m.TEXT, text=draw(text))])
    prompt_rate = draw(st.sampled_from([0, 0, 2, 10]))  # percent: absent, absent, rare, common
    for _ in range(draw(st.integers(1, 60))):
        roll = draw(st.integers(0, 99))
        if roll < prompt_rate:
            kind = draw(st.sampled_from(["plain", "synthetic", "summary", "command"]))
            block = m.Block(m.TEXT, text=draw(text), synthetic=kind == "synthetic",
                            meta={"command": "ls"} if kind == "command" else None)
            add(m.USER, [block], compaction=m.COMPACTION_SUMMARY if kind == "summary" else None)
            continue
        blocks: list[m.Block] = []
        if draw(st.integers(0, 4)) == 0:
            blocks.append(m.Block(m.REASONING, text=draw(text), meta={"signature": "s"}))
        if draw(st.booleans()):
            blocks.append(m.Block(m.TEXT, text=draw(text)))
        calls = [draw(tool_call(next(ids))) for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3])))]
        style = draw(st.sampled_from(["tool", "tool", "user", "inline", "open", "late"]))
        if style == "inline":
            blocks += [b for c in calls for b in (c, result(c, draw))]
        else:
            blocks += calls
        add(m.ASSISTANT, blocks)
        answered = [c for c in calls if style != "open" or draw(st.booleans())]
        if style in ("tool", "open"):
            for c in answered:
                add(m.TOOL, [result(c, draw)])
        elif style == "user" and answered:
            add(m.USER, [result(c, draw) for c in answered])
        elif style == "late" and answered:  # answered after another assistant message
            add(m.ASSISTANT, [m.Block(m.TEXT, text=draw(text))])
            add(m.TOOL, [result(c, draw) for c in answered])
        if draw(st.integers(0, 30)) == 0:
            add(m.TOOL, [m.Block(m.TOOL_RESULT, text="orphan", tool_id="gone", tool_name="bash")])
    ordinal = draw(st.integers(0, 3))
    for msg in out:
        msg.ordinal = ordinal
        msg.created_at = 1_700_000_000_000 + ordinal * 1000
        ordinal += 1 + (draw(st.integers(0, 20)) == 0)  # an occasional hole
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history(), st.data())
def test_extractive_output_validates_for_any_chunk(messages: list[m.Message], data: st.DataObject) -> None:
    first = data.draw(st.integers(0, len(messages) - 1), label="first")
    tail = messages[first:]  # the runner decodes the unsummarized tail only: earlier calls are gone
    digests, spans = chunk.digest_messages(tail, [message_tokens(x, tokens.estimate) for x in tail])
    start = max(0, tail[0].ordinal - data.draw(st.integers(0, 1), label="hole before"))  # ordinals are ≥ 0
    end = data.draw(st.sampled_from([x.ordinal for x in tail]), label="end")
    budget = data.draw(st.sampled_from([5, 200, 2_000, 50_000]), label="budget")
    target = data.draw(st.sampled_from([20, 150, 1_500, 8_000]), label="target")
    c = chunk.build_chunk(digests, spans, start=start, end=end, budget=budget)
    if c.empty:
        return
    text = extractive.extractive_output(c, target=target)
    extractive.check_output(text, c)  # the detailed answer is valid on its own (no coarse fallback needed)
    provider = extractive.ExtractiveProvider(c, target=target)
    lean = provider.complete("", "").text  # the format a model is asked for: no p1, no p4
    assert lean == extractive.extractive_output(c, target=target, lean=True) and provider.degraded is None
    assert "<p1>" not in lean and "<p4>" not in lean
    for no_discard in (True, False):  # the runner's own call, with and without discard-last
        def check(answer: str, no_discard: bool = no_discard) -> ValidatedOutput:
            return validate_historian_output(answer, c.start, c.end, tool_only=c.tool_only, tool_arcs=c.arcs,
                                             emergency=no_discard, accept_truncated=True)

        out = check(text)
        # code's p1 and p4 for the lean answer are exactly what the extractive historian wrote itself (#13)
        assert tiers.fill(check(lean), c, narrative=False, target=target) == out
        comps = out.compartments
        assert comps[0].start == c.start
        assert all(a.end + 1 == b.start for a, b in itertools.pairwise(comps))
        assert all(x.title and x.p1 for x in comps)
        assert out.next_start > c.start  # progress, always
        if no_discard:
            assert comps[-1].end == c.end and out.next_start == c.end + 1
    coarse = extractive.coarse_output(c, target)
    extractive.check_output(coarse, c)  # the fallback is valid by construction


def test_coarse_fallback_when_the_detailed_answer_fails(monkeypatch) -> None:
    """A detailed answer that fails its own validation (or raises) is replaced by the coarse cut."""
    msgs = [m.Message("a", m.USER, [m.Block(m.TEXT, text="fix the parser")]),
            m.Message("b", m.ASSISTANT, [m.Block(m.TEXT, text="Done: the parser is fixed.")]),
            m.Message("c", m.USER, [m.Block(m.TEXT, text="now update the docs please")]),
            m.Message("d", m.ASSISTANT, [m.Block(m.TEXT, text="Updated the docs.")])]
    for i, msg in enumerate(msgs):
        msg.ordinal = i
    digests, spans = chunk.digest_messages(msgs, [10] * len(msgs))
    c = chunk.build_chunk(digests, spans, start=0, end=3, budget=50_000)
    broken = '<output><compartments><compartment start="0" end="1" title=""><p1>x</p1></compartment>' \
             '</compartments></output>'
    monkeypatch.setattr(extractive, "extractive_output", lambda *_a, **_k: broken)
    provider = extractive.ExtractiveProvider(c)
    answer = provider.complete("", "").text
    assert provider.degraded and "no usable compartments" in provider.degraded
    extractive.check_output(answer, c)

    def explode(*_a: object, **_k: object) -> str:
        raise RuntimeError("bug")

    monkeypatch.setattr(extractive, "extractive_output", explode)
    assert extractive.check_output(provider.complete("", "").text, c) is None
    assert provider.degraded == "RuntimeError: bug"


@given(st.text(alphabet=st.sampled_from(list("ab Error:─⠇█\n\x1b[0m.'/png")), max_size=600), st.integers(20, 400))
@settings(max_examples=300)
def test_quote_stays_within_a_plain_clip_budget(text: str, limit: int) -> None:
    """A quote is never longer than the plain clip it replaced may be (`limit` plus `…`), for any text."""
    quoted = wording.quote(text, limit)
    assert len(quoted) <= limit + 1
    assert "\n" not in quoted
