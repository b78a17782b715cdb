"""Each baseline on a small synthetic session, with a word counter so the figures are hand-checkable.

Tokens: a text of N words counts N; a message adds 4; a tool call counts its JSON arguments
(`{"cmd": "x"}` = 2 words) + 12. So a user message of 100 words is 104 tokens, an assistant tool
call 18, a tool result of N words N + 4.
"""

from __future__ import annotations

from magic_context.replay import baselines as bl
from magic_context.replay.cost import Ledger, pricing
from magic_context.replay.units import TokenCounter
from magic_context.wire import model as m


def _counter() -> TokenCounter:
    return TokenCounter(lambda text: len(text.split()))


def _session(arcs: int, result_words: int) -> list[m.Message]:
    """user(100 words), then `arcs` × [assistant tool call, tool result of `result_words` words]."""
    out = [m.Message("u0", m.USER, [m.Block(m.TEXT, " ".join(["task"] * 100))])]
    for i in range(1, arcs + 1):
        out.append(m.Message(f"a{i}", m.ASSISTANT,
                             [m.Block(m.TOOL_CALL, tool_id=f"c{i}", tool_name="bash", input={"cmd": "x"})]))
        out.append(m.Message(f"t{i}", m.TOOL, [m.Block(m.TOOL_RESULT, " ".join([f"out{i}"] * result_words),
                                                       tool_id=f"c{i}")]))
    return out


def test_raw_serves_everything_even_over_the_window() -> None:
    history = _session(12, 1000)
    served = bl.Baseline("raw", _counter(), 10_000).serve(history)
    assert served.tokens == 104 + 12 * (18 + 1004) == 12_368
    assert not served.compacted and not served.extra


def test_native_compacts_past_85_percent_keeping_a_tail_of_whole_arcs() -> None:
    """Window 10 000: after n arcs the request is 104 + 1022 n tokens.

    n = 8 → 8 280 ≤ 8 500: served whole. n = 9 → 9 302 > 8 500: a summary call reads the request (+200
    prompt tokens) and writes a summary of 1 000 tokens (2 000 capped at 10% of the window), then
    [summary 1 004] + the last arc (1 022 ≤ the 2 000-token tail; two arcs would be 2 044) = 2 026.
    n = 10 extends that prefix: no bust.
    """
    counter = _counter()
    native = bl.Baseline("native", counter, 10_000)
    ledger = Ledger(pricing("anthropic-sonnet"), 300_000)
    full = _session(10, 1000)

    eight = native.serve(full[:17])
    assert eight.tokens == 8280 and not eight.compacted
    ledger.add(eight.units, 0)

    nine = native.serve(full[:19])
    assert nine.compacted and native.boundary == 17  # the tail starts at the assistant call of arc 9
    assert [u[1] for u in nine.units] == [1004, 18, 1004]
    (call,) = nine.extra
    assert sum(u[1] for u in call.units) == 9302 + 200 and call.output_tokens == 1000
    for extra in nine.extra:
        ledger.add(extra.units, 1000, output_tokens=extra.output_tokens, extra=True)
    bust = ledger.add(nine.units, 1000)
    assert bust.bust  # the summary rewrote the prefix

    ten = native.serve(full[:21])
    assert ten.tokens == 2026 + 1022 and not ten.compacted
    assert not ledger.add(ten.units, 2000).bust  # growth after the summary reuses the cache


def test_native_never_splits_a_tool_arc() -> None:
    """Parallel calls: one assistant message with two calls answered by two tool messages."""
    history = _session(1, 10)
    history.append(m.Message("ap", m.ASSISTANT, [
        m.Block(m.TOOL_CALL, tool_id="p1", tool_name="read", input={"path": "a"}),
        m.Block(m.TOOL_CALL, tool_id="p2", tool_name="read", input={"path": "b"})]))
    history.append(m.Message("r1", m.TOOL, [m.Block(m.TOOL_RESULT, "one", tool_id="p1")]))
    history.append(m.Message("r2", m.TOOL, [m.Block(m.TOOL_RESULT, "two", tool_id="p2")]))
    history.append(m.Message("u1", m.USER, [m.Block(m.TEXT, "next")]))
    # indexes: 0 user, 1 call, 2 result, 3 parallel calls, 4 result, 5 result, 6 user
    assert bl.valid_cuts(history, 0) == [1, 3, 6]


