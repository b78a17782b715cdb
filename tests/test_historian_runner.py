"""The historian runner: leases, failure records, trigger-mode runs, inline runs inside a transaction,
publishing (facts de-duplicated, no drops queued), and the detached background launch."""

from __future__ import annotations

import json
import sys
import time

import pytest
from historian_helpers import NOW, PiBuilder, compartments, covered, store_pi

from magic_context.config.model import MCConfig
from magic_context.history import boundary, chunk, extractive, publish, runner, wrapup
from magic_context.history.validate import validate_historian_output
from magic_context.llm.base import ProviderHTTPError

TTL = 300_000


def session(turns: int = 10, padding: int = 2_000) -> PiBuilder:
    b = PiBuilder()
    for i in range(turns):
        b.turn(f"please update module {i} to the new api", f"src/m{i}.py", padding=padding)
    return b


def state(conn, pk: int, key: str):
    row = conn.execute("SELECT value FROM session_state WHERE session_pk = ? AND key = ?", (pk, key)).fetchone()
    return None if row is None else json.loads(row[0])


def test_lease_blocks_a_second_holder_until_it_expires(conn) -> None:
    pk = store_pi(conn, session().messages)
    assert runner.acquire_lease(conn, pk, "a", NOW, TTL)
    assert runner.is_running(conn, pk, NOW + 1)
    assert not runner.acquire_lease(conn, pk, "b", NOW + 1, TTL)
    assert runner.acquire_lease(conn, pk, "a", NOW + 2, TTL)  # the holder renews
    assert not runner.is_running(conn, pk, NOW + 2 + TTL)
    assert runner.acquire_lease(conn, pk, "b", NOW + 2 + TTL, TTL)  # stale: reclaimed
    runner.release_lease(conn, pk, "a")  # not a's any more: no effect
    assert runner.is_running(conn, pk, NOW + 3 + TTL)
    runner.release_lease(conn, pk, "b")
    assert not runner.is_running(conn, pk, NOW + 4 + TTL)


def test_lease_prevents_two_concurrent_runs(conn) -> None:
    b = session()
    pk = store_pi(conn, b.messages)
    assert runner.acquire_lease(conn, pk, "other", NOW, TTL)
    busy = runner.run_once(conn, pk, keep=4, now_ms=NOW + 10)
    assert busy.status == runner.BUSY and compartments(conn, pk) == []
    assert wrapup.wrapup(conn, pk, keep=4, now_ms=NOW + 10).disposition == wrapup.ALREADY_IN_PROGRESS
    # once the lease is older than historian.timeout_ms it is reclaimed
    done = runner.run_once(conn, pk, keep=4, now_ms=NOW + TTL + 1)
    assert done.status == runner.PUBLISHED
    assert covered(conn, pk) == (0, len(b.messages) - 6)  # all but the newest 4 (fenced back to their prompt)
    assert not runner.is_running(conn, pk, NOW + TTL + 2)
    assert state(conn, pk, runner.STATE_KEY)["state"] == "idle"


def test_run_once_in_keep_mode_and_nothing_to_compact(conn) -> None:
    b = session(turns=3)
    pk = store_pi(conn, b.messages)
    result = runner.run_once(conn, pk, keep=4, now_ms=NOW)
    assert result.status == runner.PUBLISHED and result.provider == "extractive"
    rows = compartments(conn, pk)
    # keeping 4 would cut the read arc at 13-14: the boundary fences back to the prompt at 12
    assert rows[0]["start_ordinal"] == 0 and rows[-1]["end_ordinal"] == len(b.messages) - 6
    last = state(conn, pk, publish.LAST_PUBLISH_KEY)
    assert last["end"] == rows[-1]["end_ordinal"] and last["provider"] == "extractive"
    assert conn.execute("SELECT count(*) FROM pending_ops").fetchone()[0] == 0  # no drops queued
    again = runner.run_once(conn, pk, keep=4, now_ms=NOW)
    assert again.status == runner.NOTHING and "newest 4" in again.reason


def test_trigger_mode_keeps_the_protected_tail_and_publishes_all_it_read(conn) -> None:
    b = session(turns=30, padding=6_000)
    pk = store_pi(conn, b.messages)
    conn.execute("UPDATE sessions SET context_limit = 60000 WHERE id = ?", (pk,))
    result = runner.run_once(conn, pk, now_ms=NOW)
    assert result.status == runner.PUBLISHED and result.compartments >= 2
    rows = compartments(conn, pk)
    protect = boundary.protected_tail_tokens(60_000, runner.DEFAULT_THRESHOLD)  # no pass report: the default
    raw_after = conn.execute("SELECT sum(tokens) FROM raw_messages WHERE session_pk = ? AND ordinal > ?",
                             (pk, rows[-1]["end_ordinal"])).fetchone()[0]
    assert raw_after >= protect
    # the chunk ended at the eligible boundary: a discarded last compartment would be re-read by the next run
    # with no more lookahead (paid twice by a model historian), so everything read is published
    assert result.end == result.eligible_end and result.next_start == result.end + 1 == rows[-1]["end_ordinal"] + 1


