"""A session's passes through `transform.pipeline` in process, each report pinned whole: the first render, a
warm defer, the provider's usage, and every HARD fold reason (system prompt, model, history rewritten, cache TTL);
then the guidance in each harness's system slot. The CLI tests check the same through a subprocess, which
mutation testing cannot see."""

from __future__ import annotations

import json
import os

import pytest

from magic_context.transform import hook

NOW = 1_764_000_000_000
U1 = {"role": "user", "content": "fix the bug"}
A1 = {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                                       {"type": "tool_use", "id": "tu1", "name": "read", "input": {"path": "a.py"}}]}
R1 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "x = 1"}]}
A2 = {"role": "assistant", "content": "Fixed it."}
U2 = {"role": "user", "content": "thanks"}
GUIDANCE = "\n\n## Magic Context\n"


def envelope(messages: list, now: int, *, system: str = "Be brief.", model: str = "claude-sonnet-4-5", **extra) -> dict:
    return {"messages": messages, "system": system, "harness": "anthropic", "session_id": "passes",
            "project_dir": "/tmp", "now": now, "model": {"provider": "anthropic", "id": model}, **extra}


def serve(document: dict) -> tuple[dict, dict, int | None]:
    served = hook.serve_pass(json.dumps(document).encode(), {})
    report = dict(served.report)
    assert isinstance(report.pop("ms"), float)
    return json.loads(served.output), report, served.prompt_ordinal


def report(kind: str, reason: str, *, before: int, after: int, tags: int, usage: int, new_tags: int = 0,
           written: int = 0, source: str = "estimate") -> dict:
    return {"pass": kind, "bust": kind != "defer", "reason": reason, "tokens_before": before, "tokens_after": after,
            "tags": tags, "dropped": 0, "pending_drops": 0, "historian": "idle", "warnings": [],
            "usage_tokens": usage, "usage_source": source, "context_limit": 200_000, "threshold_percent": 40.0,
            "new_drops": 0, "new_tags": new_tags, "raw_written": written}


def record_skims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the Anthropic codec's decode to record the skim count of each call; returns the (live) record."""
    from magic_context.wire import anthropic

    calls: list[int] = []
    real_decode = anthropic.decode

    def decode(messages, skim=0):
        calls.append(skim)
        return real_decode(messages, skim=skim)

    monkeypatch.setattr(anthropic, "decode", decode)
    return calls


def test_a_sessions_passes_and_their_reports() -> None:
    out, rep, last = serve(envelope([U1, A1, R1], NOW))
    assert rep == report("fold", "first render", before=43, after=82, tags=3, usage=52, new_tags=3, written=3)
    assert last == 2
    assert out["system"].startswith("Be brief." + GUIDANCE)
    assert [m["content"] for m in out["messages"][2:4]] == ["§1§ fix the bug", [
        {"type": "text", "text": "§2§ Reading."}, A1["content"][1]]]
    assert out["messages"][0]["content"][0]["text"].startswith("<session-history>")
    first = out

    out, rep, last = serve(envelope([U1, A1, R1], NOW + 1000))
    assert rep == report("defer", "defer: within threshold, cache warm", before=43, after=82, tags=3, usage=82)
    assert (out["messages"], out["system"], last) == (first["messages"], first["system"], 2)  # the same bytes

    usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
    out, rep, last = serve(envelope([U1, A1, R1, A2, U2], NOW + 2000, usage=usage))
    assert rep == report("defer", "defer: within threshold, cache warm", before=55, after=100, tags=5, usage=110,
                         new_tags=2, written=2, source="provider")  # 100 + 5 + the new user message
    assert last == 4 and out["messages"][:5] == first["messages"]

    history = [U1, A1, R1, A2, U2]
    out, rep, _ = serve(envelope(history, NOW + 3000, system="Be long."))
    assert rep == report("fold", "system prompt changed", before=55, after=100, tags=5, usage=100)
    assert out["system"].startswith("Be long." + GUIDANCE)
    _, rep, _ = serve(envelope(history, NOW + 4000, system="Be long.", model="claude-opus-5"))
    assert rep == report("fold", "model changed", before=55, after=100, tags=5, usage=100)
    edited = [U1, A1, R1, {"role": "assistant", "content": "Fixed both."}, U2]
    _, rep, _ = serve(envelope(edited, NOW + 5000, system="Be long.", model="claude-opus-5"))
    assert rep == report("fold", "history rewritten by the harness (edited)", before=55, after=100, tags=5,
                         usage=100, new_tags=1, written=1)
    _, rep, _ = serve(envelope(edited, NOW + 6000, system="Be long.", model="claude-opus-5"))
    assert rep["pass"] == "defer"
    _, rep, _ = serve(envelope(edited, NOW + 6000 + 3_600_000, system="Be long.", model="claude-opus-5"))
    assert rep == report("fold", "cache TTL expired", before=55, after=100, tags=5, usage=100)


def first_pass(document: dict, session: str) -> dict:
    served = hook.serve_pass(json.dumps(document).encode(), {"--session": session, "--project": "/tmp"})
    return json.loads(served.output)


def test_guidance_goes_into_each_harness_system_slot_and_the_head_after_leading_system_messages() -> None:
    chat = first_pass({"model": "gpt-4o", "messages": [{"role": "system", "content": "Sys A"},
                                                       {"role": "user", "content": "hi"},
                                                       {"role": "system", "content": "Sys B"}]}, "chat")
    assert chat["messages"][0]["content"].startswith("Sys A" + GUIDANCE)
    assert chat["messages"][1]["content"].startswith("<session-history>")  # the head follows the lead system
    assert chat["messages"][3:] == [{"role": "user", "content": "§1§ hi"}, {"role": "system", "content": "Sys B"}]
    leads = first_pass({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Sys A"}, {"role": "system", "content": "Sys A2"},
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "Sys B"}]}, "leads")  # the head goes after both leading system messages
    assert [m["content"][:18] for m in leads["messages"]] == [
        "Sys A" + GUIDANCE[:13], "Sys A2", "<session-history><", "<session-history-s", "§1§ hi", "§2§ hello", "Sys B"]
    only = first_pass({"model": "gpt-4o", "messages": [{"role": "system", "content": "Sys A"}]}, "only-system")
    assert [m["content"][:18] for m in only["messages"]] == [
        "Sys A" + GUIDANCE[:13], "<session-history><", "<session-history-s"]
    bare = first_pass({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, "bare")
    assert bare["messages"][0]["content"].startswith("<session-history>") and "system" not in bare
    assert not any(GUIDANCE in json.dumps(m) for m in bare["messages"])  # no system message: none added

    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    inst = first_pass({"model": "gpt-5", "instructions": "Inst", "input": [user]}, "inst")
    assert inst["instructions"].startswith("Inst" + GUIDANCE) and len(inst["input"]) == 3
    dev = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev"}]}
    codex = first_pass({"model": "gpt-5", "input": [dev, user]}, "codex")
    assert codex["input"][0]["content"][0]["text"].startswith("Dev" + GUIDANCE) and "instructions" not in codex

    billing = "x-anthropic-billing-header: cc_version=1;"
    claude = first_pass({"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                         "system": [{"type": "text", "text": billing}, {"type": "text", "text": "P"},
                                    {"type": "text", "text": "Q"}]}, "claude")
    texts = [b["text"] for b in claude["system"]]
    assert texts[0] == billing and texts[1].startswith("P" + GUIDANCE) and texts[2] == "Q" and len(texts) == 3
    four = first_pass({"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                       "system": [{"type": "text", "text": t} for t in (billing, "P", "Q", "R")]}, "claude4")
    assert [b["text"][:1] for b in four["system"]] == ["x", "P", "Q", "R"]  # each entry keeps its own text
    dev2 = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev2"}]}
    dev3 = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev3"}]}
    codex3 = first_pass({"model": "gpt-5", "input": [dev, dev2, dev3, user]}, "codex3")
    assert [item["content"][0]["text"][:4] for item in codex3["input"][:3]] == ["Dev\n", "Dev2", "Dev3"]
    plain = first_pass({"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
                       "plain")
    assert "system" not in plain


def _tools(n: int) -> list:
    messages: list = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read",
                                                        "input": {"path": f"f{i}.py"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                   "content": f"OUT{i} " + "word " * 100}]}]
    return [*messages, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]


def _at(now: int, used: int, limit: int, session: str, messages: list) -> dict:
    return {"harness": "anthropic", "session_id": session, "project_dir": "/tmp", "now": now,
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "context_limit": limit},
            "usage": {"input_tokens": used, "output_tokens": 10}, "messages": messages}


def test_a_pass_over_the_threshold_drops_the_oldest_outputs_and_later_passes_keep_them_dropped(isolated_dirs,
                                                                                              monkeypatch) -> None:
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # the drops alone (the bust would fold: below)
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)  # the figures below are for a 65% threshold
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 65\n", encoding="utf-8")
    messages = _tools(40)
    _, rep, _ = serve(_at(NOW, 1000, 12_000, "over", messages))
    assert (rep["pass"], rep["threshold_percent"], rep["tags"], rep["raw_written"]) == ("fold", 65.0, 43, 83)
    out, rep, _ = serve(_at(NOW + 2000, 8_400, 12_000, "over", messages))
    assert rep == {**rep, "pass": "execute", "bust": True, "reason": "usage 70.1% ≥ threshold 65%",
                   "tokens_before": 5295, "tokens_after": 2484, "dropped": 22, "new_drops": 22, "usage_tokens": 8_415,
                   "usage_source": "provider", "pending_drops": 0}
    text = json.dumps(out)
    assert [i for i in range(40) if f"OUT{i} " in text] == list(range(22, 40))
    again, rep, _ = serve(_at(NOW + 3000, 8_400, 12_000, "over", messages))
    assert (rep["dropped"], rep["new_drops"], rep["tokens_after"]) == (22, 0, 2484)
    assert again["messages"] == out["messages"]


def test_a_pass_that_busts_folds_the_eligible_head_on_the_same_bust(isolated_dirs) -> None:
    """The trigger's rule 6 ("rides_bust"): the execute pass above also starts the historian (inline here), so
    the outputs it would drop are folded into a compartment on the same re-write, which names their files
    (in m[1]'s `<session-history-since>`: m[0] is re-rendered on a HARD fold only)."""
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 65\n", encoding="utf-8")
    messages = _tools(40)
    serve(_at(NOW, 1000, 12_000, "rides", messages))
    out, rep, _ = serve(_at(NOW + 2000, 8_400, 12_000, "rides", messages))
    assert (rep["pass"], rep["bust"], rep["historian"]) == ("execute", True, "fired")
    since = json.dumps(out["messages"][1])
    assert "<session-history-since>" in since and "## 0-62 " in since and "f0.py" in since  # folded, named
    assert rep["dropped"] == 0 and rep["tokens_after"] < 2484  # nothing left to drop: less than the drops alone
    again, rep, _ = serve(_at(NOW + 3000, 8_400, 12_000, "rides", messages))
    assert rep["pass"] == "defer" and again["messages"] == out["messages"]


