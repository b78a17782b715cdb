"""The `--json` contract: every command prints one envelope with the same keys, and each command's `data`
carries exactly the keys pinned here. Real CLI in a subprocess, real SQLite in the test's storage dir.

A change to a command's `data` keys must change this file (and the README's contract notes) on purpose.
"""

from __future__ import annotations

import json

import pytest
from conftest import SESSIONS, run_mc
from historian_helpers import PiBuilder, store_pi

from magic_context.store import leases
from magic_context.store import tags as tag_rows
from magic_context.store.db import open_db

ENVELOPE_KEYS = {"mc_version", "envelope_version", "command", "data", "errors", "problems"}
PROBLEM_KEYS = {"code", "message", "fix"}
SESSION = "contract"

DATA_KEYS = {
    "status": {"session", "context", "tags", "pending_drops", "raw_messages", "compartments", "memories", "memory",
               "notes", "search", "fallbacks", "historian", "passes", "cache", "paths"},
    "doctor": {"checks", "summary", "paths"},
    "migrate": {"database", "dry_run", "applied", "pending", "already_applied", "schema_version", "target_version"},
    "reduce": {"queued", "already_pending", "message"},
    "wrapup": {"disposition", "reason", "rounds", "compartments", "facts", "start", "end", "keep", "providers",
               "failure"},
    "replay": {"file", "format", "harness", "context_limit", "context_limit_source", "ttl_seconds", "mode",
               "pricing", "strategies", "passes", "messages", "harness_compactions_removed", "config"},
    "setup": {"results"},
}


@pytest.fixture
def session_pk() -> int:
    """A stored Pi session with 30 tags (the newest 20 are protected from `mc reduce`)."""
    b = PiBuilder()
    for i in range(8):
        b.turn(f"please port module {i} to the new theme api", f"src/m{i}.py", padding=1_500)
    conn = open_db()
    try:
        pk = store_pi(conn, b.messages, session_id=SESSION)
        tag_rows.insert_rows(conn, [(pk, n, f"m{n}:text:0", "text", f"m{n}", "active", None, 10, 3, 0, None, 0)
                                    for n in range(1, 31)])
        return pk
    finally:
        conn.close()


def envelope(*args: str, expect_exit: int = 0, env: dict[str, str] | None = None) -> dict:
    proc = run_mc(*args, "--json", env=env)
    assert proc.returncode == expect_exit, proc.stderr.decode()
    document = json.loads(proc.stdout)
    assert set(document) == ENVELOPE_KEYS
    assert document["envelope_version"] == 1
    assert document["errors"] == [p["message"] for p in document["problems"]]
    assert all(set(p) == PROBLEM_KEYS for p in document["problems"])
    return document


@pytest.mark.parametrize("command, args", [
    ("status", ("status", "--session", SESSION)),
    ("reduce", ("reduce", "1-2", "--session", SESSION)),
    ("wrapup", ("wrapup", "--session", SESSION, "--keep", "4")),
    ("migrate", ("migrate", "--dry-run")),
])
def test_data_keys_of_each_command(session_pk: int, command: str, args: tuple[str, ...]) -> None:
    document = envelope(*args)
    assert document["command"] == command
    assert set(document["data"]) == DATA_KEYS[command]
    assert document["problems"] == []


def test_doctor_data_keys_and_its_failed_checks_are_coded_problems(tmp_path) -> None:
    ok = envelope("doctor")
    assert set(ok["data"]) == DATA_KEYS["doctor"] and ok["problems"] == []
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "context.db").write_bytes(b"not a database at all" * 100)
    broken = envelope("doctor", expect_exit=1, env={"MAGIC_CONTEXT_STORAGE_DIR": str(tmp_path / "db")})
    failed = {c["name"] for c in broken["data"]["checks"] if c["status"] == "fail"}
    assert failed and {p["code"] for p in broken["problems"]} == failed


def test_a_failed_wrapup_is_a_coded_problem(session_pk: int) -> None:
    conn = open_db()
    try:
        assert leases.acquire(conn, leases.historian_lease(session_pk), "someone-else", 2**62, 1)
    finally:
        conn.close()
    document = envelope("wrapup", "--session", SESSION, expect_exit=1)
    assert set(document["data"]) == DATA_KEYS["wrapup"]
    (problem,) = document["problems"]
    assert problem["code"] == document["data"]["disposition"] == "already_in_progress"
    assert problem["fix"] and document["errors"] == [problem["message"]]


def test_setup_data_keys(tmp_path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PI_CODING_AGENT_DIR": str(tmp_path / "pi-agent")}
    project = tmp_path / "project"
    project.mkdir()
    document = envelope("setup", "--harness", "pi", "--project", str(project), "--dry-run", env=env)
    assert set(document["data"]) == DATA_KEYS["setup"]


def test_replay_data_keys() -> None:
    file = SESSIONS / "claude-code" / "bookminder-subagent-a12564cd.jsonl"
    document = envelope("replay", str(file), "--context-limit", "20000", "--strategies", "native")
    assert set(document["data"]) == DATA_KEYS["replay"]


def test_proxy_status_envelope_when_nothing_runs() -> None:
    document = envelope("proxy", "status", expect_exit=1)
    assert document["command"] == "proxy status" and document["data"]["running"] is False
