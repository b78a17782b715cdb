"""bench/cost_floor.py on hand-built sessions, with a word counter so every figure is checkable by hand.

Tokens (replay.units with a word counter): a text of N words counts N, a message adds 4, a tool call
counts its JSON arguments (`{"cmd": "x"}` = 2 words) + 12. So: system message of 10 words 14, task of
1 200 words 1 204 (fixed part 1 218, over Sonnet's 1 024-token minimum cacheable length), assistant
tool call 18, tool result of 50 words 54: one arc (message pair) is 72 tokens.
"""

from __future__ import annotations

import pytest

from bench import cost_floor as cf
from magic_context.replay import cost
from magic_context.replay.passes import PassSpec, Replayable
from magic_context.replay.units import TokenCounter
from magic_context.wire import model as m

SONNET = cost.pricing("anthropic-sonnet")
TTL = cost.FIVE_MINUTES_MS


def _counter() -> TokenCounter:
    return TokenCounter(lambda text: len(text.split()))


def _autonomous(arcs: int) -> list[m.Message]:
    """system (10 words), task (1 200 words), then `arcs` × [assistant tool call, tool result of 50 words]."""
    out = [m.Message("s", m.SYSTEM, [m.Block(m.TEXT, " ".join(["sys"] * 10))]),
           m.Message("u0", m.USER, [m.Block(m.TEXT, " ".join(["task"] * 1200))])]
    for i in range(1, arcs + 1):
        out.append(m.Message(f"a{i}", m.ASSISTANT,
                             [m.Block(m.TOOL_CALL, tool_id=f"c{i}", tool_name="bash", input={"cmd": "x"})]))
        out.append(m.Message(f"t{i}", m.TOOL, [m.Block(m.TOOL_RESULT, " ".join([f"out{i}"] * 50), tool_id=f"c{i}")]))
    return out


def _replayable(messages: list[m.Message], harness: str = m.OPENAI, step_ms: int = 1000) -> Replayable:
    """One pass per arc: the first request is the fixed part, then each arc's result ends a pass."""
    ends = [2, *range(4, len(messages) + 1, 2)]
    return Replayable(harness, [], messages, [PassSpec(end, i * step_ms, "m") for i, end in enumerate(ends)], None)


def test_fixed_part_newest_pair_and_protected_tail_indexes() -> None:
    """Six arcs (indexes 2-13). The newest pair starts at the last assistant call (12). The newest 5 tags
    are the results t6…t2 (the task's text is a tag too, but it is in the fixed part): t2 sits at index
    5, widened to its call at 4."""
    history = _autonomous(6)
    assert cf.fixed_count(history) == 2
    assert cf.pair_start(history, 2) == 12
    assert cf.tail_start(history, 2, 5) == 4
    assert cf.tail_start(history, 2, 100) == 2  # never into the fixed part
    assert cf.newest_start(history, "floor+tail", m.OPENAI) == 4  # autonomous: 5 protected tags
    assert cf.pair_start(history[:2], 2) == 2  # only the fixed part: nothing newer
    with pytest.raises(ValueError, match="unknown floor kind"):
        cf.newest_start(history, "floor-ish", m.OPENAI)


def test_floor_of_an_autonomous_run_by_hand() -> None:
    """4 passes (0, 1, 2, 3 arcs). The floor serves the fixed part (1 218) plus the newest arc (72):
    1 218, then 1 290 three times. Pass 1 writes 1 218; each later pass reads the fixed part and writes
    the new arc: read 3 × 1 218 = 3 654, written 1 218 + 3 × 72 = 1 434;
    $3/Mtok × (1.25 × 1 434 + 0.1 × 3 654) = $0.0064737."""
    rep = _replayable(_autonomous(3))
    counter = _counter()
    requests = cf.floor_requests(rep, "floor", counter)
    assert [sum(u[1] for u in units) for units, _ in requests] == [1218, 1290, 1290, 1290]
    bill = cf.floor_bill(rep, "floor", counter, SONNET, TTL)
    assert (bill.tokens, bill.read, bill.write, bill.uncached, bill.passes) == (5088, 3654, 1434, 0, 4)
    assert bill.usd == pytest.approx(0.0064737, abs=1e-10)
    assert bill.mean_tokens == 1272.0 and bill.resent_read_share == 1.0
    assert bill.new_written == 1434  # every write is of a new unit: nothing re-written


