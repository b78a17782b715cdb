"""`mc memory` and `mc note` through the real CLI in a subprocess: --json envelopes, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_mc


def ok(*args: str, stdin: str | None = None) -> dict:
    proc = run_mc(*args, "--json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr.decode()
    envelope = json.loads(proc.stdout)
    expected = " ".join(args[:2]) if args[0] in ("memory", "note") else args[0]
    assert envelope["command"] == expected and envelope["errors"] == []
    return envelope["data"]


def fails(*args: str, stdin: str | None = None, code: int = 2) -> str:
    proc = run_mc(*args, stdin=stdin)
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert proc.stdout == b"" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def proj(tmp_path: Path) -> str:
    path = tmp_path / "proj"
    path.mkdir()
    return str(path)


def test_memory_lifecycle_through_the_cli(proj) -> None:
    added = ok("memory", "add", "Never edit a landed migration", "--category", "constraints", "--project", proj)
    first = added["memory"]
    assert added["created"] and first["category"] == "CONSTRAINTS" and first["source_type"] == "user"
    again = ok("memory", "add", "never edit a landed migration.", "-c", "CONSTRAINTS", "--project", proj)
    assert not again["created"] and again["memory"]["id"] == first["id"] and again["memory"]["seen_count"] == 2
    second = ok("memory", "add", "Migrations are append-only", "-c", "CONSTRAINTS", "--project", proj,
                "--source", "agent")["memory"]
    assert second["source_type"] == "agent"

    listed = ok("memory", "list", "--project", proj)
    assert [m["id"] for m in listed["memories"]] == [first["id"], second["id"]] and listed["count"] == 2
    elsewhere = ok("memory", "add", "Elsewhere", "-c", "NAMING", "--project", str(Path(proj).parent))["memory"]
    everywhere = ok("memory", "list", "--all-projects")
    assert everywhere["project_id"] is None and elsewhere["id"] in [m["id"] for m in everywhere["memories"]]
    assert elsewhere["id"] not in [m["id"] for m in ok("memory", "list", "--project", proj)["memories"]]
    assert "normalized_hash" not in listed["memories"][0]

    edited = ok("memory", "edit", str(second["id"]), "--content", "Migrations are append-only, never edited",
                "--importance", "80")["memory"]
    assert edited["content"].endswith("never edited") and edited["importance"] == 80

    merged = ok("memory", "merge", str(first["id"]), str(second["id"]), "--content",
                "Landed migrations are never edited; add a new one")
    assert merged["superseded"] == [first["id"], second["id"]] and merged["memory"]["seen_count"] == 3
    canonical = merged["memory"]["id"]
    shown = ok("memory", "show", str(first["id"]))["memory"]
    assert (shown["status"], shown["superseded_by"]) == ("archived", canonical)

    archived = ok("memory", "archive", str(canonical), "--reason", "moved to docs")
    assert archived["memories"][0]["metadata"] == {"archive_reason": "moved to docs"}
    assert ok("memory", "list", "--project", proj)["count"] == 0
    assert ok("memory", "list", "--project", proj, "--status", "all")["count"] == 3
    assert ok("memory", "restore", str(canonical))["memory"]["status"] == "active"
    assert ok("memory", "rm", str(first["id"]))["removed"] == [first["id"]]
    assert "not found" in fails("memory", "show", str(first["id"]))


def test_memory_bad_input_is_one_line_and_writes_nothing(proj) -> None:
    assert "content: memory content is empty" in fails("memory", "add", "  ", "-c", "NAMING", "--project", proj)
    assert "unknown memory category 'vibes'" in fails("memory", "add", "x", "-c", "vibes", "--project", proj)
    assert "memory #424242 not found" in fails("memory", "edit", "424242", "--content", "x")
    assert "memory #424242 not found" in fails("memory", "archive", "424242")
    assert "unknown status" in fails("memory", "list", "--status", "gone", "--project", proj)
    assert ok("memory", "list", "--project", proj, "--status", "all")["count"] == 0
    mid = str(ok("memory", "add", "x", "-c", "NAMING", "--project", proj)["memory"]["id"])
    assert "nothing to change" in fails("memory", "edit", mid)
    assert "importance must be an integer from 1 to 100" in fails("memory", "edit", mid, "--importance", "0")
    assert "give at least 2 distinct memory ids" in fails("memory", "merge", mid, mid)
    assert "--source: unknown writer 'historian'" in fails("memory", "add", "y", "-c", "NAMING", "--source",
                                                           "historian", "--project", proj)
    assert ok("memory", "show", mid)["memory"]["content"] == "x"


def test_export_import_round_trip_and_bad_lines(proj, tmp_path) -> None:
    ok("memory", "add", "alpha fact", "-c", "ARCHITECTURE", "--project", proj)
    ok("memory", "add", "beta fact", "-c", "NAMING", "--project", proj, "--permanent")
    exported = run_mc("memory", "export", "--project", proj)
    assert exported.returncode == 0
    lines = exported.stdout.decode().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["alpha fact", "beta fact"]

    other = tmp_path / "other"
    other.mkdir()
    result = ok("memory", "import", "-", "--project", str(other), stdin=exported.stdout.decode())
    assert (result["imported"], result["existing"]) == (2, 0)
    assert ok("memory", "import", "-", "--project", str(other), stdin=exported.stdout.decode())["existing"] == 2
    again = run_mc("memory", "export", "--project", str(other))
    strip = [{k: v for k, v in json.loads(line).items() if k not in ("id", "project_id")}
             for line in again.stdout.decode().splitlines()]
    assert strip == [{k: v for k, v in json.loads(line).items() if k not in ("id", "project_id")} for line in lines]

    file = tmp_path / "m.jsonl"
    ok("memory", "export", "--project", proj, "-o", str(file))
    assert file.read_text().splitlines() == lines

    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + '{"content": "x", "category": "WHATEVER"}\n')
    third = tmp_path / "third"
    third.mkdir()
    err = fails("memory", "import", str(bad), "--project", str(third))
    assert "line 2: field 'category': unknown memory category 'WHATEVER'" in err and "nothing was imported" in err
    assert ok("memory", "list", "--project", str(third), "--status", "all")["count"] == 0
    assert "cannot read" in fails("memory", "import", str(tmp_path / "missing.jsonl"))
    dry = ok("memory", "import", str(file), "--project", str(third), "--dry-run")
    assert dry["imported"] == 2 and dry["dry_run"]
    assert ok("memory", "list", "--project", str(third), "--status", "all")["count"] == 0


def test_notes_through_the_cli(proj) -> None:
    plain = ok("note", "add", "rerun the flaky proxy test", "--project", proj)["note"]
    proc = run_mc("note", "add", "drop the shim", "--condition", "when httpx 1.0 is out", "--project", proj, "--json")
    assert proc.returncode == 0
    envelope = json.loads(proc.stdout)
    smart = envelope["data"]
    assert envelope["errors"] == [] and "the dreamer is off" in smart["warnings"][0]
    assert plain["type"] == "project" and smart["note"]["status"] == "pending"
    assert "Condition: when httpx 1.0 is out" in smart["message"]
    listed = ok("note", "list", "--project", proj)
    assert [n["id"] for n in listed["notes"]] == [smart["note"]["id"], plain["id"]]
    assert ok("note", "dismiss", str(plain["id"]), "--project", proj)["note"]["status"] == "dismissed"
    assert "already dismissed" in fails("note", "dismiss", str(plain["id"]), "--project", proj)
    assert ok("note", "list", "--project", proj)["count"] == 1
    assert ok("note", "list", "--project", proj, "--status", "all")["count"] == 2
    assert "no session 'ses_nope'" in fails("note", "add", "x", "--session", "ses_nope")
    assert "content: note content is empty" in fails("note", "add", " ", "--project", proj)


def test_human_output(proj) -> None:
    proc = run_mc("memory", "add", "tables & <tags>", "-c", "NAMING", "--project", proj)
    assert proc.returncode == 0 and "Saved memory [ID: " in proc.stdout.decode()
    listed = run_mc("memory", "list", "--project", proj)
    assert "tables & <tags>" in listed.stdout.decode()


def test_status_shows_memory_and_note_counts(proj) -> None:
    envelope = json.dumps({"messages": [{"role": "user", "content": "hi"}], "harness": "openai",
                           "session_id": "ses_cli_mem", "project_dir": proj})
    ok("memory", "add", "first fact", "-c", "NAMING", "--project", proj)
    archived = ok("memory", "add", "second fact", "-c", "NAMING", "--project", proj)["memory"]["id"]
    ok("memory", "archive", str(archived))
    assert run_mc("transform", stdin=envelope).returncode == 0
    ok("note", "add", "look again", "--session", "ses_cli_mem")
    data = ok("status", "--session", "ses_cli_mem")
    assert (data["memories"], data["memory"]["active"], data["memory"]["archived"]) == (1, 1, 1)
    assert data["notes"]["active"] == 1
    human = run_mc("status", "--session", "ses_cli_mem").stdout.decode()
    assert "memory   1 active, 1 archived; notes: 1 waiting, 0 ready" in human
