"""The `--json` contract: every command prints one envelope with the same keys, and each command's `data`
carries exactly the keys pinned here. Real CLI in a subprocess, real SQLite in the test's storage dir.

Every command that takes `--json` (found by walking the command tree) must be pinned in DATA_KEYS, so a
new command cannot ship an unpinned envelope. A change to a command's `data` keys must change this file
(and the README's contract notes) on purpose.
"""

from __future__ import annotations

import json

import pytest
from conftest import SESSIONS, run_mc
from fake_llm_server import FakeLLMServer
from historian_helpers import PiBuilder, store_pi
from proxy_helpers import proxy_process
from search_helpers import session_with_history

from commands._docs import walk
from magic_context.store import leases
from magic_context.store import tags as tag_rows
from magic_context.store.db import open_db

ENVELOPE_KEYS = {"mc_version", "envelope_version", "command", "data", "errors", "problems"}
PROBLEM_KEYS = {"code", "message", "fix"}
SESSION = "contract"

DATA_KEYS = {
    "status": {"session", "context", "tags", "pending_drops", "raw_messages", "compartments", "memories", "memory",
               "notes", "search", "fallbacks", "historian", "passes", "cache", "paths", "config"},
    "doctor": {"checks", "summary", "paths"},
    "migrate": {"database", "dry_run", "applied", "pending", "already_applied", "schema_version", "target_version"},
    "reduce": {"queued", "already_pending", "message"},
    "wrapup": {"disposition", "reason", "rounds", "compartments", "facts", "start", "end", "keep", "providers",
               "failure"},
    "replay": {"file", "format", "harness", "context_limit", "context_limit_source", "ttl_seconds", "mode",
               "pricing", "strategies", "passes", "messages", "harness_compactions_removed", "config"},
    "setup": {"results"},
    "search": {"query", "sources", "session_id", "project_id", "results", "warnings"},
    "embed": {"model_id", "model", "provider", "sessions", "projects", "embedded", "messages", "skipped", "left",
              "failed", "complete", "error"},
    "expand": {"kind", "start", "end", "tokens", "truncated_at", "next_range", "messages", "text"},
    "memory list": {"project_id", "count", "memories"},
    "memory show": {"memory"},
    "memory add": {"memory", "created", "message"},
    "memory edit": {"memory"},
    "memory archive": {"memories", "message"},
    "memory restore": {"memory"},
    "memory merge": {"memory", "superseded", "message"},
    "memory rm": {"removed", "message"},
    "memory export": {"project_id", "count", "memories"},  # to stdout; with --output: OUTPUT_EXPORT_KEYS
    "memory import": {"project_id", "imported", "existing", "dry_run", "message"},
    "note add": {"note", "message", "warnings"},
    "note list": {"project_id", "count", "notes"},
    "note dismiss": {"note", "message"},
    "proxy status": {"running", "record_file", "log_file", "background_log_file"},  # nothing runs: RUNNING_KEYS
    "proxy stop": {"stopped", "reason"},  # nothing ran; stopped: STOPPED_KEYS
}
OUTPUT_EXPORT_KEYS = {"project_id", "count", "path"}
PROXY_RUNNING_KEYS = {"running", "responding", "pid", "address", "host", "port", "upstreams", "mc_version",
                      "started_at", "status", "uptime_s", "in_flight", "counts", "record_file", "log_file",
                      "background_log_file"}
PROXY_STOPPED_KEYS = {"stopped", "pid", "address"}
MEMORY_KEYS = {"id", "project_id", "category", "content", "status", "importance", "source_type", "source_session",
               "seen_count", "retrieval_count", "created_at", "updated_at", "last_seen_at", "last_retrieved_at",
               "expires_at", "superseded_by", "merged_from", "metadata", "expired"}
NOTE_KEYS = {"id", "type", "status", "content", "session_pk", "project_id", "surface_condition", "created_at",
             "updated_at", "ready_reason", "ready_at", "dismissed_at", "last_checked_at", "anchor_ordinal"}


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
    ("embed", ("embed", "--session", SESSION)),
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