def test_a_chunk_cut_by_its_budget_leaves_its_last_compartment_to_the_next_run(conn, monkeypatch) -> None:
    monkeypatch.setattr(chunk, "chunk_budget", lambda *_: 4_000)  # a small historian context
    b = PiBuilder()
    for i in range(60):  # ~120 rendered tokens a turn: the eligible head is beyond the chunk budget
        b.turn(f"please port module {i} to the new api: " + "keep the public names stable and log each call " * 20,
               f"src/m{i}.py", padding=2_000)
    pk = store_pi(conn, b.messages)
    conn.execute("UPDATE sessions SET context_limit = 400000 WHERE id = ?", (pk,))
    result = runner.run_once(conn, pk, now_ms=NOW)
    assert result.status == runner.PUBLISHED and result.end < result.eligible_end  # cut by the budget
    last = compartments(conn, pk)[-1]["end_ordinal"]
    # discard-last: the next run reads the last compartment again, with the messages that follow it
    assert result.next_start == last + 1 <= result.end
    again = runner.run_once(conn, pk, now_ms=NOW + 1)
    assert again.start == last + 1


def test_inline_run_inside_the_callers_transaction(conn) -> None:
    b = session()
    pk = store_pi(conn, b.messages)
    conn.execute("BEGIN IMMEDIATE")
    result = runner.run_once(conn, pk, keep=4, now_ms=NOW)
    assert conn.in_transaction and result.status == runner.PUBLISHED
    conn.execute("ROLLBACK")  # the pass failed: the publish goes with it
    assert compartments(conn, pk) == []
    conn.execute("BEGIN IMMEDIATE")
    runner.run_once(conn, pk, keep=4, now_ms=NOW)
    conn.execute("COMMIT")
    assert covered(conn, pk) == (0, len(b.messages) - 6)


class Failing:
    name = "openai"
    model = "broken"

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None):
        raise ProviderHTTPError("HTTP 503: overloaded", provider="openai", status=503)


def test_failure_is_recorded_and_cleared(conn, monkeypatch: pytest.MonkeyPatch) -> None:
    pk = store_pi(conn, session().messages)
    recovered = runner.run_once(conn, pk, provider=Failing(), keep=30, now_ms=NOW)
    assert recovered.status == runner.PUBLISHED and recovered.provider == "extractive"
    failure = state(conn, pk, runner.FAILURE_KEY)
    assert failure["class"] == "http" and failure["provider"] == "openai" and failure["at"] == NOW
    assert failure["recovered_by"] == "extractive" and "503" in failure["message"]
    # every provider failing: the run fails loudly, nothing is published, the failure says why
    def broken(self, system, prompt, *, max_tokens=None):
        raise RuntimeError("extractive bug")

    monkeypatch.setattr(extractive.ExtractiveProvider, "complete", broken)
    failed = runner.run_once(conn, pk, provider=Failing(), keep=4, now_ms=NOW + 1)
    assert failed.status == runner.FAILED and failed.failure["class"] == "http"
    assert state(conn, pk, runner.FAILURE_KEY)["at"] == NOW + 1
    assert [a.kind for a in failed.attempts] == ["http", "internal"]
    assert state(conn, pk, runner.STATE_KEY)["last_status"] == "failed"
    monkeypatch.undo()
    ok = runner.run_once(conn, pk, keep=4, now_ms=NOW + 2)
    assert ok.status == runner.PUBLISHED and state(conn, pk, runner.FAILURE_KEY) is None


def test_publish_dedups_facts_and_refuses_a_stale_chunk(conn) -> None:
    b = PiBuilder().user("Never commit secrets to the repo.").say("Understood, I will not commit secrets.")
    b.user("ok").say("fine")
    pk = store_pi(conn, b.messages)
    other = store_pi(conn, b.messages, session_id="syn-2")
    assert runner.run_once(conn, pk, keep=1, now_ms=NOW).facts == 1
    assert runner.run_once(conn, other, keep=1, now_ms=NOW).facts == 0
    rows = conn.execute("SELECT content, seen_count, source_type FROM memories").fetchall()
    assert [tuple(r) for r in rows] == [("Never commit secrets to the repo.", 2, "historian")]
    assert state(conn, pk, publish.NOTE_TRIGGER_KEY) == NOW  # a publish arms the deferred-notes nudge
    assert publish.normalize_fact("  Never commit SECRETS to the repo!! ") == "never commit secrets to the repo"
    # a chunk read before another run published is refused
    digests, _ = chunk.digest_messages([], [])
    stale = chunk.Chunk(0, 1, digests, [], "", 0, 0, frozenset(), (), False, 0)
    xml = '<compartment start="0" end="1" title="t"><p1>x</p1><p2>x</p2><p3>x</p3><p4/></compartment>'
    with pytest.raises(publish.StalePublish):
        publish.publish(conn, pk, validate_historian_output(xml, 0, 1), stale, provider="x", model=None, now_ms=NOW)


