"""Issue #14 item 8: a lease records its holder's pid and host; a dead holder's lease is taken over at once;
`mc status` never shows a dead historian as running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO, run_mc
from historian_helpers import PiBuilder, store_pi

from magic_context.store import leases
from magic_context.store.db import open_db

NAME = "historian:1"
HOUR = 3_600_000


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_lease_records_pid_and_host(conn):
    assert leases.acquire(conn, NAME, "run:a", 1_000, HOUR)
    holder, _ = leases.holder(conn, NAME)
    assert holder == f"run:a pid={os.getpid()} host={os.uname().nodename}"


def test_a_live_holder_keeps_its_lease_and_renews_it(conn):
    assert leases.acquire(conn, NAME, "run:a", 1_000, HOUR)
    assert not leases.acquire(conn, NAME, "run:b", 2_000, HOUR)
    assert leases.acquire(conn, NAME, "run:a", 3_000, HOUR)  # the same token renews
    assert leases.is_live(conn, NAME, 4_000)


def test_a_dead_holders_lease_is_taken_over_at_once(conn):
    assert leases.acquire(conn, NAME, "bg:dead", 1_000, HOUR, pid=_dead_pid())
    assert not leases.is_live(conn, NAME, 2_000)  # an hour before it would expire
    assert leases.acquire(conn, NAME, "run:b", 2_000, HOUR)
    assert leases.holder(conn, NAME)[0].startswith("run:b ")


def test_a_holder_on_another_host_is_trusted_until_expiry(conn):
    conn.execute("INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (?, ?, 0, ?)",
                 (NAME, f"run:x pid={_dead_pid()} host=elsewhere-{os.uname().nodename}", HOUR))
    assert leases.is_live(conn, NAME, 1_000)
    assert not leases.acquire(conn, NAME, "run:b", 1_000, HOUR)
    assert leases.acquire(conn, NAME, "run:b", HOUR + 1, HOUR)  # expired: taken


def test_hand_over_and_release_match_the_token(conn):
    assert leases.acquire(conn, NAME, "bg:tok", 1_000, HOUR)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        leases.hand_over(conn, NAME, "bg:tok", child.pid)
        assert f"pid={child.pid} " in leases.holder(conn, NAME)[0]
        assert leases.is_live(conn, NAME, 2_000)
        leases.release(conn, NAME, "bg:other")
        assert leases.holder(conn, NAME) is not None
        leases.release(conn, NAME, "bg:tok")
        assert leases.holder(conn, NAME) is None
    finally:
        child.kill()
        child.wait()


def test_a_killed_historian_is_not_shown_running_and_wrapup_takes_over_at_once(tmp_path, isolated_dirs):
    """kill -9 a real `mc wrapup` mid-run (its provider is a slow command): status says stopped at once,
    and the next `mc wrapup` runs instead of refusing until the 300 s lease expires."""
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text(textwrap.dedent(f"""
        [historian]
        provider = "command"
        fallback = ["extractive"]
        timeout_ms = 300000

        [historian.command]
        argv = ["{sys.executable}", "-c", "import time; time.sleep(60)"]
        """), encoding="utf-8")
    b = PiBuilder()
    for i in range(8):
        b.turn(f"please port module {i} to the new theme api", f"src/m{i}.py", padding=1_500)
    conn = open_db()
    try:
        store_pi(conn, b.messages, session_id="killed-historian")
    finally:
        conn.close()
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.Popen([sys.executable, "-m", "magic_context", "wrapup", "--session", "killed-historian",
                             "--keep", "5"], env=env, cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the run holds its lease
        state = json.loads(run_mc("status", "--session", "killed-historian", "--json").stdout)["data"]["historian"]
        if isinstance(state["state"], dict) and state["state"].get("state") == "running":
            break
        time.sleep(0.3)
    else:
        pytest.fail("the historian never started")
    assert f"pid={proc.pid} " in state["state"]["holder"]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    after = json.loads(run_mc("status", "--session", "killed-historian", "--json").stdout)["data"]["historian"]
    assert after["state"]["state"] == "stopped", after
    again = run_mc("wrapup", "--session", "killed-historian", "--keep", "5", "--provider", "extractive", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"]["disposition"] == "completed"


def test_a_launched_historian_waits_for_the_pass_that_started_it_to_commit(tmp_path, isolated_dirs):
    """A pass starts the detached historian mid-pass; on a session's first pass the session is not committed
    yet. The child used to look it up at once, find nothing, die, and leave its lease "running": a long
    session's first pass (seconds between the launch and the commit) never got its history compacted. Here
    the "pass" holds its transaction (session, raw history, the child's lease) for 2 s after the launch."""
    from magic_context.history import runner
    from magic_context.store import raw, sessions
    from magic_context.store.db import atomic
    from magic_context.wire import pi

    b = PiBuilder()
    for i in range(12):
        b.turn(f"please port module {i} to the new theme api", f"src/m{i}.py", padding=1_500)
    conn = open_db()
    env = dict(os.environ, **{runner.LEASE_ENV: "bg:launched"})
    env.pop("PYTEST_CURRENT_TEST", None)
    try:
        with atomic(conn):
            pk = sessions.ensure_session(conn, "pi", "first-pass", project_id="dir:x", project_dir=str(tmp_path),
                                         now_ms=1_764_000_000_000)
            raw.sync(conn, pk, pi.decode(b.messages), now_ms=1_764_000_000_000)
            assert leases.acquire(conn, runner.lease_name(pk), "bg:launched", 1_764_000_000_000, 300_000)
            child = subprocess.Popen([sys.executable, "-m", "magic_context", "wrapup", "--background", "--session",
                                      "first-pass", "--harness", "pi"], env=env, cwd=REPO,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(2)
            assert child.poll() is None, child.stderr.read()  # still waiting, not dead
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert leases.holder(conn, runner.lease_name(pk)) is None  # released
    finally:
        conn.close()
    state = json.loads(run_mc("status", "--session", "first-pass", "--json").stdout)["data"]["historian"]["state"]
    assert state["state"] == "idle" and state["last_status"] in ("published", "nothing"), state  # it ran
