"""Issue #14 item 2: "exit 4 only when nothing can be done, and its advice works". Each test makes a real
exit 4 through the CLI, does exactly what the printed advice says, and shows the retry of the same request
is served (exit 0) and fits the window.

Exit 4 comes when the provider-reported usage is in the ≥95% band and even dropping everything droppable
leaves it there. Two situations, two pieces of advice:

* many messages whose placeholders alone fill the window: only compacting older history frees them. The
  pass started the historian (detached, as live), so the advice is to retry once `mc status` no longer
  shows it running (before, it said `mc wrapup`, which then refused with "already in progress" — and on a
  session's first pass found no session at all, since the failed pass stored nothing);
* the request's own fixed part (system prompt, tools) fills the window: nothing mc does helps, so the
  advice is a new session or a model with a larger window.
"""

from __future__ import annotations

import json
import time

from conftest import run_mc

LIMIT = 30_000


def _request(turns: int, *, limit: int, used: int) -> bytes:
    """The request, dated now: the pass dates the historian's lease by `now` and `mc status` reads the lease
    by the wall clock, so a date taken at import time (minutes earlier in a loaded full run) would show a
    live historian as stopped."""
    now = int(time.time() * 1000)
    messages: list = []
    for i in range(turns):
        messages += [{"role": "user", "content": f"go {i}"}, {"role": "assistant", "content": f"done {i}"}]
    messages.append({"role": "user", "content": "and now?"})
    return json.dumps({"harness": "anthropic", "session_id": "e4", "project_dir": "/tmp/e4-project", "now": now,
                       "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "context_limit": limit},
                       "usage": {"input_tokens": used, "output_tokens": 10}, "messages": messages}).encode()


def _exit_4_advice(data: bytes) -> str:
    proc = run_mc("transform", stdin=data)
    err = proc.stderr.decode()
    assert proc.returncode == 4 and proc.stdout == b"", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mc: error: context at "), err
    return lines[0].split(" — ", 1)[1]


def _served_and_fits(data: bytes, limit: int) -> dict:
    proc = run_mc("transform", "--report", stdin=data)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert isinstance(json.loads(proc.stdout)["messages"], list)
    report = json.loads(err.strip().splitlines()[-1])
    assert report["tokens_after"] < 0.95 * limit, report  # the request fits (out of the ≥95% band)
    return report


def test_many_messages_wait_for_the_historian_then_the_retry_fits(monkeypatch):
    monkeypatch.delenv("MAGIC_CONTEXT_HISTORIAN")  # the detached historian, as a live harness runs it
    data = _request(1500, limit=LIMIT, used=LIMIT - 500)  # 3 001 short messages: drops cannot free them
    advice = _exit_4_advice(data)
    assert advice == ("the historian is compacting older history now: retry once `mc status --session e4` "
                      "no longer shows it running")
    deadline = time.monotonic() + 180
    while True:  # exactly what the advice says
        status = run_mc("status", "--session", "e4", "--json")
        assert status.returncode == 0, status.stderr  # the session exists: the exit-4 pass stored its history
        state = json.loads(status.stdout)["data"]["historian"]["state"]
        if (state.get("state") if isinstance(state, dict) else state) != "running":
            break
        assert time.monotonic() < deadline, "the historian never finished"
        time.sleep(0.5)
    report = _served_and_fits(data, LIMIT)
    assert report["pass"] == "fold"  # older history left the request as compartments


def test_a_window_filled_by_the_fixed_part_advises_a_larger_window_which_works():
    """Three short messages but the provider counted 1 990 of 2 000 tokens: the system prompt and tools the
    harness sends fill the window. Compacting cannot help (before, the advice was `mc wrapup` all the
    same); a model with a larger window does: the same conversation sent to one is served and fits."""
    data = _request(1, limit=2000, used=1990)
    advice = _exit_4_advice(data)
    assert advice == ("the system prompt, the tool definitions and the newest turn fill it, which mc cannot "
                      "shrink: start a new session or use a model with a larger window")
    larger = json.loads(data)
    larger["model"]["context_limit"] = 200_000
    _served_and_fits(json.dumps(larger).encode(), 200_000)