def test_every_command_with_json_is_pinned() -> None:
    with_json = {" ".join(doc.path) for doc in walk() if any("--json" in flag.names for flag in doc.flags)}
    assert with_json == set(DATA_KEYS)


def pinned(document: dict, command: str, keys: set[str] | None = None) -> dict:
    assert document["command"] == command
    assert set(document["data"]) == (DATA_KEYS[command] if keys is None else keys), command
    return document["data"]


def test_search_and_expand_data_keys() -> None:
    conn = open_db()
    try:
        session_with_history(conn, session_id="folded")
    finally:
        conn.close()
    found = pinned(envelope("search", "ZebraStripeError", "--session", "folded"), "search")
    assert found["results"] and found["session_id"] == "folded"
    for args in (("--range", "0-5"), ("--message", "2"), ("--range", "11-13")):  # a range, a message, the live tail
        pinned(envelope("expand", "--session", "folded", *args), "expand")


def test_memory_data_keys(tmp_path) -> None:
    project = str(tmp_path / "project")
    (tmp_path / "project").mkdir()
    first = pinned(envelope("memory", "add", "Never edit a landed migration", "-c", "CONSTRAINTS", "--project",
                            project), "memory add")
    second = pinned(envelope("memory", "add", "Migrations are append-only", "-c", "CONSTRAINTS", "--project",
                             project), "memory add")
    assert set(first["memory"]) == MEMORY_KEYS
    one, two = str(first["memory"]["id"]), str(second["memory"]["id"])
    listed = pinned(envelope("memory", "list", "--project", project), "memory list")
    assert listed["count"] == 2 and all(set(m) == MEMORY_KEYS for m in listed["memories"])
    pinned(envelope("memory", "show", one), "memory show")
    pinned(envelope("memory", "edit", one, "--importance", "80"), "memory edit")
    pinned(envelope("memory", "archive", one, "--reason", "stale"), "memory archive")
    pinned(envelope("memory", "restore", one), "memory restore")
    exported = pinned(envelope("memory", "export", "--project", project), "memory export")
    out = tmp_path / "memories.jsonl"
    pinned(envelope("memory", "export", "--project", project, "--output", str(out)), "memory export",
           OUTPUT_EXPORT_KEYS)
    assert exported["count"] == 2 and len(out.read_text().splitlines()) == 2
    other = tmp_path / "other"
    other.mkdir()
    imported = pinned(envelope("memory", "import", str(out), "--project", str(other)), "memory import")
    assert imported["imported"] == 2
    merged = pinned(envelope("memory", "merge", one, two, "--content", "Migrations are append-only"),
                    "memory merge")
    pinned(envelope("memory", "rm", str(merged["memory"]["id"])), "memory rm")


def test_note_data_keys(session_pk: int) -> None:
    added = pinned(envelope("note", "add", "rerun the flaky test", "--session", SESSION), "note add")
    assert set(added["note"]) == NOTE_KEYS and added["warnings"] == []
    listed = pinned(envelope("note", "list", "--session", SESSION), "note list")
    assert listed["count"] == 1 and set(listed["notes"][0]) == NOTE_KEYS
    pinned(envelope("note", "dismiss", str(added["note"]["id"]), "--session", SESSION), "note dismiss")


def test_proxy_data_keys_running_and_not() -> None:
    idle = envelope("proxy", "status", expect_exit=1)
    assert pinned(idle, "proxy status")["running"] is False
    assert [p["code"] for p in idle["problems"]] == ["not_running"]
    nothing = envelope("proxy", "stop", expect_exit=1)
    assert pinned(nothing, "proxy stop")["stopped"] is False
    assert [p["code"] for p in nothing["problems"]] == ["not_running"]
    with FakeLLMServer() as fake, proxy_process("--upstream-anthropic", fake.url) as proxy:
        running = pinned(envelope("proxy", "status"), "proxy status", PROXY_RUNNING_KEYS)
        assert running["pid"] == proxy.proc.pid
        stopped = pinned(envelope("proxy", "stop"), "proxy stop", PROXY_STOPPED_KEYS)
        assert stopped["stopped"] and proxy.proc.wait(20) == 0