def test_masking_keeps_the_newest_ten_tool_outputs() -> None:
    """12 arcs: results 1 and 2 are masked (placeholder: 5 words + 4). With 13, result 3 joins them,
    so the cached prefix breaks at result 3 on every new tool output."""
    counter = _counter()
    masking = bl.Baseline("masking", counter, 100_000)
    full = _session(13, 1000)
    twelve = masking.serve(full[:25])
    tokens = [u[1] for u in twelve.units]
    assert tokens[2] == tokens[4] == 9  # results 1 and 2 masked
    assert tokens[6] == 1004  # result 3 is the oldest of the newest ten
    assert twelve.tokens == 104 + 12 * 18 + 2 * 9 + 10 * 1004
    assert twelve.edited

    ledger = Ledger(pricing("anthropic-sonnet"), 300_000)
    ledger.add(twelve.units, 0)
    thirteen = masking.serve(full[:27])
    charge = ledger.add(thirteen.units, 1000)
    assert [u[1] for u in thirteen.units][6] == 9
    assert charge.bust and charge.prefix == sum(tokens[:6])


def test_clear_tool_uses_fires_past_the_trigger_only_when_it_clears_enough() -> None:
    """Window 20 000 → trigger min(100 000, 10 000) = 10 000; arcs of 2 022 tokens (2 000-word results).

    n = 4: 8 192, under the trigger. n = 5: 10 214 > trigger, but clearing the 2 oldest results frees
    2 × (2 000 − 6) = 3 988 < 5 000 (clear_at_least): not applied. n = 6: 12 236, clearing 3 frees 5 982:
    served 6 254. n = 7: 14 258, clearing 4 frees 7 976: served 6 282.
    """
    counter = _counter()
    clear = bl.Baseline("clear-tool-uses", counter, 20_000)
    assert clear.clear_trigger == 10_000
    full = _session(7, 2000)
    four, five, six, seven = (clear.serve(full[:1 + 2 * n]) for n in (4, 5, 6, 7))
    assert (four.tokens, four.edited) == (8192, False)
    assert (five.tokens, five.edited) == (10_214, False)
    assert (six.tokens, six.edited) == (6254, True)
    assert (seven.tokens, seven.edited) == (6282, True)
    assert [u[1] for u in seven.units][-2:] == [18, 2004]  # the newest results stay
    assert not any(s.compacted for s in (four, five, six, seven))


def test_clear_tool_uses_falls_back_to_overflow_compaction() -> None:
    """Window 4 000 (trigger 2 000, compaction past 3 400), arcs of 822 tokens (800-word results).

    n = 4: 3 392, past the trigger, but clearing one result frees 794 < 5 000: served whole, under 85%.
    n = 5: 4 214, clearing two frees 1 588 < 5 000, so the overflow compaction runs; even one arc is
    over the 800-token tail budget, so the tail is the last arc alone: [summary 404 (10% of the window), 18, 804].
    """
    clear = bl.Baseline("clear-tool-uses", _counter(), 4000)
    served = clear.serve(_session(4, 800))
    assert (served.tokens, served.compacted, served.edited) == (3392, False, False)
    served = clear.serve(_session(5, 800))
    assert served.compacted and not served.edited
    assert [u[1] for u in served.units] == [404, 18, 804]


def test_each_harness_gets_its_own_native_and_the_recording_chooses() -> None:
    assert bl.profile_for("native", m.PI) is bl.PROFILES["pi"]
    assert bl.profile_for("native", m.ANTHROPIC) is bl.PROFILES["claude-code"]
    assert bl.profile_for("native", m.OPENCODE) is bl.PROFILES["opencode"]
    assert bl.profile_for("native", m.OPENAI_RESPONSES) is bl.PROFILES["codex"]
    assert bl.profile_for("native:opencode", m.PI) is bl.PROFILES["opencode"]  # a named one wins
    assert bl.profile_for("native", None) is bl.GENERIC
    assert set(bl.NATIVES) == {"native:claude-code", "native:opencode", "native:pi", "native:codex"}
    for profile in bl.PROFILES.values():
        assert profile.source and 0.8 < profile.trigger < 0.95 and 0 <= profile.tail <= 0.1