def test_floor_with_the_task_free_keeps_only_the_system_message_and_the_newest_arc() -> None:
    """The task (1 204) is free too: 14 (system alone) on the first pass, then 14 + 72 = 86; never the task
    again as a "current request" (an autonomous run has no other user-typed message)."""
    requests = cf.floor_requests(_replayable(_autonomous(3)), "floor-task", _counter())
    assert [sum(u[1] for u in units) for units, _ in requests] == [14, 86, 86, 86]


def test_perfect_caching_reads_a_resent_unit_wherever_it_sits_and_the_ledger_does_not() -> None:
    """[A 1 100, B 200, C 300] then [A, C, D 50]: the ledger reads only the common prefix A and rewrites C;
    perfect caching reads A and C and writes only D."""
    first = [("A", 1100), ("B", 200), ("C", 300)]
    second = [("A", 1100), ("C", 300), ("D", 50)]
    bill = cf.perfect_bill([(first, 0), (second, 1)], SONNET, TTL)
    assert (bill.read, bill.write) == (1400, 1600 + 50)
    assert bill.resent == 1400 and bill.resent_read_share == 1.0
    ledger = cost.Ledger(SONNET, TTL)
    ledger.add(first, 0)
    ledger.add(second, 1)
    assert (ledger.read_tokens, ledger.write_tokens) == (1100, 1600 + 350)


def test_perfect_caching_equals_the_ledger_when_requests_only_grow() -> None:
    """The whole history each pass (the floor+tail of three arcs keeps everything): every request extends
    the last, so perfect caching and `cost.Ledger` bill the same, token for token."""
    rep = _replayable(_autonomous(3))
    counter = _counter()
    requests = cf.floor_requests(rep, "floor+tail", counter)
    assert [sum(u[1] for u in units) for units, _ in requests] == [1218, 1290, 1362, 1434]
    bill = cf.perfect_bill(requests, SONNET, TTL)
    ledger = cost.Ledger(SONNET, TTL)
    for units, at_ms in requests:
        ledger.add(units, at_ms)
    assert (bill.read, bill.write, bill.uncached) == (ledger.read_tokens, ledger.write_tokens, ledger.uncached_tokens)
    assert bill.usd == pytest.approx(ledger.usd, abs=1e-12)


def test_a_cold_pass_writes_the_fixed_part_again_and_a_short_request_is_uncached() -> None:
    """Passes 10 minutes apart (past the 5-minute TTL): every pass writes its whole request, nothing is
    re-sent warm. A request under 1 024 tokens is uncached at 1×, and a re-sent 1 000 tokens is no hit."""
    rep = _replayable(_autonomous(2), step_ms=600_000)
    bill = cf.floor_bill(rep, "floor", _counter(), SONNET, TTL)
    assert (bill.read, bill.write, bill.resent) == (0, 1218 + 1290 + 1290, 0)
    assert bill.new_written == 1218 + 72 + 72  # the fixed part re-written twice after the TTL
    short = cf.perfect_bill([([("A", 1000)], 0), ([("A", 1000), ("B", 10)], 1)], SONNET, TTL)
    assert (short.read, short.write, short.uncached) == (0, 0, 2010)


