"""The transform pass's small helpers (`pass_view`, `pass_decide`), in process and by exact value: the system
text guidance goes into, the last activity, the skim hint, the fold, oversized previews, the protected window.
The CLI tests reach them only through a subprocess, where a wrong value shows (if at all) far downstream."""

from __future__ import annotations

import os

from magic_context import tokens
from magic_context.transform import pass_decide, pass_view, protocol, tagger
from magic_context.transform import tags as tag_store
from magic_context.transform.state import SessionState
from magic_context.wire import model as m

BILLING = "x-anthropic-billing-header: cc_version=1;"


def inp(document, **options):
    return protocol.read_input(document, {"--project": "/p", **{f"--{k}": v for k, v in options.items()}})


def msg(role: str, ordinal: int, *blocks: m.Block, **fields) -> m.Message:
    return m.Message(id=f"m{ordinal}", role=role, blocks=list(blocks), ordinal=ordinal, **fields)


def text(value: str = "x") -> m.Block:
    return m.Block(m.TEXT, value)


def test_estimate_is_zero_for_no_text_and_the_tokenizer_otherwise() -> None:
    assert pass_view.estimate("") == 0
    assert pass_view.estimate("hello world, a few tokens") == tokens.estimate("hello world, a few tokens") > 0


def test_system_text_per_harness() -> None:
    user = {"role": "user", "content": "hi"}
    chat = inp({"model": "gpt-4o", "messages": [{"role": "system", "content": "A"}, user,
                                                {"role": "developer", "content": "B"}]})
    assert pass_decide.system_text(chat, chat.messages_json) == ("A", ["A", "B"])
    bare = inp({"model": "gpt-4o", "messages": [user]})
    assert pass_decide.system_text(bare, bare.messages_json) == ("", [])
    dev = [{"type": "message", "role": "developer", "content": "D"}, {"type": "message", "role": "user",
                                                                       "content": "hi"}]
    responses = inp({"model": "gpt-5", "input": dev, "instructions": "I"})
    assert pass_decide.system_text(responses, responses.messages_json) == ("I", ["I", "D"])
    responses = inp({"model": "gpt-5", "input": dev})
    assert pass_decide.system_text(responses, responses.messages_json) == ("D", ["D"])
    claude = inp({"model": "claude-x", "max_tokens": 5, "messages": [user],
                  "system": [{"type": "text", "text": BILLING}, {"type": "text", "text": "P"},
                             {"type": "text", "text": "Q"}]})
    assert pass_decide.system_text(claude, claude.messages_json) == ("P", [BILLING, "P", "Q"])
    only_billing = inp({"model": "claude-x", "max_tokens": 5, "messages": [user], "system": [BILLING]})
    assert pass_decide.system_text(only_billing, only_billing.messages_json) == ("", [BILLING])
    plain = inp({"model": "claude-x", "max_tokens": 5, "messages": [user], "system": "S"})
    assert pass_decide.system_text(plain, plain.messages_json) == ("S", ["S"])
    none = inp({"model": "claude-x", "max_tokens": 5, "messages": [user]})
    assert pass_decide.system_text(none, none.messages_json) == ("", [])


def test_last_activity_is_the_later_of_the_last_pass_and_the_last_reply() -> None:
    messages = [msg(m.USER, 0, created_at=50), msg(m.ASSISTANT, 1, created_at=100, completed_at=300),
                msg(m.ASSISTANT, 2, created_at=200), msg(m.USER, 3, created_at=900)]
    assert pass_decide._last_activity(SessionState(1, {"last_pass_at": 150}), messages) == 200  # the newest reply only
    assert pass_decide._last_activity(SessionState(1, {"last_pass_at": 250.7}), messages) == 250
    assert pass_decide._last_activity(SessionState(1, {}), messages[:2]) == 300  # completed wins over created
    assert pass_decide._last_activity(SessionState(1, {"last_pass_at": "x"}), [msg(m.USER, 0, created_at=5)]) is None
    assert pass_decide._last_activity(SessionState(1, {"last_pass_at": 7}), [msg(m.ASSISTANT, 0)]) == 7