def test_a_pass_over_the_threshold_whose_drops_save_too_little_is_held_until_the_force_band(isolated_dirs,
                                                                                          monkeypatch) -> None:
    """`reclaim.worth_a_bust`: at 70% of a 20 000-token window (65% threshold: 13 000) the 22 droppable outputs
    save ~2 700 tokens, under a quarter of the threshold (3 250), so the pass defers — the previous bytes, no drop
    stored — instead of re-writing the whole request for them; the force band (85%) busts whatever it saves."""
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # 85% starts the historian
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 65\n", encoding="utf-8")
    messages = _tools(40)
    first, _, _ = serve(_at(NOW, 1000, 20_000, "held", messages))
    for now in (NOW + 2000, NOW + 3000):
        out, rep, _ = serve(_at(now, 14_000, 20_000, "held", messages))
        assert (rep["pass"], rep["bust"], rep["reason"], rep["dropped"], rep["new_drops"]) == (
            "defer", False, "defer: a bust would save only 2728 tokens", 0, 0)
        assert out["messages"] == first["messages"]
    out, rep, _ = serve(_at(NOW + 4000, 17_000, 20_000, "held", messages))
    assert (rep["pass"], rep["bust"], rep["reason"], rep["dropped"]) == (
        "execute", True, "usage 85.1% ≥ threshold 65%", 22)
    assert [i for i in range(40) if f"OUT{i} " in json.dumps(out)] == list(range(22, 40))


def test_a_pass_whose_cache_expired_is_never_held_its_drops_are_free(isolated_dirs) -> None:
    """A subagent's pass has no head, so an expired cache is no HARD fold for it; its age drops (12 outputs,
    ~1 600 tokens, under a quarter of the 10 000-token threshold) must still be taken: the provider re-writes the
    whole request after the TTL anyway, so holding them would only postpone them to a bust that costs."""
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("auto_drop_tool_age = 30\n", encoding="utf-8")
    messages = _tools(40)
    serve(dict(_at(NOW, 1000, 20_000, "sub-ttl", messages), agent="subagent"))
    out, rep, _ = serve(dict(_at(NOW + 301_000, 5_000, 20_000, "sub-ttl", messages), agent="subagent"))
    assert (rep["pass"], rep["bust"], rep["reason"], rep["new_drops"]) == ("execute", True, "cache TTL expired", 12)
    assert [i for i in range(40) if f"OUT{i} " in json.dumps(out)] == list(range(12, 40))
    _, rep, _ = serve(dict(_at(NOW + 302_000, 5_000, 20_000, "sub-ttl", messages), agent="subagent"))
    assert (rep["pass"], rep["dropped"], rep["new_drops"]) == ("defer", 12, 0)


def test_a_bust_is_worth_it_from_a_quarter_of_the_threshold_on() -> None:
    from magic_context.transform import reclaim

    assert reclaim.worth_a_bust(2500, 10_000) and reclaim.worth_a_bust(2501, 10_000)
    assert not reclaim.worth_a_bust(2499, 10_000) and not reclaim.worth_a_bust(0, 10_000)


def test_a_window_the_fixed_part_fills_is_an_emergency_with_the_advice_that_works() -> None:
    from magic_context.errors import ContextEmergency

    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "done"},
                {"role": "user", "content": "and now?"}]
    with pytest.raises(ContextEmergency) as caught:
        hook.serve_pass(json.dumps(_at(NOW, 1990, 2000, "e4", messages)).encode(), {})
    assert caught.value.message == "context at 100% of the 2000-token window and nothing could be folded"
    assert caught.value.fix == ("the system prompt, the tool definitions and the newest turn fill it, which mc "
                                "cannot shrink: start a new session or use a model with a larger window")
    _, rep, _ = serve(_at(NOW + 1, 1990, 200_000, "e4", messages))  # the larger window the advice names
    assert rep["pass"] == "fold" and rep["usage_source"] == "provider"


@pytest.mark.parametrize(("messages", "agent", "reason"), [
    ([], "primary", "empty conversation served unchanged"),
    ([U1], "reviewer", "mc disabled for this call"),
])
def test_a_pass_with_nothing_to_do_serves_the_document_unchanged(messages, agent, reason) -> None:
    from magic_context import paths
    from magic_context.transform import pipeline, protocol

    document = {"messages": messages, "harness": "anthropic", "session_id": "idle", "project_dir": "/tmp",
                "now": NOW, "agent": agent}
    result = pipeline.run(protocol.read_input(document, {}))
    assert result.document is document and result.prompt_ordinal is None and result.warnings == []
    assert result.report == {"pass": "defer", "bust": False, "reason": reason, "tokens_before": 0,
                             "tokens_after": 0, "tags": 0, "dropped": 0, "pending_drops": 0, "historian": "idle",
                             "ms": 0.0, "warnings": []}
    assert not os.path.exists(paths.db_file())  # nothing stored, no database created


def test_a_read_only_pass_needs_a_stored_session() -> None:
    from magic_context.errors import StorageBusy
    from magic_context.transform import pipeline, protocol

    serve(envelope([U1], NOW))  # a database exists; the session below does not
    inp = protocol.read_input(dict(envelope([U1], NOW), session_id="never-served"), {})
    with pytest.raises(StorageBusy) as caught:
        pipeline.run(inp, readonly=True)
    assert caught.value.message == "no stored state for this session yet"


def test_a_session_keeps_the_project_it_was_first_seen_in() -> None:
    from magic_context.store import db

    serve(dict(envelope([U1], NOW), session_id="moved", project_dir="/tmp/first"))
    serve(dict(envelope([U1, A2, U2], NOW + 1000), session_id="moved", project_dir="/tmp/second"))
    conn = db.open_db()
    try:
        rows = conn.execute("SELECT project_dir FROM sessions WHERE session_id = 'moved'").fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == ["/tmp/first"]


def test_a_subagent_pass_is_served_with_tags_and_no_head() -> None:
    out, rep, _ = serve(dict(envelope([U1], NOW), session_id="sub", agent="subagent"))
    assert rep["reason"] != "mc disabled for this call" and rep["new_tags"] == 1
    assert out["messages"] == [{"role": "user", "content": "§1§ fix the bug"}]


def test_malformed_input_is_refused_even_when_mc_would_serve_it_unchanged() -> None:
    from magic_context import paths
    from magic_context.errors import BadInput
    from magic_context.transform import pipeline, protocol

    bad = [{"role": "user", "content": 5}]
    for agent in ("reviewer", "primary"):  # disabled for this agent; and the first use, before any database
        document = {"messages": bad, "harness": "anthropic", "session_id": "bad", "project_dir": "/tmp",
                    "now": NOW, "agent": agent}
        with pytest.raises(BadInput, match=r"messages\[0\]"):
            pipeline.run(protocol.read_input(document, {}))
        assert not os.path.exists(paths.db_file())  # exit 2 writes nothing, not even the data dir


def test_a_dry_run_serves_the_pass_and_stores_nothing() -> None:
    from magic_context.store import db, sessions

    served = hook.serve_pass(json.dumps(envelope([U1, A1, R1], NOW)).encode(), {"--dry-run": True})
    assert served.report["new_tags"] == 3 and served.prompt_ordinal is None
    conn = db.open_db()
    try:
        assert sessions.lookup_session(conn, "anthropic", "passes") is None
    finally:
        conn.close()


def test_a_read_only_pass_on_an_old_schema_is_refused_and_migrates_nothing() -> None:
    """Last known good never waits on a migration: an older schema is SchemaOutdated, left as it is."""
    import sqlite3

    from magic_context import paths
    from magic_context.errors import SchemaOutdated
    from magic_context.store import db
    from magic_context.transform import pipeline, protocol

    serve(envelope([U1], NOW))
    conn = sqlite3.connect(paths.db_file())
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION - 1}")
    conn.close()
    with pytest.raises(SchemaOutdated) as caught:
        pipeline.run(protocol.read_input(envelope([U1], NOW + 1000), {}), readonly=True)
    assert caught.value.message == f"database schema version {db.SCHEMA_VERSION - 1} is older than {db.SCHEMA_VERSION}"
    conn = sqlite3.connect(paths.db_file())
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION - 1
    finally:
        conn.close()


def test_an_sqlite_error_during_a_pass_is_a_storage_error_that_names_it() -> None:
    import sqlite3

    from magic_context import paths
    from magic_context.errors import StorageUnavailable
    from magic_context.transform import pipeline, protocol

    serve(envelope([U1], NOW))
    conn = sqlite3.connect(paths.db_file())
    conn.execute("DROP TABLE sessions")
    conn.close()
    with pytest.raises(StorageUnavailable) as caught:
        pipeline.run(protocol.read_input(envelope([U1], NOW + 1000), {}))
    assert caught.value.message == "database error: no such table: sessions"
    assert caught.value.fix == "run `mc doctor` to diagnose"


def _publish(session: str, end: int, harness: str = "anthropic") -> None:
    """A compartment the historian published over ordinals 0..end (as `mc wrapup` or a background run would),
    and a memory of the session's project."""
    from magic_context import project
    from magic_context.memory import engine
    from magic_context.store import compartments, db, sessions

    conn = db.open_db()
    try:
        with db.atomic(conn):
            pk = sessions.lookup_session(conn, harness, session)[0]
            compartments.insert(conn, pk, sequence=1, start=0, end=end, start_message_id=None, end_message_id=None,
                                title="the bug", p1="read a.py, fixed it", p2="", p3="", p4="", content="read a.py",
                                importance=50, episode_type=None, start_time=None, end_time=None, now_ms=NOW)
        engine.add(conn, project.identity("/tmp"), "tests run on real SQLite", "PROJECT_RULES", now_ms=NOW)
    finally:
        conn.close()


def test_published_history_folds_on_the_next_busting_pass_and_stays_folded() -> None:
    """`refold`: a compartment published between passes leaves the served array only on a pass that busts
    anyway (a defer pass replays the frozen watermark), and the new watermark is stored for the passes after."""
    history = [U1, A1, R1, A2, U2]
    first, _, _ = serve(envelope(history, NOW))
    _publish("passes", 2)  # covers U1, A1 and R1
    out, rep, _ = serve(envelope(history, NOW + 1000))
    assert rep["pass"] == "defer" and out["messages"] == first["messages"]  # not folded yet: same bytes

    newer = [*history, {"role": "assistant", "content": "Anything else?"}, {"role": "user", "content": "no"}]
    out, rep, last = serve(envelope(newer, NOW + 2000, system="Be long."))
    assert rep == report("fold", "system prompt changed", before=27, after=117, tags=4, usage=118, new_tags=2,
                         written=2)  # measured before the fold: the usage still counts the folded messages
    assert last == 6
    assert out["messages"][0]["content"][0]["text"] == \
        "<session-history>\n## 0-2 · the bug\nread a.py, fixed it\n</session-history>\n\n" \
        "<project-memory>\n<PROJECT_RULES>\n#1: tests run on real SQLite\n</PROJECT_RULES>\n</project-memory>"
    assert out["messages"][2:] == [{"role": "assistant", "content": "§4§ Fixed it."},
                                   {"role": "user", "content": "§5§ thanks"},
                                   {"role": "assistant", "content": "§6§ Anything else?"},
                                   {"role": "user", "content": "§7§ no"}]
    folded = out

    out, rep, _ = serve(envelope(newer, NOW + 3000, system="Be long."))
    assert rep == report("defer", "defer: within threshold, cache warm", before=27, after=117, tags=4, usage=117)
    assert out["messages"] == folded["messages"]  # the watermark and the new tags were stored
    out, rep, _ = serve(envelope(newer, NOW + 4000, system="Be long.", model="claude-opus-5"))
    assert rep == report("fold", "model changed", before=27, after=117, tags=4, usage=117)  # nothing new to fold
    assert out["messages"] == folded["messages"]

    from pathlib import Path

    from magic_context import paths

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[compaction]\nenabled = false\n")  # turned off: the stored fold no longer applies
    out, rep, _ = serve(envelope(newer, NOW + 5000, system="Be long.", model="claude-opus-5"))
    assert [m["content"] for m in out["messages"][2:4]] == ["fix the bug", A1["content"]]
    assert out["system"] == "Be long."  # no guidance either
    user_file.write_text("")  # on again: the off passes kept the watermark, so the fold (and its bytes) come back
    out, rep, _ = serve(envelope(newer, NOW + 6000, system="Be long.", model="claude-opus-5"))
    assert out["messages"] == folded["messages"]