def test_interactive_floor_keeps_the_users_current_request_before_the_newest_pair() -> None:
    """Pi: first user message (fixed), an answer, the current request "fix the bug", two tool arcs. The
    floor serves the fixed part, the current request, then the newest arc; 20 protected tags cover all."""
    messages = [
        m.Message("u0", m.USER, [m.Block(m.TEXT, "hello there")]),
        m.Message("a0", m.ASSISTANT, [m.Block(m.TEXT, "hi what now")]),
        m.Message("u1", m.USER, [m.Block(m.TEXT, "fix the bug")]),
        m.Message("a1", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read", input={"p": "x"})]),
        m.Message("t1", m.TOOL, [m.Block(m.TOOL_RESULT, "one two", tool_id="c1")]),
        m.Message("a2", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c2", tool_name="read", input={"p": "y"})]),
        m.Message("t2", m.TOOL, [m.Block(m.TOOL_RESULT, "three four five", tool_id="c2")]),
    ]
    counter = _counter()
    units = cf.floor_request(messages, "floor", m.PI, counter)
    assert [u[1] for u in units] == [6, 7, 18, 7]  # u0, u1, a2 (2 + 12 + 4), t2
    assert [u[0] for u in units] == [counter.message(messages[i])[0] for i in (0, 2, 5, 6)]
    assert cf.newest_start(messages, "floor+tail", m.PI) == 1  # 20 tags: everything after the fixed part


def test_prefix_floor_busts_only_when_the_window_forces_it() -> None:
    """Window 1 300: passes of 1 218 and 1 290 fit; the third (1 362) and the fourth would pass it, so each
    cuts to the fixed part + the newest arc (1 290): 2 busts, and each re-sends only the fixed part,
    read from the cache (re-sent read share 100%). The bill is then the floor's."""
    rep = _replayable(_autonomous(3))
    counter = _counter()
    bill = cf.prefix_floor(rep, "floor", counter, SONNET, TTL, window=1300)
    assert (bill.busts, bill.passes, bill.tokens) == (2, 4, 1218 + 3 * 1290)
    assert (bill.read, bill.write, bill.resent_read_share) == (3654, 1434, 1.0)
    free = cf.prefix_floor(rep, "floor-task", counter, SONNET, TTL, window=100)  # the system message and arcs
    assert (free.busts, free.tokens) == (2, 14 + 86 + 86 + 86)  # 14 + 2 arcs = 158 > 100: cut to the newest
    roomy = cf.prefix_floor(rep, "floor", counter, SONNET, TTL, window=10_000)
    assert roomy.busts == 0 and roomy.tokens == 1218 + 1290 + 1362 + 1434


def test_mc_detail_splits_what_mc_serves_and_writes_into_parts_that_add_up() -> None:
    """The real mc (its own SQLite in a temporary dir) on four passes of a small OpenAI-format run in a roomy
    window: it drops nothing, so the task is served whole every pass (tag prefix aside), the parts add up
    to every token the ledger priced, nothing is re-written and nothing busts."""
    from magic_context.transform.protocol import CODECS

    native: list[dict[str, object]] = [{"role": "system", "content": "You solve tasks."},
                                       {"role": "user", "content": "Fix the bug in app.py please."}]
    for i in range(1, 4):
        native.append({"role": "assistant", "content": f"Step {i}: look.", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat app.py"}'}}]})
        native.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i} " * 20})
    canon = CODECS[m.OPENAI].decode(native)
    rep = Replayable(m.OPENAI, native, canon, [PassSpec(end, k * 1000, "gpt-4o") for k, end in
                                               enumerate([2, 4, 6, 8])], None)
    counter = TokenCounter()
    low_minimum = cost.Pricing("test", "test", 3.0, 15.0, 0.1, 1.25, 2.0, 1)
    detail = cf.mc_detail(rep, 100_000, counter, low_minimum, TTL)
    mean = detail["mean"]
    task = counter.text("Fix the bug in app.py please.")
    assert task + 4 <= mean["task"] <= task + 4 + 5  # the task every pass, plus mc's short tag prefix
    assert mean["system"] > counter.text("You solve tasks.") + 4  # mc adds its own instructions
    total = sum(mean.values()) * 4
    assert total == pytest.approx(detail["read"] + detail["write"])  # every token read or written
    assert (detail["busts"], detail["cold"], detail["rewritten"]) == (0, 0, 0)
    assert detail["new_written"] == detail["write"]