def test_config_provider_chain_always_ends_extractive(conn) -> None:
    pk = store_pi(conn, session().messages)
    c = runner.plan(conn, pk, keep=4, emergency=False, protect_tokens=0, budget=32_000, harness="pi",
                    project_dir="/work/syn").chunk
    config = MCConfig.model_validate({"historian": {"provider": "openai", "fallback": [],
                                                    "openai": {"model": "m", "base_url": "http://127.0.0.1:9"}}})
    assert [p.name for p in runner.make_chain(config, None, c)] == ["openai", "extractive"]
    assert [p.name for p in runner.make_chain(config, "extractive", c)] == ["extractive"]
    assert [p.name for p in runner.make_chain(MCConfig(), "command", c)] == ["command", "extractive"]
    assert [p.name for p in runner.make_chain(MCConfig(), None, c)] == ["extractive"]


def test_background_launch_runs_detached_and_adopts_the_lease(conn) -> None:
    b = session()
    pk = store_pi(conn, b.messages, session_id="bg-session")
    conn.execute("UPDATE sessions SET context_limit = 10000 WHERE id = ?", (pk,))  # a small protected tail
    assert runner.background_argv("bg-session", "pi")[1:] == ["-m", "magic_context", "wrapup", "--background",
                                                               "--session", "bg-session", "--harness", "pi"]
    code = ("import sys; sys.path.insert(0, '.'); from magic_context.history.wrapup import run_background; "
            "run_background('bg-session', 'pi')")
    now = int(time.time() * 1000)
    started = time.monotonic()
    assert runner.launch_background(conn, pk, session_id="bg-session", harness="pi", now_ms=now,
                                    argv=[sys.executable, "-c", code])
    assert time.monotonic() - started < 2  # returns at once
    assert runner.is_running(conn, pk, now + 1)
    assert state(conn, pk, runner.STATE_KEY)["state"] == "running"
    assert not runner.launch_background(conn, pk, session_id="bg-session", harness="pi", now_ms=now + 1,
                                        argv=[sys.executable, "-c", "pass"])  # one run per session
    deadline = time.monotonic() + 60
    while runner.is_running(conn, pk, int(time.time() * 1000)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not runner.is_running(conn, pk, int(time.time() * 1000))
    first, last = covered(conn, pk)
    assert first == 0 and 0 < last < len(b.messages) - 4  # history folded, the protected tail left raw
    assert last == state(conn, pk, publish.LAST_PUBLISH_KEY)["end"]
    assert state(conn, pk, runner.STATE_KEY)["state"] == "idle"


def test_launch_failure_is_recorded(conn) -> None:
    pk = store_pi(conn, session().messages)
    assert not runner.launch_background(conn, pk, session_id="syn", harness="pi", now_ms=NOW,
                                        argv=["/nonexistent/mc-binary"])
    assert not runner.is_running(conn, pk, NOW + 1)
    assert state(conn, pk, runner.FAILURE_KEY)["class"] == "launch"


def test_inline_mode_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGIC_CONTEXT_HISTORIAN")  # conftest runs every test inline
    assert not runner.inline_mode()
    monkeypatch.setenv("MAGIC_CONTEXT_HISTORIAN", "inline")
    assert runner.inline_mode()


def test_emergency_from_the_last_pass_report_drains_past_the_live_prompt(conn) -> None:
    b = session(turns=6, padding=6_000)
    b.user("now do the big one")  # the live prompt, followed by a long autonomous turn
    for i in range(12):
        b.call("read", {"path": f"src/big{i}.py"}, "lorem ipsum dolor sit amet " * 200)
    pk = store_pi(conn, b.messages)
    conn.execute("UPDATE sessions SET context_limit = 40000 WHERE id = ?", (pk,))
    live_prompt = 36
    # calm: the live turn (~16k tokens) is within LIVE_TURN_FACTOR × the 4 000 protected, so it stays raw
    calm = runner.plan(conn, pk, keep=None, emergency=False, protect_tokens=4_000, budget=32_000, harness="pi",
                       project_dir="/work/syn")
    assert calm.bound.end < live_prompt
    report = {"usage_tokens": 36_000, "threshold_percent": 65, "pass": "execute"}  # 90%: the emergency band
    conn.execute("INSERT INTO pass_reports (session_pk, at, pass_kind, bust, reason, tokens_before, tokens_after, ms,"
                 " report_json) VALUES (?, ?, 'execute', 1, 'x', 0, 0, 1.0, ?)", (pk, NOW, json.dumps(report)))
    result = runner.run_once(conn, pk, now_ms=NOW)
    assert result.status == runner.PUBLISHED
    assert result.eligible_end > live_prompt  # the floor is gone in the emergency band
    assert result.next_start == result.end + 1  # and no discard-last: everything read is published