def test_a_refolding_pass_serves_echoed_tags_as_the_defer_pass_after_it_does() -> None:
    """`refold` tags the already-tagged messages again, so tagging must give the same on stripped text: echoes
    split by a newline (`§4§` then `§9§ ` on the next line) go in one strip, and a part that was only an echo
    keeps its tag (its prefix keeps the block non-empty). Else the refolding pass serves other bytes than the
    defer pass after it (a cache bust on every refold) and an empty text block."""
    echo = {"role": "assistant", "content": [{"type": "text", "text": "§4§\n§9§ Fixed it."},
                                             {"type": "text", "text": "§9§ "}]}
    history = [U1, A1, R1, echo, U2]
    serve(envelope(history, NOW))
    _publish("passes", 2)
    folded, rep, _ = serve(envelope(history, NOW + 1000, system="Be long."))
    assert (rep["pass"], rep["tags"]) == ("fold", 3)
    assert [m["content"] for m in folded["messages"][2:]] == [
        [{"type": "text", "text": "§4§ Fixed it."}, {"type": "text", "text": "§5§ "}], "§6§ thanks"]
    again, rep, _ = serve(envelope(history, NOW + 2000, system="Be long."))
    assert (rep["pass"], rep["tags"]) == ("defer", 3) and again["messages"] == folded["messages"]


def test_a_fold_inside_an_arc_drops_its_result_even_when_a_later_call_reuses_the_tool_id() -> None:
    """`_fold`/`refold`: a compartment that ends between a call and its result folds the call, and the result
    goes with it even if a later call reuses the tool id (that call answers only results after it). Kept, it
    was served as an orphan tool_result (a request the provider refuses) under a tag never stored."""
    again_call = {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "read",
                                                    "input": {"path": "b.py"}}]}
    again_out = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "y = 2"}]}
    history = [U1, A1, R1, A2, U2, again_call, again_out]
    serve(envelope(history, NOW))
    _publish("passes", 1)  # U1 and the call of tu1, not its result
    folded, rep, _ = serve(envelope(history, NOW + 1000, system="Be long."))
    assert rep == report("fold", "system prompt changed", before=46, after=133, tags=3, usage=134)
    assert folded["messages"][2:] == [{"role": "assistant", "content": "§4§ Fixed it."},
                                      {"role": "user", "content": "§5§ thanks"}, again_call,
                                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                                                    "content": "§6§ y = 2"}]}]
    again, rep, _ = serve(envelope(history, NOW + 2000, system="Be long."))
    assert rep == report("defer", "defer: within threshold, cache warm", before=46, after=133, tags=3, usage=133)
    assert again["messages"] == folded["messages"]


def test_with_compaction_off_a_re_rendered_head_holds_the_memories_and_no_history() -> None:
    """`put_head`: the session history goes into m[0] only for a primary pass with compaction on; turned off, a
    pass that renders the head (here the system prompt changed) shows the project's memories alone."""
    from pathlib import Path

    from magic_context import paths

    history = [U1, A1, R1, A2, U2]
    serve(dict(envelope(history, NOW), session_id="off-head"))
    _publish("off-head", 2)
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[compaction]\nenabled = false\n")
    out, rep, _ = serve(dict(envelope(history, NOW + 1000, system="Be long."), session_id="off-head"))
    assert (rep["pass"], out["system"]) == ("fold", "Be long.")
    assert out["messages"][0]["content"][0]["text"] == \
        "<project-memory>\n<PROJECT_RULES>\n#1: tests run on real SQLite\n</PROJECT_RULES>\n</project-memory>"


def test_after_a_fold_the_folded_lead_is_decoded_skimmed_and_an_edit_there_is_still_seen(monkeypatch) -> None:
    """`_decode_and_sync`: once history is folded the next pass decodes the folded lead without its blocks
    (one decode, the skim holds); a harness edit inside that lead makes the raw store refuse the skim, and the
    whole decode then shows the rewrite (a HARD fold), never a stale defer."""

    history = [U1, A1, R1, A2, U2]
    serve(envelope(history, NOW))
    _publish("passes", 2)
    folded, _, _ = serve(envelope(history, NOW + 1000, system="Be long."))  # busts: folds U1, A1, R1
    calls = record_skims(monkeypatch)
    out, rep, _ = serve(envelope(history, NOW + 2000, system="Be long."))
    assert calls == [3] and rep["pass"] == "defer" and out["messages"] == folded["messages"]
    calls.clear()
    edited = [{"role": "user", "content": "fix the other bug"}, A1, R1, A2, U2]
    from magic_context.transform import pipeline, protocol

    lkg = pipeline.run(protocol.read_input(json.loads(json.dumps(envelope(edited, NOW + 2500, system="Be long."))),
                                           {}), readonly=True)
    assert calls == [3, 0] and lkg.report["raw_written"] == 0  # a read-only pass stores not even a failed skim's edit
    calls.clear()
    _, rep, _ = serve(envelope(edited, NOW + 3000, system="Be long."))
    assert calls == [3, 0]  # the skim did not hold: decoded again, whole
    assert (rep["pass"], rep["reason"], rep["raw_written"]) == ("fold", "history rewritten by the harness (edited)", 1)


def test_a_read_only_pass_writes_no_raw_history() -> None:
    """Last known good replays what is stored: a message it has not seen is served raw and never stored."""
    from magic_context.store import db
    from magic_context.transform import pipeline, protocol

    serve(envelope([U1], NOW))
    document = json.loads(json.dumps(envelope([U1, A2], NOW + 1000)))  # a copy: the pass edits it in place
    result = pipeline.run(protocol.read_input(document, {}), readonly=True)
    assert result.report["raw_written"] == 0 and result.prompt_ordinal is None and result.warnings == []
    assert result.document["messages"][-1] == {"role": "assistant", "content": "Fixed it."}  # no tag: raw
    conn = db.open_db()
    try:
        assert conn.execute("SELECT count(*) FROM raw_messages").fetchone()[0] == 1
    finally:
        conn.close()


def test_a_refolding_pass_runs_every_lane_on_the_refolded_tags() -> None:
    """`refold` hands the drop lanes the refolded view whole: a queued ctx_reduce drop lands by its tag number,
    a new oversized paste is previewed and stored as a drop, the age lane and the reclaim see the newest tag;
    the next pass serves the same bytes."""
    from magic_context.store import db, pending, sessions

    messages = _tools(40)
    serve(_at(NOW, 1000, 100_000, "lanes", messages))
    _publish("lanes", 10)  # start and the first five tool arcs
    conn = db.open_db()
    try:
        pending.queue(conn, sessions.lookup_session(conn, "anthropic", "lanes")[0], [30], forced=True, now_ms=NOW)
    finally:
        conn.close()
    more = [*messages, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "PASTE " + "word " * 10_100}]  # over a tenth of the window: a preview
    out, rep, _ = serve(_at(NOW + 2000, 60_000, 100_000, "lanes", more))
    assert rep == {**rep, "pass": "execute", "reason": "usage 64.1% ≥ threshold 40%", "tokens_before": 14741,
                   "tokens_after": 6328, "tags": 39, "dropped": 20, "new_drops": 20, "pending_drops": 0,
                   "new_tags": 2, "historian": "idle", "warnings": []}
    text = json.dumps(out)
    assert [i for i in range(40) if f"OUT{i} " in text] == [*range(23, 28), *range(29, 40)]  # tag 30 is OUT28
    assert out["messages"][1]["content"][0]["text"].startswith(
        "<session-history-since>\n<new-compartments>\n## 0-10 · the bug\n")
    assert out["messages"][-1]["content"].startswith("[preview §45§: 1 lines, ~10,102 tokens")
    again, rep, _ = serve(_at(NOW + 3000, 60_000, 100_000, "lanes", more))  # nothing left to drop: held
    assert (rep["pass"], rep["reason"], rep["dropped"], rep["new_drops"]) == (
        "defer", "defer: a bust would save only 0 tokens", 20, 0)
    assert again["messages"] == out["messages"]


def test_a_pass_records_the_model_and_window_and_the_date_stays_frozen_until_a_bust() -> None:
    """The session row keeps the model and window the last pass ran under (`mc status`); the guidance's date
    line is stored with the pass, so a defer pass after midnight serves yesterday's date (the same bytes) and
    only the next bust moves it."""
    from magic_context.store import db

    midnight = 1_764_028_800_000  # 2025-11-25 00:00 UTC
    out, _, _ = serve(dict(envelope([U1], midnight - 60_000), session_id="dated"))
    assert out["system"].endswith("Today's date: 2025-11-24")
    conn = db.open_db()
    try:
        row = conn.execute("SELECT model_key, context_limit FROM sessions WHERE session_id = 'dated'").fetchone()
    finally:
        conn.close()
    assert tuple(row) == ("anthropic/claude-sonnet-4-5", 200_000)
    again, rep, _ = serve(dict(envelope([U1], midnight + 60_000), session_id="dated"))
    assert rep["pass"] == "defer" and again["system"] == out["system"]
    moved, rep, _ = serve(dict(envelope([U1], midnight + 120_000, model="claude-opus-5"), session_id="dated"))
    assert rep["pass"] == "fold" and moved["system"].endswith("Today's date: 2025-11-25")


def test_the_head_keeps_its_first_time_after_the_messages_it_took_it_from_are_folded() -> None:
    """Pi serves the head with a timestamp: the first message's time, stored with the pass (`head_created_at`),
    so a fold that removes that message leaves the head's bytes as they were."""
    t0 = NOW - 60_000
    history = [{"role": "user", "content": "fix the bug", "timestamp": t0},
               {"role": "assistant", "content": [{"type": "text", "text": "Fixed it."}], "timestamp": t0 + 1000},
               {"role": "user", "content": "thanks", "timestamp": t0 + 2000}]
    document = {"messages": history, "harness": "pi", "session_id": "timed", "project_dir": "/tmp", "now": NOW,
                "model": {"provider": "anthropic", "id": "claude-sonnet-4-5"}}
    out, _, _ = serve(document)
    assert [m["timestamp"] for m in out["messages"]] == [t0, t0, t0, t0 + 1000, t0 + 2000]
    _publish("timed", 1, harness="pi")
    out, rep, _ = serve(dict(document, now=NOW + 1000, model={"provider": "anthropic", "id": "claude-opus-5"}))
    assert rep["reason"] == "model changed" and len(out["messages"]) == 3  # the head and "thanks"
    assert [m["timestamp"] for m in out["messages"]] == [t0, t0, t0 + 2000]
    serve(dict(document, now=NOW + 1500, agent="subagent"))  # no head of its own: it leaves the stored time
    out, rep, _ = serve(dict(document, now=NOW + 2000, model={"provider": "anthropic", "id": "claude-opus-5"}))
    assert rep["pass"] == "defer" and [m["timestamp"] for m in out["messages"]] == [t0, t0, t0 + 2000]


