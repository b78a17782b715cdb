"""The session's first request quoted in m[0]'s `<session-history>` once its compartment has decayed past P2
(history/first_request.py, history/render.py, transform/head.py): which message is the request, the exact m[0]
text on real SQLite, and that a defer pass replays it byte for byte without reading the raw store again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from magic_context.history import first_request, render
from magic_context.store import compartments
from magic_context.store import raw as raw_store
from magic_context.transform import head, hook
from magic_context.wire import anthropic, openai, pi, responses
from magic_context.wire import model as m

NOW = 1_800_000_000_000
TASK = "Fix the <footer> colours in src/ui/footer.ts and keep the tests green"


def ctx(pk: int, project_dir: Path, budget: int, harness: str = m.ANTHROPIC) -> head.HeadContext:
    return head.HeadContext(session_pk=pk, project_id="git:fr", project_dir=str(project_dir), history_budget=budget,
                            memory_budget=4_000, temporal=False, include_history=True, include_memory=False,
                            include_docs=False, estimate=render.estimate_tokens, now_ms=NOW, harness=harness)


def stored_session(conn: sqlite3.Connection, messages: list, harness: str = m.ANTHROPIC, codec=anthropic) -> int:
    pk = raw_store.ensure_session(conn, harness, "fr-session", project_dir="/p", now_ms=1)
    raw_store.sync(conn, pk, codec.decode(messages), now_ms=2)
    return pk


def fold(conn: sqlite3.Connection, pk: int, count: int, size: int = 600, first: int = 0) -> None:
    """Compartments `first`..`count - 1` of two ordinals each from ordinal 0, each P1 about `size` characters."""
    for seq in range(first, count):
        compartments.insert(conn, pk, sequence=seq, start=2 * seq, end=2 * seq + 1, start_message_id=None,
                            end_message_id=None, title=f"step {seq}", p1=f"did step {seq} " + "p" * size,
                            p2=f"step {seq} " + "q" * (size // 3), p3=f"step {seq}.", p4="", content="",
                            importance=50, episode_type=None, start_time=None, end_time=None, now_ms=NOW)


def turns(n: int, first: str = TASK) -> list:
    out: list = [{"role": "user", "content": first}]
    for i in range(n):
        out += [{"role": "assistant", "content": f"step {i} done"}, {"role": "user", "content": f"go on {i}"}]
    return out


# --- which message is the first request ------------------------------------------------------------


def test_the_first_typed_request_skips_slash_commands_tool_results_and_empty_text() -> None:
    messages = pi.decode([
        {"role": "user", "content": [{"type": "text", "text": "/mode"}], "timestamp": 1},
        {"role": "user", "content": [{"type": "text", "text": "/model claude-sonnet"}], "timestamp": 2},
        {"role": "user", "content": [{"type": "text", "text": "   "}], "timestamp": 3},
        {"role": "user", "content": [{"type": "text", "text": "/Users/me/a.py is broken,\r\n\r\n   fix it  "}],
         "timestamp": 4},
    ])
    for ordinal, msg in enumerate(messages):
        msg.ordinal = ordinal
    assert first_request.pick(messages) == render.FirstRequest(3, "/Users/me/a.py is broken,\nfix it")
    heads = anthropic.decode([{"role": "user", "content": "<project-docs>\n<file name=\"A.md\">x</file>"},
                              {"role": "user", "content": "<session-history>\n## 0-3 · t\n</session-history>"}])
    for ordinal, msg in enumerate(heads):
        msg.ordinal = ordinal
    assert first_request.pick(heads) is None  # mc's own head, should a harness have stored it
    codex = responses.decode([  # as Codex 0.171 sends them (../shared/data/requests/codex-0.171.0-1.json)
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions "
                                                         "for /w\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  "
                                                         "<cwd>/w</cwd>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<pr_description>\nfix "
                                                         "it\n</pr_description>\n<instructions>go</instructions>"}]},
    ])
    for ordinal, msg in enumerate(codex):
        msg.ordinal = ordinal
    assert first_request.pick(codex) == render.FirstRequest(
        2, "<pr_description>\nfix it\n</pr_description>\n<instructions>go</instructions>")  # a task is no one element
    results = anthropic.decode([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                              "content": "output"}]}])
    results[0].ordinal = 0
    assert first_request.pick(results) is None


def test_the_request_text_drops_system_reminders_and_is_kept_to_4000_characters() -> None:
    msg = anthropic.decode([{"role": "user", "content": "<system-reminder>ctx</system-reminder>do " + "x" * 9000}])[0]
    text = first_request.request_text(msg)
    assert text == ("do " + "x" * 9000)[:first_request.SOURCE_CHARS] and len(text) == 4000


# --- m[0] on real SQLite ----------------------------------------------------------------------------


def test_m0_quotes_the_first_request_once_its_compartment_has_decayed(conn: sqlite3.Connection,
                                                                      tmp_path: Path) -> None:
    pk = stored_session(conn, turns(20))
    fold(conn, pk, 20)
    text, _ = head.render_m0(conn, ctx(pk, tmp_path, 1_000))
    rows = compartments.for_head(conn, pk)
    plain = render.decay_render(rows, 1_000, False)
    assert plain.tiers[0] >= 3 and TASK not in plain.body  # the history alone no longer shows it
    quote = ('<first-request ordinal="0">\nFix the &lt;footer&gt; colours in src/ui/footer.ts and keep the tests '
             'green\n</first-request>')
    rest = render.decay_render(rows, 1_000 - render.estimate_tokens(quote + "\n\n"), False)
    assert text == f"<session-history>\n{quote}\n\n{rest.body}\n</session-history>"
    assert render.estimate_tokens(f"{quote}\n\n{rest.body}") <= 1_000


def test_m0_has_no_quote_while_the_history_shows_the_request_and_then_reads_no_raw_row(
        conn: sqlite3.Connection, tmp_path: Path, monkeypatch) -> None:
    pk = stored_session(conn, turns(20))
    fold(conn, pk, 2)
    reads: list[int] = []
    real = raw_store.first_of_role
    monkeypatch.setattr(raw_store, "first_of_role", lambda *a, **k: reads.append(1) or real(*a, **k))
    text, _ = head.render_m0(conn, ctx(pk, tmp_path, 10_000))
    assert text == render.render_session_history(compartments.for_head(conn, pk), 10_000, False)
    assert "<first-request" not in text and "did step 0" in text  # P1
    assert reads == []  # every compartment at P1/P2 from ordinal 0 on: no request can be hidden
    fold(conn, pk, 20, first=2)
    assert "<first-request" in head.render_m0(conn, ctx(pk, tmp_path, 1_000))[0] and reads == [1]


def test_m0_has_no_quote_before_the_request_is_folded_or_without_a_harness(conn: sqlite3.Connection,
                                                                          tmp_path: Path) -> None:
    pk = raw_store.ensure_session(conn, m.ANTHROPIC, "late", project_dir="/p", now_ms=1)
    raw_store.sync(conn, pk, anthropic.decode([{"role": "assistant", "content": "hello"}] * 40 + turns(1)), now_ms=2)
    fold(conn, pk, 20)  # ordinals 0..39: the request is ordinal 40, still in the conversation
    plain = render.render_session_history(compartments.for_head(conn, pk), 1_000, False)
    assert head.render_m0(conn, ctx(pk, tmp_path, 1_000))[0] == plain
    other = stored_session(conn, turns(20))
    fold(conn, other, 20)
    assert "<first-request" not in head.render_m0(conn, ctx(other, tmp_path, 1_000, harness=""))[0]


def test_a_session_without_user_text_renders_as_before(conn: sqlite3.Connection, tmp_path: Path) -> None:
    messages = [{"role": "system", "content": "You are a bot."}]
    messages += [{"role": "assistant", "content": f"step {i}"} for i in range(20)]
    messages += [{"role": "user", "content": "/compact"}]
    messages += [{"role": "assistant", "content": f"step {i}"} for i in range(20)]
    pk = stored_session(conn, messages, m.OPENAI, openai)
    fold(conn, pk, 20)
    text, _ = head.render_m0(conn, ctx(pk, tmp_path, 1_000, harness=m.OPENAI))
    assert text == render.render_session_history(compartments.for_head(conn, pk), 1_000, False)


# --- through the pass --------------------------------------------------------------------------------


def envelope(messages: list, now: int, **extra: object) -> dict:
    return {"messages": messages, "system": "Be brief.", "harness": "anthropic", "session_id": "fr",
            "project_dir": "/tmp", "now": now,
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "context_limit": 10_000}, **extra}


def test_a_defer_pass_replays_the_quote_byte_for_byte_and_reads_no_raw_history(monkeypatch) -> None:
    from magic_context.store import db, sessions

    history = turns(20)
    hook.serve_pass(json.dumps(envelope(history, NOW)).encode(), {})
    conn = db.open_db()
    try:
        with db.atomic(conn):
            fold(conn, sessions.lookup_session(conn, m.ANTHROPIC, "fr")[0], 20, size=300)
    finally:
        conn.close()
    served = hook.serve_pass(json.dumps(envelope(history, NOW + 1000, system="Be long.")).encode(), {})
    assert served.report["pass"] == "fold"
    m0 = json.loads(served.output)["messages"][0]["content"][0]["text"]
    assert m0.startswith('<session-history>\n<first-request ordinal="0">\nFix the &lt;footer&gt; colours')

    reads: list[int] = []
    real = raw_store.first_of_role
    monkeypatch.setattr(raw_store, "first_of_role", lambda *a, **k: reads.append(1) or real(*a, **k))
    again = hook.serve_pass(json.dumps(envelope(history, NOW + 2000, system="Be long.")).encode(), {})
    assert again.report["pass"] == "defer" and reads == []
    out, first = json.loads(again.output), json.loads(served.output)
    assert (out["messages"], out["system"]) == (first["messages"], first["system"])  # the same bytes