def test_skim_hint_counts_the_folded_lead_and_skips_system_messages() -> None:
    messages = [msg(m.SYSTEM, 9), msg(m.USER, 0), msg(m.ASSISTANT, 1), msg(m.SYSTEM, 10), msg(m.USER, 2),
                msg(m.ASSISTANT, 3)]
    assert pass_view.skim_hint(messages, 1) == 3
    assert pass_view.skim_hint(messages, 2) == 5
    assert pass_view.skim_hint(messages, 0) == 2
    assert pass_view.skim_hint(messages, -1) == 0
    assert pass_view.skim_hint(messages, 3) == 6
    assert pass_view.skim_hint([], 5) == 0


def call(tool_id: str) -> m.Block:
    return m.Block(m.TOOL_CALL, tool_id=tool_id, tool_name="read", input={})


def result(tool_id: str) -> m.Block:
    return m.Block(m.TOOL_RESULT, "out", tool_id=tool_id)


def test_fold_drops_covered_messages_and_results_whose_call_went() -> None:
    messages = [msg(m.SYSTEM, 0, text("s")), msg(m.USER, 1, text()), msg(m.ASSISTANT, 2, call("a")),
                msg(m.USER, 3, result("a"), text("kept")), msg(m.ASSISTANT, 4, call("b")), msg(m.USER, 5, result("b")),
                msg(m.USER, 6, result("a"))]
    sizes = [10, 11, 12, 13, 14, 15, 16]
    assert pass_view._fold(messages, sizes, -1) == (messages, sizes)
    kept, kept_sizes = pass_view._fold(messages, sizes, 2)
    assert [x.ordinal for x in kept] == [0, 3, 4, 5] and kept_sizes == [10, 13, 14, 15]  # 6 held only an orphan
    assert [b.kind for b in kept[1].blocks] == [m.TEXT]
    assert [b.tool_id for b in kept[3].blocks] == ["b"]
    same = [msg(m.SYSTEM, 5, text()), msg(m.USER, 1, text())]
    assert pass_view._fold(same, [1, 2], 0) == (same, [1, 2])  # nothing covered: the same lists


def test_fold_drops_the_results_of_folded_calls_as_the_arcs_pair_them() -> None:
    """A result answers the nearest call before it: a kept call of the same id after it does not keep it; one in
    its own message does (OpenCode holds both). A result with no call goes too (its call may be skimmed)."""
    messages = [msg(m.USER, 0, text()), msg(m.ASSISTANT, 1, call("a")), msg(m.USER, 2, result("a"), text("r")),
                msg(m.ASSISTANT, 3, call("a")), msg(m.USER, 4, result("a"), result("z")),
                msg(m.ASSISTANT, 5, result("b"), call("b"), call("c"), result("c"))]
    kept, sizes = pass_view._fold(messages, [10, 11, 12, 13, 14, 15], 1)
    assert [x.ordinal for x in kept] == [2, 3, 4, 5] and sizes == [12, 13, 14, 15]
    assert [[(b.kind, b.tool_id) for b in x.blocks] for x in kept] == [
        [(m.TEXT, None)], [(m.TOOL_CALL, "a")], [(m.TOOL_RESULT, "a")],
        [(m.TOOL_RESULT, "b"), (m.TOOL_CALL, "b"), (m.TOOL_CALL, "c"), (m.TOOL_RESULT, "c")]]


def site(number: int, kind: str, tokens_: int, *, new: bool = True, role: str = m.USER, results: bool = False,
         dropped: bool = False) -> tagger.Site:
    tag = tag_store.Tag(number, f"p{number}", kind, f"m{number}", tokens=tokens_, new=new, role=role,
                        status=tag_store.DROPPED if dropped else tag_store.ACTIVE)
    block = text()
    return tagger.Site(tag, number, block, role, results=[(number, result("c"))] if results else [])