def _stored(session: str) -> tuple[dict, tuple, list]:
    """A session's stored state (key → (value, updated_at)), its row's (tag counter, updated_at, model, window)
    and its pass reports (at, kind, bust, reason, before, after)."""
    from magic_context.store import db, sessions
    from magic_context.store import state as state_store

    conn = db.open_db()
    try:
        pk = sessions.lookup_session(conn, "anthropic", session)[0]
        values = state_store.load_state(conn, pk)
        at = dict(conn.execute("SELECT key, updated_at FROM session_state WHERE session_pk = ?", (pk,)).fetchall())
        row = conn.execute("SELECT tag_counter, updated_at, model_key, context_limit FROM sessions WHERE id = ?",
                           (pk,)).fetchone()
        reports = conn.execute("SELECT at, pass_kind, bust, reason, tokens_before, tokens_after FROM pass_reports "
                               "WHERE session_pk = ? ORDER BY id", (pk,)).fetchall()
    finally:
        conn.close()
    return {k: (v, at[k]) for k, v in values.items()}, tuple(row), [tuple(r) for r in reports]


def test_a_pass_stores_its_state_session_row_and_report_at_its_time(monkeypatch) -> None:
    """`persist`: every key a pass keeps, each written at the pass's time, the session row and the report;
    the reports are pruned to the newest MAX_REPORTS_PER_SESSION."""
    from magic_context.transform import pass_serve

    serve(dict(envelope([U1, A1, R1], NOW), session_id="kept"))
    state, row, reports = _stored("kept")
    meta = {"max_sequence": -1, "max_memory_id": 0, "memory_ids": [], "memory_cursor": 0,
            "model_key": "anthropic/claude-sonnet-4-5", "system_hash": "1dc69e447c17301c", "materialized_at": NOW,
            "settings": {"compaction.enabled": True, "memory.enabled": True}}
    m1 = "<session-history-since>(no new content since last materialization)</session-history-since>"
    values = {"date": "Today's date: 2025-11-24", "fold_through": -1, "last_pass_at": NOW,
              "m0": "<session-history></session-history>", "m0_meta": meta, "m0_tokens": 9, "m1": m1,
              "m1_tokens": 21, "nudge_state": {}, "nudges": [], "reasoning_tokens": {}, "skim_hint": 0,
              "stripped_reasoning": [], "visible_memory_ids": []}
    assert state == {k: (v, NOW) for k, v in values.items()}
    assert row == (3, NOW, "anthropic/claude-sonnet-4-5", 200_000)
    assert reports == [(NOW, "fold", 1, "first render", 43, 82)]

    monkeypatch.setattr(pass_serve, "MAX_REPORTS_PER_SESSION", 1)
    serve(dict(envelope([U1, A1, R1, A2, U2], NOW + 1000), session_id="kept"))
    state, row, reports = _stored("kept")
    assert state["last_pass_at"] == (NOW + 1000, NOW + 1000) and state["m0"] == (values["m0"], NOW)  # unchanged
    assert row == (5, NOW + 1000, "anthropic/claude-sonnet-4-5", 200_000)
    assert reports == [(NOW + 1000, "defer", 0, "defer: within threshold, cache warm", 55, 100)]


def test_guidance_is_the_plain_block_without_ctx_reduce_and_is_left_out_when_skipped_or_turned_off() -> None:
    """`add_guidance`: a tool list without ctx_reduce gets the plain block; a system prompt carrying a skip
    signature gets none; the user's config can turn the injection off in every harness's slot."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.transform import guidance

    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="plain", tools=tools))
    assert out["system"] == "Be brief.\n\n" + guidance.PLAIN_GUIDANCE + "\nToday's date: 2025-11-24"
    assert out["messages"][2]["content"] == "fix the bug"  # no ctx_reduce: no tag prefixes to name parts by
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="reduce"))
    assert out["system"] == "Be brief.\n\n" + guidance.REDUCE_GUIDANCE + "\nToday's date: 2025-11-24"
    skip = "Be brief. <!-- magic-context: skip -->"
    out, _, _ = serve(dict(envelope([U1], NOW, system=skip), session_id="skip"))
    assert out["system"] == skip

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text('[system_prompt_injection]\nskip_signatures = ["brief"]\n')
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="mine"))
    assert out["system"] == "Be brief."
    out, _, _ = serve(dict(envelope([U1], NOW, system="Be long."), session_id="mine2"))
    assert out["system"].startswith("Be long." + GUIDANCE)

    user_file.write_text("[system_prompt_injection]\nenabled = false\n")
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="off"))
    assert out["system"] == "Be brief." and out["messages"][2]["content"] == "§1§ fix the bug"
    blocks = [{"type": "text", "text": "P"}]
    claude = first_pass({"model": "claude-x", "max_tokens": 5, "messages": [U1], "system": blocks}, "off-blocks")
    assert claude["system"] == blocks
    chat = first_pass({"model": "gpt-4o", "messages": [{"role": "system", "content": "Sys A"}, U1]}, "off-chat")
    assert chat["messages"][0] == {"role": "system", "content": "Sys A"}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    dev = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev"}]}
    inst = first_pass({"model": "gpt-5", "instructions": "Inst", "input": [dev, user]}, "off-inst")
    assert inst["instructions"] == "Inst" and inst["input"][0] == dev


def _compartment(session: str, sequence: int, start: int, end: int, p1: str) -> None:
    from magic_context.store import compartments, db, sessions

    conn = db.open_db()
    try:
        with db.atomic(conn):
            pk = sessions.lookup_session(conn, "anthropic", session)[0]
            compartments.insert(conn, pk, sequence=sequence, start=start, end=end, start_message_id=None,
                                end_message_id=None, title=f"part {sequence}", p1=p1, p2="", p3="", p4="",
                                content=p1, importance=50, episode_type=None, start_time=None, end_time=None,
                                now_ms=NOW)
    finally:
        conn.close()


def test_a_busting_pass_shows_new_history_in_m1_until_it_outgrows_its_share_then_folds_it_into_m0(monkeypatch) -> None:
    """`put_head`: on a busting pass that is not a HARD fold a new compartment goes into m[1] and m[0] is replayed;
    once m[1] is above a fifth of the history budget (10% of the window) the pass folds it into m[0] instead."""
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # only the compartments written below
    messages = _tools(40)
    first, _, _ = serve(_at(NOW, 1000, 20_000, "m1", messages))
    _compartment("m1", 1, 0, 2, "short summary")
    out, rep, _ = serve(_at(NOW + 2000, 14_000, 20_000, "m1", messages))
    assert (rep["pass"], rep["reason"]) == ("execute", "usage 70.1% ≥ threshold 50%")
    assert out["messages"][0] == first["messages"][0]
    assert out["messages"][1]["content"][0]["text"] == \
        "<session-history-since>\n<new-compartments>\n## 0-2 · part 1\nshort summary\n</new-compartments>\n" \
        "</session-history-since>"
    long = "long summary " * 200
    _compartment("m1", 2, 3, 4, long)
    out, rep, _ = serve(_at(NOW + 4000, 14_000, 20_000, "m1", messages))
    assert (rep["pass"], rep["reason"]) == ("fold", "m[1] pressure backstop")
    assert [msg["content"][0]["text"] for msg in out["messages"][:2]] == [
        f"<session-history>\n## 0-2 · part 1\nshort summary\n\n## 3-4 · part 2\n{long.strip()}\n</session-history>",
        "<session-history-since>(no new content since last materialization)</session-history-since>"]


def test_the_threshold_is_the_configs_per_model_a_token_figure_wins_and_a_project_file_only_raises_it(tmp_path) -> None:
    """`measure`: the execute threshold a pass reports: the harness default (40% here; an autonomous caller's in a
    small window is lower), a project file's value only above it, the user's per-model value (else its default)
    even below it, a token threshold over either (by "provider/id" or the bare id, like every per-model map);
    and the cache TTL the user sets decides when a warm pass turns into a HARD fold."""
    from pathlib import Path

    from magic_context import paths

    def threshold(session: str, model: str = "claude-sonnet-4-5") -> float:
        document = dict(envelope([U1], NOW, model=model), session_id=session, project_dir=str(tmp_path))
        return serve(document)[1]["threshold_percent"]

    project_file = tmp_path / ".magic-context.toml"
    project_file.write_text("execute_threshold_percentage = 30\n")
    assert threshold("p30") == 40.0
    project_file.write_text("execute_threshold_percentage = 60\n")
    assert threshold("p60") == 60.0
    small = dict(_at(NOW, 100, 12_000, "small", [U1]), project_dir=str(tmp_path))
    assert serve(small)[1]["threshold_percent"] == 65.0  # a 12 000-token window's default is above 60
    project_file.unlink()
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text('execute_threshold_percentage = { default = 30, "claude-sonnet-4-5" = 25 }\n')
    assert (threshold("u1"), threshold("u2", "claude-opus-5")) == (25.0, 30.0)
    user_file.write_text('execute_threshold_tokens = { default = 50000, "anthropic/claude-sonnet-4-5" = 60000 }\n')
    assert (threshold("t1"), threshold("t2", "claude-opus-5")) == (30.0, 25.0)
    user_file.write_text('execute_threshold_percentage = { "claude-sonnet-4-5" = 25 }\n')  # no default entry
    assert (threshold("u3"), threshold("u4", "claude-opus-5")) == (25.0, 40.0)
    user_file.write_text('execute_threshold_tokens = { "claude-sonnet-4-5" = 60000 }\n')  # by the bare id, as
    assert (threshold("t3"), threshold("t4", "claude-opus-5")) == (30.0, 40.0)  # every per-model map
    chat = dict(_at(NOW, 100, 12_000, "chat-small", [{"role": "user", "content": "hi"}]), harness="openai",
                model={"provider": "openai", "id": "gpt-4o", "context_limit": 12_000})
    assert serve(chat)[1]["threshold_percent"] == 54.2  # an autonomous caller's floor: 6 500 tokens

    user_file.write_text('cache_ttl = "10s"\n')
    serve(dict(envelope([U1], NOW), session_id="ttl"))
    assert serve(dict(envelope([U1], NOW + 9_000), session_id="ttl"))[1]["pass"] == "defer"
    assert serve(dict(envelope([U1], NOW + 20_000), session_id="ttl"))[1]["reason"] == "cache TTL expired"


def test_a_user_message_after_a_gap_gets_a_time_marker_unless_temporal_awareness_or_compaction_is_off() -> None:
    """`apply`: the temporal markers go in front of a user message that follows a pause; the user's config can
    turn them off, and with compaction off nothing is marked (nor tagged)."""
    from pathlib import Path

    from magic_context import paths

    t0 = NOW - 3_600_000
    history = [{"role": "user", "content": "fix the bug", "timestamp": t0},
               {"role": "assistant", "content": [{"type": "text", "text": "Fixed it."}], "timestamp": t0 + 1000},
               {"role": "user", "content": "thanks", "timestamp": t0 + 601_000}]

    def last(session: str) -> object:
        document = {"messages": history, "harness": "pi", "session_id": session, "project_dir": "/tmp", "now": NOW,
                    "model": {"provider": "anthropic", "id": "claude-sonnet-4-5"}}
        return serve(document)[0]["messages"][-1]["content"]

    assert last("marked") == "<!-- +10m -->\n§3§ thanks"
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("temporal_awareness = false\n")
    assert last("unmarked") == "§3§ thanks"
    user_file.write_text("[compaction]\nenabled = false\n")
    assert last("off") == "thanks"


def test_a_read_only_pass_never_busts_and_a_running_historian_holds_back_the_drops() -> None:
    """`schedule`: last known good replays the stored head even when the model changed (no HARD fold, no bust);
    a pass over the threshold while a historian run holds the lease busts but leaves the drops to after it,
    unless it is a HARD fold."""
    from magic_context.store import db, leases, sessions
    from magic_context.transform import pipeline, protocol

    first, _, _ = serve(envelope([U1, A1, R1], NOW))
    document = json.loads(json.dumps(envelope([U1, A1, R1], NOW + 1000, model="claude-opus-5")))  # edited in place
    lkg = pipeline.run(protocol.read_input(document, {}), readonly=True)
    assert (lkg.report["pass"], lkg.report["bust"], lkg.report["reason"]) == \
        ("defer", False, "defer: within threshold, cache warm")
    assert lkg.document["messages"] == first["messages"]

    messages = _tools(40)
    serve(_at(NOW, 1000, 20_000, "held", messages))
    conn = db.open_db()
    try:
        pk = sessions.lookup_session(conn, "anthropic", "held")[0]
        assert leases.acquire(conn, leases.historian_lease(pk), "run", NOW, 3_600_000, pid=os.getpid())
    finally:
        conn.close()
    _, rep, _ = serve(_at(NOW + 2000, 14_000, 20_000, "held", messages))
    assert (rep["pass"], rep["historian"], rep["dropped"], rep["new_drops"]) == ("execute", "running", 0, 0)
    lkg = pipeline.run(protocol.read_input(_at(NOW + 3000, 14_000, 20_000, "held", messages), {}), readonly=True)
    assert (lkg.report["pass"], lkg.report["bust"], lkg.report["reason"]) == \
        ("defer", False, "defer: usage 70.1% ≥ threshold 50%")  # over the threshold, but read only
    opus = {"provider": "anthropic", "id": "claude-opus-5", "context_limit": 20_000}
    moved = dict(_at(NOW + 4000, 14_000, 20_000, "held", messages), model=opus)
    _, rep, _ = serve(moved)  # a HARD fold re-renders the head anyway: the drops land though the historian runs
    assert (rep["pass"], rep["historian"], rep["dropped"], rep["new_drops"]) == ("fold", "running", 23, 23)


def test_a_full_window_is_an_emergency_only_for_a_primary_pass_with_the_providers_figure_in_a_known_window() -> None:
    """`decide`'s exit 4 needs all of: the block band, a window the caller or the model table gave, the
    provider's own usage, a primary agent; otherwise the pass is served and the next one corrects it."""
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "done"},
                {"role": "user", "content": "and now?"}]
    _, rep, _ = serve(dict(_at(NOW, 1990, 2000, "e-sub", messages), agent="subagent"))
    assert (rep["pass"], rep["usage_source"], rep["context_limit"]) == ("execute", "provider", 2000)
    unknown = dict(_at(NOW, 195_000, 2000, "e-unknown", messages), model={"provider": "acme", "id": "mystery"})
    _, rep, _ = serve(unknown)
    assert (rep["usage_tokens"], rep["usage_source"], rep["context_limit"]) == (195_017, "provider", 200_000)
    estimated = dict(_at(NOW, 1990, 2000, "e-est", messages))
    del estimated["usage"]
    estimated["messages"] = [{"role": "user", "content": "word " * 2000}]
    _, rep, _ = serve(estimated)
    assert (rep["usage_source"], rep["context_limit"]) == ("estimate", 2000) and rep["usage_tokens"] > 1900