def test_every_profile_says_which_figures_are_not_measured() -> None:
    """Only Pi compacts in our recordings: the other harnesses' summary sizes are assumptions, and their
    source text and `unmeasured` say so (shown in mc replay's JSON and bench/results.md)."""
    fields = {"trigger", "tail", "summary_tokens", "summary_cached"}
    assert bl.PROFILES["pi"].unmeasured == () and "measured in pi_before-compaction" in bl.PROFILES["pi"].source
    for key in ("claude-code", "opencode", "codex"):
        profile = bl.PROFILES[key]
        assert profile.unmeasured == ("summary_tokens",) and "summary size not measured" in profile.source
    for profile in (*bl.PROFILES.values(), bl.GENERIC):
        assert set(profile.unmeasured) <= fields
        assert bool(profile.unmeasured) == ("not measured" in profile.source)


def test_native_pi_compacts_late_keeps_a_tenth_and_its_summary_call_misses_the_cache() -> None:
    """Window 20 000, arcs of 1 022 tokens. Pi compacts past 92% (18 400): n = 17 → 104 + 17 × 1 022 =
    17 478 stays; n = 18 → 18 500 compacts. Tail ≤ 2 000 tokens: one arc (two would be 2 044). Summary
    1 000 tokens (Pi's measured size; 10% of the window is 2 000)."""
    native = bl.Baseline("native", _counter(), 20_000, harness=m.PI)
    full = _session(19, 1000)
    assert not native.serve(full[:35]).compacted
    served = native.serve(full[:37])
    assert served.compacted and [u[1] for u in served.units] == [1004, 18, 1004]
    (call,) = served.extra
    assert not call.cached and call.output_tokens == 1000
    ledger = Ledger(pricing("anthropic-sonnet"), 300_000)
    charge = ledger.add(call.units, 0, output_tokens=call.output_tokens, extra=True, cached=call.cached)
    assert charge.uncached == 18_500 + 200 and charge.read == 0


def test_native_claude_code_keeps_no_tail_but_the_current_turn() -> None:
    native = bl.Baseline("native:claude-code", _counter(), 10_000)
    served = native.serve(_session(9, 1000))  # 9 302 > 83.5% of 10 000
    assert served.compacted and served.extra[0].cached
    assert [u[1] for u in served.units] == [1004, 18, 1004]  # summary (10% of the window) + the last arc


def test_native_codex_keeps_only_recent_user_messages() -> None:
    history = _session(4, 1000)
    history.append(m.Message("u1", m.USER, [m.Block(m.TEXT, "now please fix tests/test_parser.py and commit")]))
    history += _session(4, 1000)[1:]
    native = bl.Baseline("native:codex", _counter(), 9000)  # 9 × 1 022 + 2 users > 90%
    served = native.serve(history)
    assert served.compacted and not served.extra[0].cached
    seen, texts = native.view(history)
    assert [msg.id for msg in seen] == ["u0", "u1"]  # both user messages fit the 900-token tail
    assert served.tokens == 904 + 104 + 10  # summary + "task…" (100 words) + the 6-word request
    assert texts[0].count("Called bash") == 8 and "User:" not in texts[0]  # kept users are not repeated


def test_native_retention_is_measured_on_what_its_summary_and_tail_show() -> None:
    from magic_context.replay.anchors import Retention

    history = [m.Message("u0", m.USER, [m.Block(m.TEXT, "please refactor src/pkg/parser.py into two modules")])]
    for i in range(1, 10):
        history.append(m.Message(f"a{i}", m.ASSISTANT, [
            m.Block(m.TOOL_CALL, tool_id=f"c{i}", tool_name="read", input={"path": f"src/pkg/mod{i}.py"})]))
        history.append(m.Message(f"t{i}", m.TOOL, [m.Block(m.TOOL_RESULT, " ".join(["x"] * 1000), tool_id=f"c{i}")]))
    native = bl.Baseline("native:pi", _counter(), 10_000)
    tracker = Retention()
    for end in range(3, len(history) + 1, 2):
        native.serve(history[:end])
        tracker.measure(history[:end], *native.view(history[:end]))
    summary = tracker.summary()
    assert native.summaries >= 1 and summary["passes"] >= 1
    assert summary["instructions"]["min"] == 1.0  # the request is lifted into the summary
    assert 0 < summary["min"] <= summary["mean"] <= 1