def test_preview_oversized_marks_only_new_large_tool_outputs_and_user_texts() -> None:
    cap = pass_view.LIVE_CAP_MIN  # 10% of 50 000 is below the minimum
    sites = [site(1, tag_store.KIND_TOOL, cap + 1, results=True), site(2, tag_store.KIND_TOOL, cap, results=True),
             site(3, tag_store.KIND_TEXT, cap + 1), site(4, tag_store.KIND_TEXT, cap + 1, role=m.ASSISTANT),
             site(5, tag_store.KIND_TOOL, cap + 1), site(6, tag_store.KIND_TOOL, cap + 1, results=True, new=False),
             site(7, tag_store.KIND_TOOL, cap + 1, results=True, dropped=True),
             site(8, tag_store.KIND_MEDIA, cap + 1)]
    out = pass_view._preview_oversized(sites, 50_000)
    assert [s.tag.number for s in out] == [1, 3]
    assert [(s.tag.status, s.tag.drop_mode) for s in out] == [(tag_store.DROPPED, tag_store.MODE_PREVIEW)] * 2
    a, d = tag_store.ACTIVE, tag_store.DROPPED
    assert [s.tag.status for s in sites] == [d, a, d, a, a, a, d, a]
    assert [s.tag.drop_mode for s in sites if s not in out] == [None] * 6


def test_preview_cap_is_a_tenth_of_a_large_window() -> None:
    sites = [site(1, tag_store.KIND_TEXT, 20_000), site(2, tag_store.KIND_TEXT, 20_001)]
    assert [s.tag.number for s in pass_view._preview_oversized(sites, 200_000)] == [2]
    sites = [site(1, tag_store.KIND_TEXT, 20_000), site(2, tag_store.KIND_TEXT, 20_001)]
    assert [s.tag.number for s in pass_view._preview_oversized(sites, 200_009)] == [2]  # int(20 000.9)


def test_protection_counts_the_newest_active_tags() -> None:
    sites = [site(n, tag_store.KIND_TEXT, 1, dropped=n in (4, 6)) for n in (1, 2, 3, 4, 5, 6)]
    by_number, protected_from, newest = pass_view._protection(sites, 2)
    assert by_number == {s.tag.number: s for s in sites}
    assert (protected_from, newest) == (3, 5)  # active: 1 2 3 5
    assert pass_view._protection(sites, 4)[1:] == (1, 5)
    assert pass_view._protection(sites, 5)[1:] == (0, 5)  # fewer active tags than protected: all are
    assert pass_view._protection([], 3) == ({}, 0, 0)


def test_sizes_served_adds_prefixes_head_system_and_nudges_to_the_served_messages() -> None:
    from types import SimpleNamespace

    from magic_context.transform import stages
    from magic_context.transform.drops import PLACEHOLDER_TOKENS

    messages = [msg(m.USER, 0, text("a")), msg(m.ASSISTANT, 1, text("b")), msg(m.USER, 2, text("c"))]
    view = SimpleNamespace(messages=messages, msg_tokens=[100, 200, 300])
    sites = [site(1, tag_store.KIND_TEXT, 10), site(2, tag_store.KIND_TEXT, 10),
             site(3, tag_store.KIND_TEXT, 50, dropped=True)]
    for s, index in zip(sites, (0, 1, 2), strict=True):
        s.message_index = index
    sites[2].tag.drop_mode = tag_store.MODE_PLACEHOLDER
    body = 600 - (50 - PLACEHOLDER_TOKENS)
    fixed = 7 + 11 + 13
    sizes = stages.Sizes(True, 7, 11, 13)
    assert sizes.served(view, sites) == body + 2 * stages.TAG_PREFIX_TOKENS + fixed  # the dropped tag has none
    assert stages.Sizes(False, 7, 11, 13).served(view, sites) == body + fixed
    assert sizes.served(view, sites, kept=messages[:2]) == 300 + 2 * stages.TAG_PREFIX_TOKENS + fixed
    assert sizes.served(view, sites, kept=messages, stripped={"m1"}, reasoning={"m1": 40, "m0": 5}) == \
        body - 40 + 2 * stages.TAG_PREFIX_TOKENS + fixed
    assert stages.TAG_PREFIX_TOKENS == 3