def test_the_users_lane_settings_reach_a_busting_pass() -> None:
    """`decide` reads the lanes' settings: `smart_drops` (opt-in) removes superseded todo lists, and a short
    `auto_drop_tool_age` drops old tool outputs, both already on the first render (a HARD fold busts), where the
    defaults drop nothing; the protected newest 20 tags stay."""
    from pathlib import Path

    from magic_context import paths

    def todos(n: int) -> list:
        messages: list = [{"role": "user", "content": "start"}]
        for i in range(n):
            messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "todowrite",
                                                            "input": {"todos": f"step {i}"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                       "content": f"TODO{i} " + "word " * 100}]}]
        return [*messages, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]

    def first_render(session: str) -> tuple:
        out, rep, _ = serve(_at(NOW, 1000, 100_000, session, todos(40)))
        text = json.dumps(out)
        return rep["pass"], rep["dropped"], rep["new_drops"], [i for i in range(40) if f"TODO{i} " in text]

    assert first_render("lanes-off") == ("fold", 0, 0, list(range(40)))
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("smart_drops = true\n")
    assert first_render("lanes-smart") == ("fold", 22, 22, list(range(22, 40)))
    user_file.write_text("auto_drop_tool_age = 30\n")
    assert first_render("lanes-aged") == ("fold", 12, 12, list(range(12, 40)))


def test_the_preview_cap_is_a_tenth_of_the_window_the_caller_or_the_model_table_gives() -> None:
    """`view` sizes the oversized-content cap from the request's window: the caller's figure first, else the
    model's (gpt-4o: 128 000, so 12 800), else 200 000."""
    paste = {"role": "user", "content": "PASTE " + "word " * 15_000}
    limits = {"gpt-4o": 128_000, "mystery": 200_000}  # the report's window is the same one (`measure`)

    def previewed(document: dict) -> bool:
        out, rep, _ = serve(document)
        assert rep["dropped"] == rep["new_drops"] == int(out["messages"][-1]["content"].startswith("[preview §1§"))
        assert rep["context_limit"] == document["model"].get("context_limit", limits.get(document["model"]["id"]))
        return rep["dropped"] == 1

    gpt = dict(envelope([paste], NOW), session_id="cap-gpt", model={"provider": "openai", "id": "gpt-4o"})
    assert previewed(gpt)
    assert not previewed(dict(gpt, session_id="cap-default", model={"provider": "acme", "id": "mystery"}))
    big = dict(_at(NOW, 1000, 300_000, "cap-given", [{"role": "user", "content": "PASTE " + "word " * 25_000}]))
    assert not previewed(big)  # 25 000 is below a tenth of the given 300 000 (the table's 200 000 would preview)


def test_the_providers_usage_counts_a_previewed_paste_after_it_at_its_previews_size() -> None:
    """`measure`: what came after the provider's last usage is counted as served: an oversized paste shown as
    a preview (new on this pass, or stored on an earlier one) adds the preview's tokens, not the paste's; a
    message after the reply that nothing cut adds its own."""
    paste = {"role": "user", "content": "PASTE " + "word " * 10_100}
    history = [U1, A2, U2, paste]
    _, rep, _ = serve(_at(NOW, 1000, 100_000, "shown", history))
    assert (rep["dropped"], rep["usage_source"]) == (1, "provider")
    assert rep["usage_tokens"] == 5079  # 1 000 + 10 output + "thanks" (5) + the preview's 4 064 (not 10 102)
    _, rep, _ = serve(_at(NOW + 1000, 1000, 100_000, "shown", history))
    assert (rep["dropped"], rep["new_drops"], rep["usage_tokens"]) == (1, 0, 5079)


def test_the_head_shows_the_projects_memories_unless_memory_is_turned_off() -> None:
    """`put_head`: m[0] carries the project's memories valid at the pass's time; the user's `memory.enabled = false`
    leaves them out."""
    from pathlib import Path

    from magic_context import paths, project
    from magic_context.memory import engine
    from magic_context.store import db

    conn = db.open_db()
    try:
        with db.atomic(conn):
            engine.add(conn, project.identity("/tmp"), "tests run on real SQLite", "PROJECT_RULES", now_ms=NOW - 1)
            engine.add(conn, project.identity("/tmp"), "the old build is used", "PROJECT_RULES", now_ms=NOW - 1)
            conn.execute("UPDATE memories SET expires_at = ? WHERE id = 1", (NOW + 1,))  # still valid at the pass
            conn.execute("UPDATE memories SET expires_at = ? WHERE id = 2", (NOW,))  # expired at the pass's time
    finally:
        conn.close()
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="remembers"))
    assert out["messages"][0]["content"][0]["text"] == "<session-history></session-history>\n\n<project-memory>\n" \
        "<PROJECT_RULES>\n#1: tests run on real SQLite\n</PROJECT_RULES>\n</project-memory>"
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[memory]\nenabled = false\n")
    out, _, _ = serve(dict(envelope([U1], NOW), session_id="forgets"))
    assert out["messages"][0]["content"][0]["text"] == "<session-history></session-history>"


def test_a_subagent_pass_on_a_folded_session_is_served_its_whole_history() -> None:
    """`view` folds only for a primary agent: a subagent gets no head, so the history the head summarizes
    stays in its array (tagged); its pass stores no fold watermark of its own."""
    history = [U1, A1, R1, A2, U2]
    serve(envelope(history, NOW))
    _publish("passes", 2)
    folded, _, _ = serve(envelope(history, NOW + 1000, system="Be long."))
    assert folded["messages"][2]["content"] == "§4§ Fixed it."
    head_sizes = {k: _stored("passes")[0][k] for k in ("m0_tokens", "m1_tokens")}
    sub, rep, _ = serve(dict(envelope(history, NOW + 1500, system="Be long."), agent="subagent"))
    assert {k: _stored("passes")[0][k] for k in ("m0_tokens", "m1_tokens")} == head_sizes  # no head of its own
    assert [m["content"] for m in sub["messages"][:2]] == ["§1§ fix the bug", [
        {"type": "text", "text": "§2§ Reading."}, A1["content"][1]]]
    assert (rep["tags"], rep["tokens_before"]) == (5, 55)

    # the subagent's pass (same session id) leaves the primary's fold alone: the next primary defer pass
    # replays the folded bytes (re-serving the folded messages would bust the cache and show history twice)
    again, rep, _ = serve(envelope(history, NOW + 2000, system="Be long."))
    assert rep["pass"] == "defer"
    assert again["messages"] == folded["messages"]


def test_old_reasoning_is_stripped_on_a_busting_pass_and_its_size_is_kept_with_the_pass() -> None:
    """`decide` strips reasoning older than `clear_reasoning_age` tags (outside the protected 20); the pass
    stores which messages lost it and their reasoning's tokens (the served size without re-reading them), and a
    defer pass replays the strip."""
    from pathlib import Path

    from magic_context import paths

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("clear_reasoning_age = 1\n")
    think = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm " * 50, "signature": "sig"},
                                              {"type": "text", "text": "Done."}]}
    turns = [x for i in range(15) for x in ({"role": "user", "content": f"q{i}"}, {"role": "assistant",
                                                                                   "content": f"a{i}"})]
    out, rep, _ = serve(dict(envelope([U1, think, *turns, U2], NOW), session_id="think"))
    assert out["messages"][3]["content"] == [{"type": "text", "text": "§2§ Done."}]
    assert (rep["tokens_before"], rep["tokens_after"]) == (251, 330)
    state, _, _ = _stored("think")
    (stripped,), at = state["stripped_reasoning"]
    assert state["reasoning_tokens"] == ({stripped: 50}, at)
    again, rep, _ = serve(dict(envelope([U1, think, *turns, U2], NOW + 1000), session_id="think"))
    assert (rep["pass"], rep["tokens_before"], rep["tokens_after"]) == ("defer", 251, 330)
    assert again["messages"] == out["messages"]  # a defer pass replays the stored strip
    user_file.write_text("clear_reasoning_age = 1000\n")  # a busting pass never undoes a strip
    kept, rep, _ = serve(dict(envelope([U1, think, *turns, U2], NOW + 1500, model="claude-opus-5"), session_id="think"))
    assert rep["pass"] == "fold" and kept["messages"][3]["content"] == [{"type": "text", "text": "§2§ Done."}]
    user_file.write_text("clear_reasoning_age = 1\n[compaction]\nenabled = false\n")
    whole, _, _ = serve(dict(envelope([U1, think, *turns, U2], NOW + 2000, model="claude-opus-5"), session_id="think"))
    assert whole["messages"][-len(turns) - 2]["content"] == think["content"]  # compaction off: served as sent


