"""The historian on long autonomous runs (one task prompt, then hundreds of tool calls, no person in
between): a real mini-swe-agent trajectory replayed call by call through the raw store and the runner,
and the step cutting of the extractive historian on a synthetic run."""

from __future__ import annotations

import itertools
import json

import pytest
from historian_helpers import NOW, SESSIONS, PiBuilder, compartments, store_pi

from magic_context import tokens
from magic_context.history import boundary, chunk, episodes, extractive, runner, wrapup
from magic_context.store import raw, sessions
from magic_context.store.db import open_db
from magic_context.transform.protocol import CODECS
from magic_context.wire.importers import load_session

DJANGO = SESSIONS / "mini-swe-agent_deepseek-chat_django__django-13964.traj.json"


def contiguous(rows) -> bool:
    return rows[0]["start_ordinal"] == 0 and all(b["start_ordinal"] == a["end_ordinal"] + 1
                                                 for a, b in itertools.pairwise(rows))


@pytest.mark.skipif(not DJANGO.exists(), reason="recorded session not available")
def test_django_trajectory_replayed_through_the_runner() -> None:
    """Regression: every run failed validation ("gap before message 176") because a compartment whose
    agent text was only a lead-in ("Let me look at the `pre_save` method of Field:") got an empty title,
    the parser skipped it, and nothing was ever published."""
    recorded = load_session(DJANGO)
    codec = CODECS[recorded.harness]
    conn = open_db()
    pk = sessions.ensure_session(conn, recorded.harness, "django-13964", project_id="dir:testbed",
                                 project_dir="/testbed", now_ms=NOW)
    conn.execute("UPDATE sessions SET context_limit = 40000 WHERE id = ?", (pk,))
    results = []
    for index, call in enumerate(recorded.calls):  # the session grows call by call; trigger-mode runs
        if index % 40 and index != len(recorded.calls) - 1:
            continue
        raw.sync(conn, pk, codec.decode(call.messages), now_ms=NOW + index, estimate=tokens.estimate)
        results.append(runner.run_once(conn, pk, now_ms=NOW + index))
    assert not [r for r in results if r.status == runner.FAILED]
    published = [r for r in results if r.status == runner.PUBLISHED]
    assert len(published) >= 4
    assert all(r.failure is None for r in published)  # the detailed answer validated: no coarse fallback
    rows = compartments(conn, pk)
    assert contiguous(rows)
    # the single task prompt sits at ordinal 1: the long live turn behind it does not hold the boundary
    assert rows[-1]["end_ordinal"] > 150
    assert all(r["title"] and r["p1"] for r in rows)
    done = wrapup.wrapup(conn, pk, keep=8, provider="extractive", now_ms=NOW + 10_000)
    assert done.disposition == wrapup.COMPLETED
    rows = compartments(conn, pk)
    total = len(recorded.calls[-1].messages)
    assert contiguous(rows) and 8 <= total - 1 - rows[-1]["end_ordinal"] <= 13
    failure = conn.execute("SELECT value FROM session_state WHERE session_pk = ? AND key = ?",
                           (pk, runner.FAILURE_KEY)).fetchone()
    assert failure is None or json.loads(failure[0]) is None
    # compartments are about the target, and most hold several steps (one p1 line each)
    assert len(rows) >= 6
    assert sum(r["p1"].count("\n[") >= 1 for r in rows) >= len(rows) / 2
    conn.close()


def autonomous_run(steps: int = 40) -> PiBuilder:
    b = PiBuilder().user("Fix the bug described in the issue: saving a parent after setting it on a child "
                         "loses the key. Do not stop until the tests pass.")
    for i in range(steps):
        b.call("bash", {"command": f"grep -n thing{i} src/mod{i % 5}.py"}, "match " * 40,
               text=f"Step {i}: the cache key is checked in mod{i % 5}; now I look at thing{i} there.")
        b.call("read", {"path": f"src/mod{i % 5}.py"}, "code " * 300)  # words only every other call
        if i % 7 == 6:
            b.call("edit", {"path": f"src/mod{i % 5}.py", "oldText": "a", "newText": "b"}, "Successfully replaced")
    return b.say("All tests pass now: the key is set from the cached parent in pre_save.")


def test_long_autonomous_run_is_cut_into_steps_at_natural_boundaries() -> None:
    from magic_context.wire import pi

    messages = pi.decode(autonomous_run().messages)
    for i, msg in enumerate(messages):
        msg.ordinal = i
    digests, spans = chunk.digest_messages(messages, [10] * len(messages), root="/work/syn")
    c = chunk.build_chunk(digests, spans, start=0, end=len(messages) - 1, budget=50_000)
    target = 400
    groups = episodes.group(c.digests, c.arcs, target)
    pieces = [p for g in groups for p in g]
    assert [d.ordinal for p in pieces for d in p] == [d.ordinal for d in c.digests]  # tiles, in order
    unsafe = boundary.unsafe_cuts(c.arcs)
    assert all(p[-1].ordinal not in unsafe for p in pieces)  # no step splits a tool arc
    assert all(p[0].text for p in pieces[1:])  # every step starts where the agent says something
    assert len(pieces) > 2 * len(groups) >= 6  # several compartments, several steps each
    sizes = [sum(episodes.weight(p) for p in g) for g in groups]
    assert max(sizes[:-1]) <= 2 * target
    text = extractive.extractive_output(c, target=target)
    extractive.check_output(text, c)
    assert text.count("\n[") + text.count("<p1>[") >= len(pieces)  # a p1 line per step
    assert "Step 1:" in text and "All tests pass now" in text


def test_floor_lets_go_of_a_live_turn_longer_than_the_window() -> None:
    def tail(turn: int) -> list[boundary.TailItem]:  # a prompt at 1, then `turn` messages of 100 tokens
        return [boundary.TailItem(o, 100, o == 1) for o in range(turn + 2)]

    protect = 4_000  # the floor holds while the live turn is at most 4 × 4 000 tokens
    held = boundary.protected_tail_boundary(tail(150), [], start=0, protect_tokens=protect)
    assert held.end == 0 and "live prompt" in held.reason
    gone = boundary.protected_tail_boundary(tail(170), [], start=0, protect_tokens=protect)
    assert gone.end == 171 - 40 and "too long to stay raw" in gone.reason  # the size walk decides
    conn = open_db()
    pk = store_pi(conn, autonomous_run(steps=60).messages)
    calm = runner.plan(conn, pk, keep=None, emergency=False, protect_tokens=4_000, budget=32_000, harness="pi",
                       project_dir="/work/syn")
    assert calm.bound.end > 0 and "too long to stay raw" in calm.bound.reason
    conn.close()