def test_emergency_advice_by_what_fills_the_window_and_the_historian(monkeypatch) -> None:
    """Exit 4's advice (`_emergency_fix`), at its boundaries: what compacting the 20-message-old history would
    free against what its summary costs in m[0] decides between 'nothing mc can shrink' and compacting; then a
    historian already at work (running, or fired detached) is waited for, else `mc wrapup` is advised."""
    from types import SimpleNamespace

    from magic_context.transform.drops import PLACEHOLDER_TOKENS

    limit = 10_000  # the block band starts at 9 500
    messages = [msg(m.SYSTEM, 0, text("s"))] + [msg((m.USER, m.ASSISTANT)[i % 2], i, text()) for i in range(1, 26)]
    dropped = site(1, tag_store.KIND_TEXT, 100, dropped=True)
    dropped.tag.drop_mode = tag_store.MODE_PLACEHOLDER
    view = SimpleNamespace(messages=messages, msg_tokens=[1000] + [100] * 25, sites=[dropped])
    p = SimpleNamespace(inp=SimpleNamespace(session_id="s7"), hot={"history_budget_percentage": 0.1})
    foldable = 5 * 100 - (100 - PLACEHOLDER_TOKENS)  # messages 1-5 (the system message stays), less the drop
    at_band = 9_500 + foldable - 1_000  # the projected size that compacting would leave exactly at the band
    fixed = ("the system prompt, the tool definitions and the newest turn fill it, which mc cannot shrink: "
             "start a new session or use a model with a larger window")
    wrapup = "run `mc wrapup --session s7` to compact older history, then retry"
    wait = ("the historian is compacting older history now: retry once `mc status --session s7` "
            "no longer shows it running")

    def advice(projected: int, historian: str = "idle", v=view) -> str:
        return pass_decide._emergency_fix(p, v, projected, limit, historian)

    assert advice(at_band) == fixed
    assert advice(at_band - 1) == wrapup
    assert advice(at_band - 50) == wrapup  # 9 450 is under the band (95%, not 94%)
    assert advice(at_band - 1, "running") == wait
    assert advice(at_band - 1, "fired") == wrapup  # inline (tests): it ran in this pass and is done
    assert advice(at_band, "running") == fixed
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "")  # detached, as live
    assert advice(at_band - 1, "fired") == wait
    assert advice(at_band - 1, "idle") == wrapup
    short = SimpleNamespace(messages=messages[1:6], msg_tokens=[100] * 5, sites=[])  # nothing 20 messages old
    assert advice(9_500 - 1_000, v=short) == fixed
    assert advice(9_500 - 1_000 - 1, v=short) == wrapup


def test_provider_usage_is_the_last_replys_usage_plus_what_came_after() -> None:
    from types import SimpleNamespace

    def usage(total: int, output: int = 5) -> m.Usage:
        return m.Usage(input_tokens=total, output_tokens=output)

    def reported(messages, tokens_, inp_usage=None):
        return pass_decide._provider_usage(None, 1, SimpleNamespace(usage=inp_usage), messages, tokens_, divergences=[])

    reply = msg(m.ASSISTANT, 1, usage=usage(100))
    assert reported([msg(m.USER, 0), reply], [10, 20]) == 105
    assert reported([msg(m.USER, 0), reply, msg(m.USER, 2)], [10, 20, 30]) == 135
    assert reported([msg(m.USER, 0), reply, msg(m.USER, 2)], [10, 20, 30], usage(7, 1)) == 38  # the input's wins
    assert reported([msg(m.USER, 0), msg(m.ASSISTANT, 1, usage=usage(1))], [10, 20]) == 6
    assert reported([msg(m.USER, 0), msg(m.ASSISTANT, 1, usage=usage(0))], [10, 20]) is None  # no figures
    assert reported([msg(m.USER, 0)], [10], usage(1, 2)) == 3  # no reply yet: the input's usage alone
    assert reported([msg(m.USER, 0)], [10], usage(0, 2)) is None
    assert reported([], [], usage(4, 2)) == 6