def test_the_skim_follows_a_watermark_of_zero_and_is_never_tried_without_a_watermark(monkeypatch) -> None:
    """`view`'s skim: a fold through ordinal 0 (one message) is skimmed on the next pass; once compaction is
    off the stored hint is not read at all (the raw store would refuse it, costing a second decode)."""
    from pathlib import Path

    from magic_context import paths

    history = [U1, A2, U2]
    serve(dict(envelope(history, NOW), session_id="skim0"))
    _publish("skim0", 0)
    folded, _, _ = serve(dict(envelope(history, NOW + 1000, system="Be long."), session_id="skim0"))
    assert [m["content"] for m in folded["messages"][2:]] == ["§2§ Fixed it.", "§3§ thanks"]
    calls = record_skims(monkeypatch)
    out, _, _ = serve(dict(envelope(history, NOW + 2000, system="Be long."), session_id="skim0"))
    assert calls == [1] and out["messages"] == folded["messages"]
    calls.clear()
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[compaction]\nenabled = false\n")
    out, _, _ = serve(dict(envelope(history, NOW + 3000, system="Be long."), session_id="skim0"))
    assert calls == [0] and out["messages"][2]["content"] == "fix the bug"


def test_a_system_prompt_with_a_lone_surrogate_is_identified_with_a_replacement_character() -> None:
    """`measure`: the stdlib JSON reader (used when orjson is missing) lets a lone surrogate through; the system
    prompt's hash is taken over its UTF-8 with `?` in its place, so the pass is served and the next one defers."""
    from magic_context.transform import pipeline, protocol
    from magic_context.wire import identity

    def run(now: int) -> dict:
        document = dict(envelope([U1], now, system="Be \ud800brief."), session_id="lone")
        result = pipeline.run(protocol.read_input(json.loads(json.dumps(document)), {}))  # a copy: tagged in place
        return {k: v for k, v in result.report.items() if k != "ms"}

    assert run(NOW) == report("fold", "first render", before=11, after=44, tags=1, usage=14, new_tags=1, written=1)
    state, _, _ = _stored("lone")
    assert state["m0_meta"][0]["system_hash"] == identity.digest(b"Be ?brief.", 8)
    assert run(NOW + 1000) == report("defer", "defer: within threshold, cache warm", before=11, after=44, tags=1,
                                     usage=44)


def test_the_historian_starts_only_on_a_written_primary_pass_with_compaction_on(monkeypatch) -> None:
    """`schedule`: the historian (here its trigger fires at 85% of a 20 000-token window) is started by a
    primary pass that stores its work (detached, as live, with the configured timeout); a subagent's, a dry
    run's, a compaction-off and a read-only pass report it idle and start nothing."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.history import runner
    from magic_context.transform import pipeline, protocol

    started: list = []
    monkeypatch.setattr(runner, "run_once", lambda conn, pk, **kw: started.append((pk, kw)))
    messages = _tools(40)

    def historian(session: str, options: dict | None = None, **extra) -> str:
        document = dict(_at(NOW, 17_000, 20_000, session, messages), **extra)
        return hook.serve_pass(json.dumps(document).encode(), options or {}).report["historian"]

    assert historian("h-sub", agent="subagent") == "idle"
    assert historian("h-dry", {"--dry-run": True}) == "idle"
    assert started == []
    assert historian("h-primary") == "fired"
    assert started == [(2, {"emergency": True, "now_ms": NOW})]  # the second session row: the dry run stored none
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "")  # detached, as live: with the configured timeout
    monkeypatch.setattr(runner, "launch_background", lambda conn, pk, **kw: started.append((pk, kw)) or True)
    assert historian("h-detached") == "fired"
    assert started.pop() == (3, {"session_id": "h-detached", "harness": "anthropic", "now_ms": NOW,
                                 "timeout_ms": 300_000})
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "inline")
    lkg = pipeline.run(protocol.read_input(_at(NOW + 1000, 17_000, 20_000, "h-primary", messages), {}), readonly=True)
    assert lkg.report["historian"] == "idle" and len(started) == 1
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[compaction]\nenabled = false\n")
    assert historian("h-off") == "idle" and len(started) == 1


def test_a_per_model_cache_ttl_decides_when_a_warm_pass_turns_into_a_hard_fold() -> None:
    """`measure` reads `cache_ttl` for the request's model: a model's own entry over the default."""
    from pathlib import Path

    from magic_context import paths

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text('cache_ttl = { default = "1h", "claude-sonnet-4-5" = "10s" }\n')
    for session, model in (("ttl-short", "claude-sonnet-4-5"), ("ttl-long", "claude-opus-5")):
        serve(dict(envelope([U1], NOW, model=model), session_id=session))
    assert serve(dict(envelope([U1], NOW + 20_000), session_id="ttl-short"))[1]["reason"] == "cache TTL expired"
    assert serve(dict(envelope([U1], NOW + 20_000, model="claude-opus-5"), session_id="ttl-long"))[1]["reason"] == \
        "defer: within threshold, cache warm"


def test_a_rewritten_tool_result_keeps_the_tag_of_its_call_even_when_it_is_the_sessions_only_tag() -> None:
    """`view`: the harness rewrote a tool's output (a new message id, so its stored row is not among the
    request's messages): the tag is fetched by its call's part key whenever the session has any tag, here
    exactly one, and the rewritten output is served under the same number, no new tag."""
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "read",
                                              "input": {"path": "a.py"}}]}
    out, rep, _ = serve(dict(envelope([call, R1], NOW), session_id="rewritten"))
    assert rep == report("fold", "first render", before=34, after=67, tags=1, usage=37, new_tags=1, written=2)
    rewritten = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "x = 2"}]}
    out, rep, _ = serve(dict(envelope([call, rewritten], NOW + 1000), session_id="rewritten"))
    assert rep == report("fold", "history rewritten by the harness (forked)", before=34, after=67, tags=1, usage=67,
                         written=1)
    assert out["messages"][2:] == [call, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                                                       "content": "§1§ x = 2"}]}]


def _spent(n: int) -> list:
    """n read arcs of 800 distinct words each (~3 400 tokens), then a short turn: nudge-sized tool outputs."""
    messages: list = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read",
                                                        "input": {"path": f"f{i}.py"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                   "content": " ".join(f"w{i}x{j}" for j in range(800))}]}]
    return [*messages, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]


def test_a_fired_nudge_is_stored_and_counted_in_the_served_size_of_the_passes_after_it(monkeypatch) -> None:
    """`apply` fires the ctx_reduce nudge (12 spent outputs, ~40k tokens, outside the protected 20) onto the
    newest message and stores it; `measure` counts the stored nudge's tokens in what the next pass serves."""
    from magic_context import tokens
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # the 100k-token tail starts the historian
    messages = _spent(30)
    nudge = ("\n\n<system-reminder>\nHousekeeping: 12 spent tool outputs (~40k tokens) are reclaimable — drop the "
             "ones you have already processed with ctx_reduce at a natural stopping point.\noldest reclaimable: "
             "§2§ read · §3§ read · §4§ read · §5§ read · …\n</system-reminder>")
    out, rep, _ = serve(_at(NOW, 1000, 200_000, "nudged", messages))
    assert (rep["pass"], rep["tokens_before"], rep["tokens_after"]) == ("fold", 102_455, 102_584)
    assert out["messages"][-1]["content"] == "§33§ next" + nudge
    state, _, _ = _stored("nudged")
    assert state["nudges"][0] == [{"key": "h4b95f2d9d10f6cc978661243:p0", "text": nudge}]
    again, rep, _ = serve(_at(NOW + 1000, 1000, 200_000, "nudged", messages))
    assert (rep["pass"], rep["tokens_before"], rep["tokens_after"]) == ("defer", 102_455, 102_584 + 64)
    assert tokens.estimate(nudge) == 64 and again["messages"] == out["messages"]


def test_the_requests_size_counts_every_system_text_as_sent_now() -> None:
    """`measure`: Claude Code's system is a billing header, a one-line identity (the text the system hash and
    the guidance use) and its main instructions; a change in the instructions alone keeps the hash (no HARD
    fold) but the request's size counts them as sent now."""
    from magic_context import tokens

    def system(main: str) -> list:
        return [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1;"},
                {"type": "text", "text": "You are a Claude agent."}, {"type": "text", "text": main}]

    longer = "Work carefully. " + "Run the tests after each edit. " * 40
    _, rep, _ = serve(dict(envelope([U1], NOW, system=system("Work carefully.")), session_id="sizes"))
    assert (rep["pass"], rep["tokens_before"], rep["usage_tokens"]) == ("fold", 28, 31)
    _, rep, _ = serve(dict(envelope([U1], NOW + 1000, system=system(longer)), session_id="sizes"))
    grown = tokens.estimate(longer) - tokens.estimate("Work carefully.")
    assert grown == 296  # and the estimate adds the tag prefix (3) and the head stored by the first pass (30)
    assert (rep["pass"], rep["tokens_before"], rep["usage_tokens"]) == ("defer", 28 + grown, 28 + grown + 33)


def test_the_providers_usage_counts_a_part_dropped_after_the_last_reply_as_served() -> None:
    """`measure`: a forced ctx_reduce lands on a paste after the provider's last reply (below the preview cap);
    the passes after it count the truncated paste as it is now served, not its raw size."""
    from magic_context.store import db, pending, sessions

    paste = {"role": "user", "content": "PASTE " + " ".join(f"w{j}" for j in range(3000))}
    history = [U1, A2, paste]
    opus = {"provider": "anthropic", "id": "claude-opus-5"}  # the model changes: a HARD fold lands the drop
    _, rep, _ = serve(_at(NOW, 1000, 200_000, "late", history))
    assert (rep["usage_tokens"], rep["tokens_after"]) == (7472, 6515)  # 1 000 + 10 + the paste's 6 462
    conn = db.open_db()
    try:
        pending.queue(conn, sessions.lookup_session(conn, "anthropic", "late")[0], [3], forced=True, now_ms=NOW)
    finally:
        conn.close()
    out, rep, _ = serve(dict(_at(NOW + 1000, 1000, 200_000, "late", history), model=opus))
    assert (rep["pass"], rep["new_drops"], rep["usage_tokens"], rep["tokens_after"]) == ("fold", 1, 7472, 145)
    assert out["messages"][-1]["content"].startswith("[truncated §3§]\nPASTE w0 w1 ")
    _, rep, _ = serve(dict(_at(NOW + 2000, 1000, 200_000, "late", history), model=opus))
    assert (rep["pass"], rep["usage_tokens"], rep["tokens_after"]) == ("defer", 1105, 145)  # 1 010 + its 95 now


