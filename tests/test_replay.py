"""`mc replay` end to end on real recorded sessions, plus the session preparation and anchors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SESSIONS, run_mc

from magic_context.errors import BadInput
from magic_context.replay import anchors, passes, replay
from magic_context.wire import model as m
from magic_context.wire.importers import load_session

SUBAGENT = SESSIONS / "claude-code" / "bookminder-subagent-a12564cd.jsonl"
SQLFLUFF = SESSIONS / "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json"
BASE_KEYS = {"name", "passes", "peak_tokens", "over_window", "cache_read_share", "busts", "cost_usd", "cost_vs_native"}
MC_KEYS = {"latency_ms_p50", "latency_ms_p95", "latency_vs_floor", "anchor_retention"}
TIMING = {"latency_ms_p50", "latency_ms_p95", "floor_ms_p50", "floor_ms_p95", "latency_vs_floor"}

def mc_replay(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_mc("replay", *args)


def _data(proc: subprocess.CompletedProcess[bytes]) -> dict:
    assert proc.returncode == 0, proc.stderr.decode()
    envelope = json.loads(proc.stdout)
    assert envelope["command"] == "replay" and envelope["errors"] == []
    return envelope["data"]


def _without_timing(data: dict) -> list[dict]:
    return [{k: v for k, v in s.items() if k not in TIMING} for s in data["strategies"]]


def test_cli_subagent_json_and_repeatable() -> None:
    first = _data(mc_replay(str(SUBAGENT), "--context-limit", "20000", "--json"))
    assert first["context_limit"] == 20_000 and first["passes"] == 9
    names = [s["name"] for s in first["strategies"]]
    assert names == ["mc", "native", "masking", "clear-tool-uses", "raw"]
    for s in first["strategies"]:
        assert BASE_KEYS <= s.keys()
        assert s["passes"] == 9
    mc = first["strategies"][0]
    assert MC_KEYS <= mc.keys()
    assert mc["over_window"] == 0 and mc["latency_ms_p50"] > 0 and mc["latency_vs_floor"] > 0
    raw = first["strategies"][-1]
    assert raw["over_window"] > 0 and raw["peak_tokens"] > 20_000  # the session is bigger than the window
    assert first["strategies"][1]["cost_vs_native"] == 1.0

    second = _data(mc_replay(str(SUBAGENT), "--context-limit", "20000", "--json"))
    assert _without_timing(second) == _without_timing(first)  # costs identical; latency only within noise


def test_cli_mini_swe_small_window() -> None:
    data = _data(mc_replay(str(SQLFLUFF), "--format", "openai", "--context-limit", "30000", "--pricing", "openai",
                           "--strategies", "mc,native,masking", "--json"))
    assert data["format"] == "mini-swe" and data["pricing"]["name"] == "openai"
    by = {s["name"]: s for s in data["strategies"]}
    assert set(by) == {"mc", "native", "masking"}
    assert by["mc"]["over_window"] == 0 and by["native"]["over_window"] == 0
    assert by["native"]["compactions"] >= 1  # 45k tokens of history in a 30k window
    assert by["mc"]["pass_kinds"].get("execute", 0) + by["mc"]["pass_kinds"].get("fold", 0) >= 2
    for name in by:  # the ratio is this strategy's cost over native's, not the other way round
        assert by[name]["cost_vs_native"] == round(by[name]["cost_usd"] / by["native"]["cost_usd"], 4)
    assert by["native"]["cost_vs_native"] == 1.0
    # mc busts twice and keeps the cache warm (0.64× native when measured); masking busts on most passes
    assert 0.3 < by["mc"]["cost_vs_native"] < 0.9 and by["mc"]["busts"] <= 5
    assert by["masking"]["cost_vs_native"] > 1.2 and by["masking"]["busts"] > 50


def test_cli_table_and_default_window_hint() -> None:
    proc = mc_replay(str(SUBAGENT), "--strategies", "mc,native")
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "native" in out and "cache read" in out and "anchor retention" in out
    assert "200,000" in proc.stderr.decode()  # the recorded model's window, with a hint


def test_cli_bad_strategy_and_missing_file(tmp_path: Path) -> None:
    proc = mc_replay(str(SUBAGENT), "--strategies", "mc,magic")
    assert proc.returncode == 2 and b"magic" in proc.stderr
    proc = mc_replay(str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2


def test_subprocess_mode_serves_the_same_requests() -> None:
    inline = replay(SUBAGENT, context_limit=20_000, strategies=["mc"]).to_dict()["strategies"][0]
    spawned = replay(SUBAGENT, context_limit=20_000, strategies=["mc"], subprocess=True).to_dict()["strategies"][0]
    assert {k: v for k, v in spawned.items() if k not in TIMING} == {k: v for k, v in inline.items() if k not in TIMING}
    assert spawned["floor_ms_p50"] > inline["floor_ms_p50"]  # a process start is in both sides of the ratio


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "replay.png"
    proc = mc_replay(str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc,native", "--plot", str(target))
    assert proc.returncode == 0, proc.stderr.decode()
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from magic_context.replay import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(BadInput) as err:
        plot.require()
    assert "magic-context[plot]" in err.value.one_line()


def test_prepare_removes_harness_compactions_and_usage() -> None:
    session = load_session(SESSIONS / "pi_before-compaction.jsonl")
    rep = passes.prepare(session)
    assert rep.meta["harness_compactions_removed"] == 2
    assert len(rep.passes) == len(session.calls)
    ends = [p.end for p in rep.passes]
    assert ends == sorted(ends) and ends[-1] == len(rep.native) == len(rep.canon)
    assert not any(isinstance(x, dict) and x.get("role") == "compactionSummary" for x in rep.native)
    assert not any(isinstance(x, dict) and "usage" in x for x in rep.native)
    assert not any(msg.compaction for msg in rep.canon)


def test_anchor_retention() -> None:
    def msg(mid: str, role: str, *blocks: m.Block) -> m.Message:
        return m.Message(mid, role, list(blocks))

    instruction = msg("u", m.USER, m.Block(m.TEXT, "Please fix the failing migration test in the orders app"))
    call = msg("a", m.ASSISTANT, m.Block(m.TOOL_CALL, tool_id="c1", tool_name="read",
                                         input={"path": "/repo/orders/migrations/0003_auto.py"}))
    result = msg("t", m.TOOL, m.Block(m.TOOL_RESULT, "commit 3f9a1c2be4d\nAuthor: x", tool_id="c1"))
    history = [instruction, call, result, msg("z", m.USER, m.Block(m.TEXT, "thanks, now run the whole suite"))]
    head = msg("h", m.USER, m.Block(m.TEXT, "<session-history>read orders/migrations/0003_auto.py</session-history>"))
    served = [head, instruction, history[3]]
    report = anchors.retention(history, served)
    assert report.counts == {"paths": (1, 1), "commits": (1, 0), "instructions": (0, 0)}
    assert report.share == 0.5
    dropped_instruction = anchors.retention(history, [head, history[3]])
    assert dropped_instruction.counts["instructions"] == (1, 0)


def test_an_instruction_quoted_in_the_escaped_history_block_is_retained() -> None:
    """mc's <session-history> escapes `<`, `>` and `&` in what it quotes; the model reads them as the
    characters, so a quoted `<pr_description>` task (mini-swe-agent's) counts as visible, in the head as a
    message or as system text; an escape in the user's own words is not undone twice."""
    task = m.Message("u", m.USER, [m.Block(m.TEXT, "<pr_description>\nConsider the following PR description: "
                                                  "fix the & encoding bug")])
    later = m.Message("z", m.USER, [m.Block(m.TEXT, "ok")])
    quoted = 'U: "&lt;pr_description&gt; Consider the following PR description: fix the &amp; encoding bug"'
    head = m.Message("h", m.USER, [m.Block(m.TEXT, f"<session-history>{quoted}</session-history>")])
    assert anchors.retention([task, later], [head, later]).counts["instructions"] == (1, 1)
    assert anchors.retention([task, later], [later], [quoted]).counts["instructions"] == (1, 1)
    assert anchors.Retention().measure([task, later], [later], [quoted]).counts["instructions"] == (1, 1)
    literal = m.Message("u", m.USER, [m.Block(m.TEXT, "please keep the literal &amp;lt; entity in the docs")])
    shown = m.Message("h", m.USER, [m.Block(m.TEXT, "U: please keep the literal &amp;amp;lt; entity in the docs")])
    assert anchors.retention([literal, later], [shown, later]).counts["instructions"] == (1, 1)



@pytest.mark.parametrize("command", [
    "ruff check --fix \\\napp/models.py",  # a backslash-newline line continuation, the path at the line's start
    "cat > notes.md <<'EOF'\n\napp/models.py (2400+ lines)\nEOF",  # written content, the path after a blank line
    "printf 'done\\napp/models.py\\tok'",  # escapes written in the command itself
    "echo -e '\\x1bapp/models.py\\u001b'",
])
def test_a_path_after_an_escape_in_a_tool_call_is_anchored_as_the_path(command: str) -> None:
    """A path that follows a newline or a written backslash escape in a tool call's arguments is the anchor
    `app/models.py`, which a summary naming the file retains (it used to be keyed `napp/models.py`,
    `tapp/...`: glued to the escape's letter, unmatchable by any served text, for mc and native alike)."""
    call = m.Message("a", m.ASSISTANT, [m.Block(m.TOOL_CALL, tool_id="c1", tool_name="bash",
                                                input={"command": command, "timeout": 30})])
    later = m.Message("z", m.USER, [m.Block(m.TEXT, "ok")])
    head = m.Message("h", m.USER, [m.Block(m.TEXT, "<session-history>edited app/models.py</session-history>")])
    assert anchors.retention([call, later], [head, later]).counts["paths"] == (1, 1)
    assert anchors.Retention().measure([call, later], [head, later]).counts["paths"] == (1, 1)


def test_the_recorded_path_after_a_newline_is_anchored_as_the_path() -> None:
    """The case bench/results.md noted: in pi_before-compaction a written file lists `tui/tui-renderer.ts`
    after a blank line; its anchor is that path, and no tool call of the session yields a path glued to a
    JSON escape's letter."""
    rep = passes.prepare(load_session(SESSIONS / "pi_before-compaction.jsonl"))
    found: set[str] = set()
    calls = 0
    for msg in rep.canon:
        for block in msg.blocks:
            if block.kind == m.TOOL_CALL:
                calls += 1
                found |= anchors._block_anchors(msg, block).get("paths", set())
    assert calls > 50 and "tui/tui-renderer.ts" in found
    assert "ntui/tui-renderer.ts" not in found


@pytest.mark.slow
@pytest.mark.parametrize(("name", "window"), [
    ("pi_large-session.jsonl", 60_000),
    ("pi_before-compaction.jsonl", 120_000),
    ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", 40_000),
    ("mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json", 30_000),
])
def test_real_sessions_end_to_end(name: str, window: int) -> None:
    """The bench sessions: every strategy serves every pass; mc and native stay inside the window."""
    result = replay(SESSIONS / name, context_limit=window, strategies=["mc", "native", "raw"])
    data = result.to_dict()
    by = {s["name"]: s for s in data["strategies"]}
    assert all(s["passes"] == data["passes"] for s in by.values())
    assert by["raw"]["over_window"] > 0  # the session is larger than the window
    assert by["mc"]["over_window"] == 0 and by["native"]["over_window"] == 0
    assert by["mc"]["emergencies"] == 0
    assert 0.5 < by["mc"]["cache_read_share"] <= 1


def test_retention_over_every_pass_for_mc_and_the_recordings_native() -> None:
    data = replay(SQLFLUFF, context_limit=30_000, strategies=["mc", "native", "native:pi"], user_config=False).to_dict()
    runs = {s["name"]: s for s in data["strategies"]}
    assert runs["native"]["compaction"]["profile"] == "native:codex"  # an OpenAI-format recording
    assert runs["native:pi"]["compaction"]["summary_tokens"] == 1000 and runs["native"]["compactions"] >= 1
    for s in runs.values():
        kept = s["retention"]
        assert kept["passes"] > 10 and 0 <= kept["min"] <= kept["mean"] <= 1
        assert s["resent_read_share"] is not None and s["cache_read_share"] <= s["resent_read_share"] <= 1
    assert runs["mc"]["anchor_retention"] is not None  # the last pass, as before


def test_memoized_retention_gives_the_plain_figures_pass_after_pass() -> None:
    """`Retention.measure` memoizes by block identity, indexes the growing history once and folds the served
    text part by part: on a growing history, with served views that copy, drop, replace and re-tag blocks
    and parts that start or end in whitespace, every pass's report equals `retention`'s."""
    import random

    rng = random.Random(13)
    words = ["src/app/models.py", "commit 3f9a1c2be4d", "  Please FIX the\tfailing test in orders  ", "\n",
             "lib/x/util.ts §4§ ", "[main 9b8c7d6e] msg", "ok", ""]
    history: list[m.Message] = []
    tracker = anchors.Retention()
    for step in range(60):
        role = rng.choice([m.USER, m.ASSISTANT, m.TOOL])
        if role == m.TOOL:
            block = m.Block(m.TOOL_RESULT, " ".join(rng.choices(words, k=3)), tool_id=f"c{step}")
        elif role == m.ASSISTANT and rng.random() < 0.5:
            block = m.Block(m.TOOL_CALL, tool_id=f"c{step}", tool_name="read",
                            input={"path": rng.choice(words), "n": step})
        else:
            block = m.Block(m.TEXT, " ".join(rng.choices(words, k=4)) + f" step {step} Σ")
        history.append(m.Message(f"m{step}", role, [block]))
        served: list[m.Message] = [m.Message("h", m.USER, [m.Block(m.TEXT, rng.choice(words) + "\n")])]
        for msg in history:
            pick = rng.random()
            if pick < 0.4:
                served.append(msg)  # the same object (a baseline's tail)
            elif pick < 0.6:  # a copy with the same text (mc's decoded request), or tagged
                blocks = [m.Block(b.kind, text=(f"§{step}§ " + b.text) if b.text and pick < 0.5 else b.text,
                                  tool_id=b.tool_id, tool_name=b.tool_name, input=b.input) for b in msg.blocks]
                served.append(m.Message(msg.id, msg.role, blocks))
            elif pick < 0.7:
                served.append(m.Message(msg.id, msg.role, [m.Block(m.TOOL_RESULT, "[cleared]", tool_id="x")]))
        system = [rng.choice(words)]
        assert tracker.measure(history[:], served, system) == anchors.retention(history[:], served, system)