def test_drain_pending_lands_queued_drops_outside_the_protected_window(conn) -> None:
    from magic_context.store import pending, raw
    from magic_context.transform.tags import MODE_REMOVED, MODE_TRUNCATED

    pk = raw.ensure_session(conn, "pi", "pending", project_dir="/p", now_ms=1)
    pending.queue(conn, pk, [1, 2, 3, 4, 9], forced=False, now_ms=1)
    pending.queue(conn, pk, [5], forced=True, now_ms=1)
    sites = {2: site(2, tag_store.KIND_TEXT, 10, dropped=True), 3: site(3, tag_store.KIND_TOOL, 10, results=True),
             4: site(4, tag_store.KIND_TEXT, 10), 5: site(5, tag_store.KIND_TEXT, 10)}
    drops, done = pass_decide._drain_pending(conn, pk, sites, 4, False)
    assert [(d.site.tag.number, d.mode, d.lane) for d in drops] == [(3, MODE_REMOVED, "ctx_reduce"),
                                                                    (5, MODE_TRUNCATED, "ctx_reduce")]
    assert done == [2, 3, 5]  # 1 and 9 are not in this request and 4 is protected: they stay queued
    drops, done = pass_decide._drain_pending(conn, pk, sites, 4, True)  # a forced pass lands protected ones too
    assert [d.site.tag.number for d in drops] == [3, 4, 5] and done == [2, 3, 4, 5]


def test_a_pairing_repair_cannot_fix_is_refused_with_its_first_problem() -> None:
    """An orphan is removed, but a tool_result inside an assistant message stays invalid: BadInput, never exit 0."""
    import pytest

    from magic_context.errors import BadInput

    messages = [m.Message("a", m.ASSISTANT, [m.Block(m.TOOL_RESULT, text="r", tool_id="x")]),
                m.Message("u", m.USER, [m.Block(m.TOOL_RESULT, text="o", tool_id="orphan"),
                                        m.Block(m.TEXT, text="hi")])]
    warnings: list[str] = []
    with pytest.raises(BadInput) as caught:
        pass_view._repair_pairing(messages, [5, 7], m.ANTHROPIC, warnings)
    assert caught.value.message == ("the input's tool pairing cannot be repaired: "
                                    "message 0: an assistant message carries tool_result blocks")
    assert caught.value.fix == "every tool call must be answered by its result right after it"
    assert warnings == []


def test_recorded_usage_is_only_for_the_reply_right_after_its_prompt_and_an_unrewritten_history() -> None:
    from magic_context.store import db
    from magic_context.store import raw as raw_store
    from magic_context.store import responses as response_store

    conn = db.open_db()
    try:
        pk = raw_store.ensure_session(conn, m.ANTHROPIC, "rec", project_id="p", project_dir="/tmp", now_ms=1)
        usage = m.Usage(10, 5, 90, 0)
        assert pass_decide._recorded_usage(conn, pk, [msg(m.USER, 0), msg(m.ASSISTANT, 1)], 1, []) is None  # none yet
        assert response_store.record(conn, m.ANTHROPIC, "rec", 1, usage, now_ms=2)  # prompt ended at ordinal 1

        def recorded(ordinals: list[int], divergences: list[tuple[str, int]]) -> m.Usage | None:
            messages = [msg(m.ASSISTANT if i == len(ordinals) - 1 else m.USER, o) for i, o in enumerate(ordinals)]
            return pass_decide._recorded_usage(conn, pk, messages, len(ordinals) - 1, divergences)

        assert recorded([0, 1, 2], []) == usage
        assert recorded([2], []) is None  # the reply opens the view: nothing shows it follows the prompt
        wrapped = [msg(m.ASSISTANT, 2), msg(m.USER, 1)]  # index 0 must not read messages[-1] as its prompt
        assert pass_decide._recorded_usage(conn, pk, wrapped, 0, []) is None
        assert recorded([0, 1, 5], []) is None  # the prompt's last message, but the reply is not the next one
        assert recorded([0, 3, 2], []) is None  # the next ordinal, but not after the prompt's last message
        assert recorded([0, 1, 2], [(raw_store.EDITED, 1)]) == usage  # the prompt's last message alone rewritten
        assert recorded([0, 1, 2], [(raw_store.EDITED, 0)]) is None  # rewritten before it: another prompt
        assert recorded([0, 1, 2], [(raw_store.COMPACTED, 1)]) is None  # any harness compaction
    finally:
        conn.close()