def test_the_drop_lanes_add_up_on_a_busting_pass() -> None:
    """`decide` joins the lanes: spent ctx_reduce outputs beyond the newest three always go, the opt-in smart
    lane adds superseded todo lists (the newest stays), a short `auto_drop_tool_age` adds the oldest reads;
    the newest 20 tags stay."""
    from pathlib import Path

    from magic_context import paths

    names = ["read"] * 6 + ["ctx_reduce"] * 5 + ["todowrite"] * 5 + ["read"] * 24
    messages: list = [{"role": "user", "content": "start"}]
    for i, name in enumerate(names):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": name,
                                                        "input": {"n": i}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                   "content": f"OUT{i} " + "word " * 100}]}]
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)

    def dropped(config: str) -> tuple:
        user_file.write_text(config)
        out, rep, _ = serve(_at(NOW, 1000, 100_000, f"lanes-{len(config)}", messages))
        text = json.dumps(out)
        return rep["pass"], rep["new_drops"], [i for i in range(40) if f"OUT{i} " not in text]

    assert dropped("") == ("fold", 2, [6, 7])
    assert dropped("smart_drops = true\n") == ("fold", 6, [6, 7, 11, 12, 13, 14])
    assert dropped("smart_drops = true\nauto_drop_tool_age = 36\n") == ("fold", 12, [*range(8), 11, 12, 13, 14])


def test_a_pass_in_the_force_band_lands_a_queued_drop_even_on_a_protected_tag(monkeypatch) -> None:
    """`decide` drains the queued ctx_reduce drops with the pass's force: at 85% of the window a drop queued
    without `--force` on one of the newest (protected) tags lands too; below that band it stays queued."""
    from magic_context.history import runner
    from magic_context.store import db, pending, sessions

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # 85% starts the historian
    messages = _tools(40)
    for session in ("forced", "unforced"):
        serve(_at(NOW, 1000, 20_000, session, messages))
        conn = db.open_db()
        try:
            pending.queue(conn, sessions.lookup_session(conn, "anthropic", session)[0], [41], forced=False,
                          now_ms=NOW)  # tag 41 is OUT39's, the newest output
        finally:
            conn.close()
    out, rep, _ = serve(_at(NOW + 2000, 17_000, 20_000, "forced", messages))
    assert (rep["pass"], rep["pending_drops"], "OUT39 " in json.dumps(out)) == ("execute", 0, False)
    out, rep, _ = serve(_at(NOW + 2000, 14_000, 20_000, "unforced", messages))
    assert (rep["pass"], rep["pending_drops"], "OUT39 " in json.dumps(out)) == ("execute", 1, True)


def _outputs(n: int, words: int) -> list:
    """n read arcs whose outputs are `words` distinct words each (~4 tokens a word), then a short turn."""
    messages: list = [{"role": "user", "content": "start"}]
    for i in range(n):
        output = " ".join([f"OUT{i}", *(f"w{i}x{j}" for j in range(words))])
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read",
                                                        "input": {"path": f"f{i}.py"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}]}]
    return [*messages, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]


def test_a_busting_pass_reclaims_from_the_threshold_on_down_to_a_fifth_of_it(monkeypatch) -> None:
    """`decide`'s pressure reclaim: a busting pass (here each session's first render) at the threshold (40% of
    100 000) drops the oldest unprotected outputs (1 676 or 1 726 tokens each) until the request is at a fifth
    of it (8 000); one token under the threshold it drops nothing; a request that the 19th drop brings to
    exactly 8 000 stops there."""
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)  # a 69k-token tail starts the historian
    messages = _outputs(40, 400)

    def reclaimed(used: int) -> tuple:
        _, rep, _ = serve(_at(NOW, used, 100_000, f"reclaim-{used}", messages))
        return rep["usage_tokens"], rep["dropped"], rep["tokens_after"]

    assert reclaimed(39_984) == (39_999, 0, 69_034)
    assert reclaimed(39_985) == (40_000, 19, 36_531)  # 19 drops reclaim 32 294: 7 706 left
    assert reclaimed(40_279) == (40_294, 19, 36_531)  # 19 drops leave 8 000: the target, no 20th
    from pathlib import Path

    from magic_context import paths

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("auto_drop_tool_age = 40\n")  # the age lane drops OUT0 first: the reclaim needs less
    assert reclaimed(39_986) == (40_001, 19, 36_531)  # OUT0 by age, then 18 reclaimed: the same 19


def test_a_block_band_pass_reclaims_protected_outputs_and_is_an_emergency_only_if_still_in_the_band(
        monkeypatch) -> None:
    """`decide` in the block band (≥ 95%): the reclaim may take the protected newest outputs too (8 outputs,
    992 tokens); exit 4 only if the request is still in the band after it (19 000 of 20 000)."""
    from magic_context.errors import ContextEmergency
    from magic_context.history import runner

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)
    _, rep, _ = serve(_at(NOW, 19_976, 20_000, "band-under", _tools(8)))  # 19 991 - 992 = 18 999
    assert (rep["pass"], rep["usage_tokens"], rep["dropped"], rep["new_drops"], rep["tokens_after"]) == \
        ("fold", 19_991, 8, 8, 54)
    with pytest.raises(ContextEmergency) as caught:  # 19 992 - 992 = 19 000: still in the band
        hook.serve_pass(json.dumps(_at(NOW, 19_977, 20_000, "band-at", _tools(8))).encode(), {})
    assert caught.value.message == "context at 100% of the 20000-token window and nothing could be folded"


def test_the_nudge_is_quiet_on_a_pass_that_lands_ctx_reduce_drops_and_absent_without_ctx_reduce(monkeypatch) -> None:
    """`apply`: the pass that lands a queued ctx_reduce drop fires no nudge (the model just reduced), while a
    pass whose drops come from other lanes still does; without the ctx_reduce tool there is no nudge at all."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.history import runner
    from magic_context.store import db, pending, sessions

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)
    messages = _spent(30)
    opus = {"provider": "anthropic", "id": "claude-opus-5"}

    def nudged(document: dict) -> tuple:
        out, rep, _ = serve(document)
        return rep["new_drops"], "<system-reminder>" in json.dumps(out["messages"][-1])

    assert nudged(_at(NOW, 1000, 200_000, "reduced", messages[:9])) == (0, False)  # too little to nudge
    conn = db.open_db()
    try:
        pending.queue(conn, sessions.lookup_session(conn, "anthropic", "reduced")[0], [2], forced=False, now_ms=NOW)
    finally:
        conn.close()
    assert nudged(dict(_at(NOW + 1000, 1000, 200_000, "reduced", messages), model=opus)) == (1, False)
    reads = dict(_at(NOW, 1000, 200_000, "no-reduce", messages), tools=[{"name": "read", "input_schema": {}}])
    assert nudged(reads) == (0, False)
    assert nudged(_at(NOW, 1000, 200_000, "nudged", messages)) == (0, True)
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("auto_drop_tool_age = 30\n")
    assert nudged(_at(NOW, 1000, 200_000, "aged", messages)) == (2, True)


def test_a_subagent_first_leaves_no_watermark_and_a_pass_stores_the_pristine_text_of_its_new_tags() -> None:
    """`persist`: a session whose first pass is a subagent's stores the "no fold" watermark (-1), so the
    primary pass after it serves every message; each new tag's text before its prefix is kept (ctx_expand)."""
    from magic_context.store import db, sessions
    from magic_context.store import tags as tag_rows

    history = [U1, A1, R1, A2, U2]
    serve(dict(envelope(history, NOW), session_id="sub-first", agent="subagent"))
    state, _, _ = _stored("sub-first")
    assert state["fold_through"] == (-1, NOW) and "skim_hint" not in state
    out, _, _ = serve(dict(envelope(history, NOW + 1000), session_id="sub-first"))
    assert [m["content"] for m in out["messages"][2:4]] == ["§1§ fix the bug", [
        {"type": "text", "text": "§2§ Reading."}, A1["content"][1]]]
    conn = db.open_db()
    try:
        pk = sessions.lookup_session(conn, "anthropic", "sub-first")[0]
        assert [tag_rows.source(conn, pk, n) for n in range(1, 6)] == [
            "fix the bug", "Reading.", "x = 1", "Fixed it.", "thanks"]
    finally:
        conn.close()


def test_a_pass_reports_its_time_in_milliseconds_to_two_decimals(monkeypatch) -> None:
    """`report`'s "ms": the pass's wall time, from its start to the report, in milliseconds rounded to 2."""
    from types import SimpleNamespace

    from magic_context.transform import pass_serve, pipeline

    clock = iter([10.0, 10.2345678])
    fake = SimpleNamespace(perf_counter=lambda: next(clock))
    monkeypatch.setattr(pipeline, "time", fake)  # the pass starts in `pipeline.run`
    monkeypatch.setattr(pass_serve, "time", fake)  # and is timed in `pass_serve.report`
    served = hook.serve_pass(json.dumps(dict(envelope([U1], NOW), session_id="timed-pass")).encode(), {})
    assert served.report["ms"] == 234.57


def test_the_heads_history_is_dated_unless_temporal_awareness_is_off() -> None:
    """`put_head` passes the user's `temporal_awareness` to the render: a compartment with times shows its date."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.store import compartments, db, sessions

    history = [U1, A1, R1, A2, U2]

    def head(session: str) -> str:
        serve(dict(envelope(history, NOW), session_id=session))
        conn = db.open_db()
        try:
            with db.atomic(conn):
                pk = sessions.lookup_session(conn, "anthropic", session)[0]
                compartments.insert(conn, pk, sequence=1, start=0, end=2, start_message_id=None, end_message_id=None,
                                    title="the bug", p1="read a.py, fixed it", p2="", p3="", p4="", content="read a.py",
                                    importance=50, episode_type=None, start_time=NOW - 7_200_000,
                                    end_time=NOW - 3_600_000, now_ms=NOW)
        finally:
            conn.close()
        out, _, _ = serve(dict(envelope(history, NOW + 1000, system="Be long."), session_id=session))
        return out["messages"][0]["content"][0]["text"]

    assert head("dated") == "<session-history>\n## 0-2 · 2025-11-24 · the bug\nread a.py, fixed it\n</session-history>"
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("temporal_awareness = false\n")
    assert head("undated") == "<session-history>\n## 0-2 · the bug\nread a.py, fixed it\n</session-history>"


def test_the_head_carries_the_projects_docs_unless_the_user_turns_them_off(tmp_path) -> None:
    """`put_head`: m[0] opens with the project's ARCHITECTURE.md (`dreamer.inject_docs`, on by default)."""
    from pathlib import Path

    from magic_context import paths

    (tmp_path / "ARCHITECTURE.md").write_text("# Layers\nengine, commands\n", encoding="utf-8")

    def m0(session: str) -> str:
        out, _, _ = serve(dict(envelope([U1], NOW), session_id=session, project_dir=str(tmp_path)))
        return out["messages"][0]["content"][0]["text"]

    assert m0("docs") == '<project-docs>\n<file name="ARCHITECTURE.md">\n# Layers\nengine, commands\n</file>\n' \
        "</project-docs>\n\n<session-history></session-history>"
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("[dreamer]\ninject_docs = false\n")
    assert m0("no-docs") == "<session-history></session-history>"


def test_the_notes_nudge_counts_this_sessions_and_its_projects_notes_and_only_a_primary_pass_advances_it() -> None:
    """`apply` steps the deferred-notes nudge on a written primary pass only (a subagent's pass under the same
    session leaves the trigger unseen), and counts the notes this session sees: its own and its project's ready
    smart notes, never another session's."""
    from magic_context import project
    from magic_context.history import publish
    from magic_context.memory import notes
    from magic_context.store import db, sessions
    from magic_context.store import notes as note_store

    serve(dict(envelope([U1], NOW), session_id="other"))
    serve(dict(envelope([U1], NOW), session_id="noted"))
    conn = db.open_db()
    try:
        other, pk = (sessions.lookup_session(conn, "anthropic", s)[0] for s in ("other", "noted"))
        pid = project.identity("/tmp")
        notes.add(conn, "not this session's", project_id=pid, session_pk=other, now_ms=NOW)
        ready = notes.add(conn, "ship it", project_id=pid, scope=notes.PROJECT, surface_condition="when CI is green",
                          now_ms=NOW)
        with db.atomic(conn):
            note_store.update(conn, ready["id"], status=notes.READY)
            publish.set_state(conn, pk, publish.NOTE_TRIGGER_KEY, NOW + 1, NOW + 1)  # a historian publish
    finally:
        conn.close()
    history = [U1, A2, U2]
    out, _, _ = serve(dict(envelope(history, NOW + 1000), session_id="noted", agent="subagent"))
    assert out["messages"][-1]["content"] == "§3§ thanks"  # a new user message, but not a primary pass
    out, _, _ = serve(dict(envelope(history, NOW + 2000), session_id="noted"))  # the trigger is first seen here
    assert out["messages"][-1]["content"] == "§3§ thanks"  # that message already went out (the subagent's pass)
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]
    out, _, _ = serve(dict(envelope(history, NOW + 3000), session_id="noted"))
    assert out["messages"][-1]["content"] == "§5§ and now?" + notes.nudge_text(0, 1)


def test_a_pass_that_only_clears_a_spent_queued_drop_is_quiet_and_the_nudge_cycle_restarts(monkeypatch) -> None:
    """`apply`: a queued ctx_reduce drop whose tag another lane already dropped is cleared without a new drop;
    that pass still counts as the model's reduce (quiet: no nudge, the level resets), so the pass after it
    nudges afresh."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.history import runner
    from magic_context.store import db, pending, sessions

    monkeypatch.setattr(runner, "run_once", lambda *a, **k: None)
    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("auto_drop_tool_age = 30\n")  # the age lane drops OUT0 and OUT1 (tags 2, 3)
    messages = _spent(30)

    def nudged(now: int, model: str = "claude-sonnet-4-5") -> tuple:
        out, rep, _ = serve(dict(_at(now, 1000, 200_000, "cleared", messages),
                                 model={"provider": "anthropic", "id": model}))
        return rep["pass"], rep["pending_drops"], json.dumps(out["messages"][-1]).count("<system-reminder>")

    assert nudged(NOW) == ("fold", 0, 1)
    conn = db.open_db()
    try:
        pending.queue(conn, sessions.lookup_session(conn, "anthropic", "cleared")[0], [2], forced=False, now_ms=NOW)
    finally:
        conn.close()
    assert nudged(NOW + 1000, "claude-opus-5") == ("fold", 0, 1)  # cleared: quiet (the first nudge replays)
    assert _stored("cleared")[0]["nudge_state"][0] == {"level": None, "last_u": 33_400}
    assert nudged(NOW + 2000, "claude-opus-5") == ("defer", 0, 2)  # the cycle restarted: a second nudge


def test_a_subagent_pass_under_the_primarys_session_counts_no_head_in_its_size() -> None:
    """`measure`: a subagent is served no head, so its request's size leaves out the m[0]/m[1] the primary
    stored under the same session id: the same as in a session of its own."""
    history = [U1, A1, R1, A2, U2]
    _, rep, _ = serve(envelope(history, NOW))
    assert (rep["tokens_after"], rep["usage_tokens"]) == (100, 70)  # the primary: 30 of head
    _, rep, _ = serve(dict(envelope(history, NOW + 500), session_id="alone", agent="subagent"))
    assert (rep["tokens_before"], rep["tokens_after"], rep["usage_tokens"]) == (55, 70, 70)
    _, rep, _ = serve(dict(envelope(history, NOW + 1000), agent="subagent"))
    assert (rep["tokens_before"], rep["tokens_after"], rep["usage_tokens"]) == (55, 70, 70)


def test_an_emergency_that_compacting_would_cure_waits_for_the_running_historian() -> None:
    """`decide` hands exit 4's advice the pass's historian word: 400 short messages that no drop shrinks fill the
    band, compacting them would cure it, and a historian run holds the lease, so the advice is to wait for it."""
    from pathlib import Path

    from magic_context import paths
    from magic_context.errors import ContextEmergency
    from magic_context.store import db, leases, sessions

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("history_budget_percentage = 0.05\n")  # the compartments' 1 000 tokens in m[0]
    messages = [x for i in range(200) for x in ({"role": "user", "content": f"step {i}"},
                                                {"role": "assistant", "content": f"done {i}"})]
    messages.append({"role": "user", "content": "next"})
    serve(_at(NOW, 1000, 20_000, "busy", messages))
    conn = db.open_db()
    try:
        pk = sessions.lookup_session(conn, "anthropic", "busy")[0]
        assert leases.acquire(conn, leases.historian_lease(pk), "run", NOW, 3_600_000, pid=os.getpid())
    finally:
        conn.close()
    with pytest.raises(ContextEmergency) as caught:
        hook.serve_pass(json.dumps(_at(NOW + 1000, 19_400, 20_000, "busy", messages)).encode(), {})
    assert caught.value.message == "context at 97% of the 20000-token window and nothing could be folded"
    assert caught.value.fix == ("the historian is compacting older history now: retry once `mc status --session "
                                "busy` no longer shows it running")


def _user_config(text: str) -> None:
    from pathlib import Path

    from magic_context import paths

    user_file = Path(paths.user_config_file())
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text(text)


HISTORY_HEAD = "<session-history>\n## 0-2 · the bug\nread a.py, fixed it\n</session-history>"
MEMORY_HEAD = "<project-memory>\n<PROJECT_RULES>\n#1: tests run on real SQLite\n</PROJECT_RULES>\n</project-memory>"


def _folded_session(session: str) -> tuple[list, dict]:
    """A session whose head shows a compartment over U1, A1 and R1 (folded out of the array) and a memory."""
    history = [U1, A1, R1, A2, U2]
    serve(dict(envelope(history, NOW), session_id=session))
    _publish(session, 2)
    folded, rep, _ = serve(dict(envelope(history, NOW + 1000, system="Be long."), session_id=session))
    assert rep["reason"] == "system prompt changed"
    assert folded["messages"][0]["content"][0]["text"] == HISTORY_HEAD + "\n\n" + MEMORY_HEAD
    assert [m["content"] for m in folded["messages"][2:]] == ["§4§ Fixed it.", "§5§ thanks"]
    return history, folded


def test_turning_compaction_off_then_on_mid_session_is_a_hard_fold_each_way_and_shows_history_once() -> None:
    """`schedule`: the head a pass replays must have been rendered under the pass's `compaction.enabled`. Turned
    off, the array is served whole, so a replayed m[0] with its `<session-history>` showed the agent the folded
    history twice until the next bust; turned on again, the array is folded but a head rendered with compaction
    off holds no history, so the folded part was shown nowhere. Each flip is a HARD fold that says why (the
    system prompt changes with it anyway: the guidance comes and goes), and the passes after it defer."""
    history, folded = _folded_session("flip")
    at = NOW + 2000
    _user_config("[compaction]\nenabled = false\n")
    off, rep, _ = serve(dict(envelope(history, at, system="Be long."), session_id="flip"))
    assert (rep["pass"], rep["bust"], rep["reason"]) == ("fold", True, "config changed (compaction.enabled = false)")
    assert off["messages"][0]["content"][0]["text"] == MEMORY_HEAD  # the memories stay, the history goes
    assert off["system"] == "Be long." and folded["system"].startswith("Be long." + GUIDANCE)
    assert [m["content"] for m in off["messages"][2:]] == [U1["content"], A1["content"], R1["content"],
                                                           A2["content"], U2["content"]]  # whole, untagged
    again, rep, _ = serve(dict(envelope(history, at + 1000, system="Be long."), session_id="flip"))
    assert (rep["pass"], rep["reason"]) == ("defer", "defer: within threshold, cache warm")
    assert (again["messages"], again["system"]) == (off["messages"], off["system"])

    _user_config("")
    on, rep, _ = serve(dict(envelope(history, at + 2000, system="Be long."), session_id="flip"))
    assert (rep["pass"], rep["bust"], rep["reason"]) == ("fold", True, "config changed (compaction.enabled = true)")
    assert on["messages"] == folded["messages"]  # the history back in m[0], folded out of the array again
    assert on["system"] == folded["system"]
    again, rep, _ = serve(dict(envelope(history, at + 3000, system="Be long."), session_id="flip"))
    assert (rep["pass"], again["messages"], again["system"]) == ("defer", on["messages"], on["system"])


def test_turning_memory_off_mid_session_is_a_hard_fold_that_takes_the_memories_out_of_the_head() -> None:
    """`memory.enabled` decides what m[0] shows as compaction does: its flip re-renders the head at once
    (the seed's render-config HARD path) rather than serving the memories until the next natural fold."""
    history, folded = _folded_session("forget")
    _user_config("[memory]\nenabled = false\n")
    out, rep, _ = serve(dict(envelope(history, NOW + 2000, system="Be long."), session_id="forget"))
    assert (rep["pass"], rep["reason"]) == ("fold", "config changed (memory.enabled = false)")
    assert out["messages"][0]["content"][0]["text"] == HISTORY_HEAD
    assert out["messages"][2:] == folded["messages"][2:]
    _user_config("[memory]\nenabled = false\n[compaction]\nenabled = false\n")
    _, rep, _ = serve(dict(envelope(history, NOW + 3000, system="Be long."), session_id="forget"))
    assert rep["reason"] == "config changed (compaction.enabled = false)"
    _user_config("")
    _, rep, _ = serve(dict(envelope(history, NOW + 4000, system="Be long."), session_id="forget"))
    assert rep["reason"] == "config changed (compaction.enabled = true, memory.enabled = true)"


def test_a_read_only_pass_after_a_flip_serves_the_history_raw_and_once_without_the_stale_head() -> None:
    """Last known good cannot re-render: a stored head rendered under the other `compaction.enabled` is left out,
    and nothing is folded against it, so the history is served raw and once in either direction."""
    from magic_context.transform import pipeline, protocol

    history, _ = _folded_session("lkg-flip")

    def read_only(at: int) -> dict:
        document = json.loads(json.dumps(dict(envelope(history, at, system="Be long."), session_id="lkg-flip")))
        result = pipeline.run(protocol.read_input(document, {}), readonly=True)
        assert (result.report["pass"], result.report["bust"]) == ("defer", False)
        return result.document

    _user_config("[compaction]\nenabled = false\n")
    out = read_only(NOW + 2000)
    assert [m["content"] for m in out["messages"]] == [m["content"] for m in history]  # no head: it held history
    serve(dict(envelope(history, NOW + 3000, system="Be long."), session_id="lkg-flip"))  # renders a head without
    _user_config("")
    out = read_only(NOW + 4000)  # compaction on again, but the stored head holds no history: nothing is folded
    assert [m["content"] for m in out["messages"]] == \
        ["§1§ fix the bug", [{"type": "text", "text": "§2§ Reading."}, A1["content"][1]],
         [{"type": "tool_result", "tool_use_id": "tu1", "content": "§3§ x = 1"}], "§4§ Fixed it.", "§5§ thanks"]