def test_protected_count_is_the_configs_else_the_harness_default_and_a_project_file_only_raises_it(tmp_path) -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from magic_context import paths
    from magic_context.config.hot import load_hot

    def count(harness: str) -> int:
        p = SimpleNamespace(inp=SimpleNamespace(harness=harness), hot=load_hot(tmp_path))
        return pass_view._protected_count(p)

    assert (count(m.ANTHROPIC), count(m.OPENAI)) == (20, 5)  # interactive callers, autonomous runs
    project_file = tmp_path / ".magic-context.toml"
    project_file.write_text("protected_tags = 30\n")
    assert (count(m.ANTHROPIC), count(m.OPENAI)) == (30, 30)  # the untrusted project file may raise it (only)
    project_file.write_text("protected_tags = 3\n")
    assert (count(m.ANTHROPIC), count(m.OPENAI)) == (20, 5)  # and never lower it
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("protected_tags = 3\n")
    project_file.unlink()
    assert (count(m.ANTHROPIC), count(m.OPENAI)) == (3, 3)  # the user's own value may lower it


def test_historian_is_asked_with_the_pass_figures_and_starts_inline_or_detached(conn, monkeypatch) -> None:
    """`_historian`: off → idle without a look; else the trigger gets the pass's figures, the stored fold's end
    and whether a run holds the lease; when it fires the run starts inline (tests, replays) or detached with the
    configured timeout, and the report word says what happened."""
    from types import SimpleNamespace

    from magic_context.history import runner
    from magic_context.history import trigger as history_trigger
    from magic_context.store import compartments, leases, raw

    pk = raw.ensure_session(conn, m.PI, "hist", project_dir="/p", now_ms=1)
    seen: dict = {}
    verdict = SimpleNamespace(fire=False, emergency=True)

    def figures(messages, msg_tokens, **kw):
        seen["figures"] = (messages, msg_tokens, kw)
        return SimpleNamespace(tokens=11, messages=3, commit_clusters=2)

    def evaluate(**kw):
        seen["evaluate"] = kw
        return verdict

    calls: list = []
    launched = [True]
    monkeypatch.setattr(history_trigger, "tail_figures", figures)
    monkeypatch.setattr(history_trigger, "evaluate", evaluate)
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: calls.append(("inline", a, k)))
    monkeypatch.setattr(runner, "launch_background", lambda *a, **k: calls.append(("detached", a, k)) or launched[0])
    inp = SimpleNamespace(now_ms=5000, session_id="hist", harness=m.PI)

    def word(enabled: bool = True, busting: bool = False) -> str:
        return pass_decide._historian(conn, inp, {"historian.timeout_ms": 1234}, pk, messages=["m"], msg_tokens=[5],
                                   usage_tokens=77, limit=1000, threshold=40.0, enabled=enabled, busting=busting)

    assert word(enabled=False) == "idle" and seen == {}
    assert word() == "idle" and calls == []
    assert seen["figures"] == (["m"], [5], {"last_end": None, "context_limit": 1000, "threshold_percent": 40.0,
                                            "usage_tokens": 77})
    assert seen["evaluate"] == {"usage_tokens": 77, "context_limit": 1000, "threshold_percent": 40.0, "tail_tokens": 11,
                                "tail_messages": 3, "commit_clusters": 2, "running": False, "busting": False}
    assert word(busting=True) == "idle" and seen["evaluate"]["busting"] is True  # the pass's bust, for rule 6
    compartments.insert(conn, pk, sequence=1, start=0, end=4, start_message_id=None, end_message_id=None, title="t",
                        p1="", p2="", p3="", p4="", content="c", importance=50, episode_type=None, start_time=None,
                        end_time=None, now_ms=1)
    assert leases.acquire(conn, leases.historian_lease(pk), "other", 4000, 1001, pid=os.getpid())  # live until 5001
    assert word() == "running"
    assert seen["figures"][2]["last_end"] == 4 and seen["evaluate"]["running"] is True

    verdict.fire = True
    assert word() == "fired"
    assert calls == [("inline", (conn, pk), {"emergency": True, "now_ms": 5000})]
    calls.clear()
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "")
    assert word() == "fired"
    assert calls == [("detached", (conn, pk), {"session_id": "hist", "harness": m.PI, "now_ms": 5000,
                                               "timeout_ms": 1234})]
    launched[0] = False
    assert word() == "idle"  # not started (another process took the lease first)


def test_a_repaired_pairing_is_one_warning_naming_the_first_three_repairs_and_how_many_more() -> None:
    """`_repair_pairing`: five orphan results go (their messages with them); the warning names three."""
    orphans = [m.Message(f"u{i}", m.USER, [m.Block(m.TOOL_RESULT, text="o", tool_id=f"x{i}")]) for i in range(5)]
    messages = [m.Message("u", m.USER, [m.Block(m.TEXT, text="hi")]), *orphans]
    warnings: list[str] = []
    kept, sizes = pass_view._repair_pairing(messages, [5, 1, 2, 3, 4, 6], m.ANTHROPIC, warnings)
    assert [x.id for x in kept] == ["u"] and sizes == [5]
    assert warnings == ["repaired the input's tool pairing: removed the orphan tool result x0 (no call before it); "
                        "removed the orphan tool result x1 (no call before it); removed the orphan tool result x2 "
                        "(no call before it) (+2 more)"]
    for count, more in ((3, ""), (4, " (+1 more)")):
        fresh = [m.Message(f"u{i}", m.USER, [m.Block(m.TOOL_RESULT, text="o", tool_id=f"x{i}")]) for i in range(count)]
        warnings = []
        pass_view._repair_pairing([m.Message("u", m.USER, [m.Block(m.TEXT, text="hi")]), *fresh], [5, *range(count)],
                                 m.ANTHROPIC, warnings)
        assert warnings[0].endswith("x2 (no call before it)" + more)


def test_a_result_the_repair_adds_for_an_unanswered_call_is_sized_as_a_synthetic_result() -> None:
    """`_repair_pairing` answers an unanswered call as the harness does; the added result costs 16 tokens."""
    messages = [m.Message("u", m.USER, [m.Block(m.TEXT, text="go")]), m.Message("a", m.ASSISTANT, [call("c1")]),
                m.Message("a2", m.ASSISTANT, [m.Block(m.TEXT, text="next")])]
    warnings: list[str] = []
    kept, sizes = pass_view._repair_pairing(messages, [5, 7, 9], m.ANTHROPIC, warnings)
    assert [[b.kind for b in x.blocks] for x in kept] == [[m.TEXT], [m.TOOL_CALL], [m.TOOL_RESULT], [m.TEXT]]
    assert sizes == [5, 7, pass_view.SYNTHETIC_RESULT_TOKENS, 9] == [5, 7, 16, 9] and len(warnings) == 1
