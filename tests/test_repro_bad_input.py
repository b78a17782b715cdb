"""Issue #14 item 6: the bad-input reproducers of ../shared/data/repro/ through the real CLI.

Each malformed input exits 2 with one line naming the field, and writes nothing anywhere: no data dir,
no cache file on a fresh machine; no row in an existing database. An empty conversation is served unchanged.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import REPO, run_mc

REPRO = REPO.parent / "shared" / "data" / "repro"

# file -> words the one-line error must contain (the field it names)
BAD = {
    "opencode_info_string_crash.json": "`info`",
    "project_dir_nul.json": "project_dir",
    "now_1e30.json": "now",
    "opencode_status_list.json": "state.status",
}


def _repro(name: str, tmp_path: Path) -> bytes:
    text = (REPRO / name).read_text()
    return text.replace("$TMPDIR", str(tmp_path)).encode()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _db_rows(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _assert_one_line_error(stderr: bytes, field: str) -> None:
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("mc: error: ") and field in lines[0], lines[0]
    assert "Traceback" not in lines[0]


@pytest.mark.parametrize("name", sorted(BAD))
def test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine(name, tmp_path, isolated_dirs):
    assert not isolated_dirs["data"].exists()
    proc = run_mc("transform", stdin=_repro(name, tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""
    _assert_one_line_error(proc.stderr, BAD[name])
    assert not isolated_dirs["data"].exists(), _tree(isolated_dirs["data"])
    assert not isolated_dirs["config"].exists()


@pytest.mark.parametrize("name", sorted(BAD))
def test_repro_exit_2_leaves_an_existing_database_untouched(name, tmp_path, isolated_dirs):
    good = {"harness": "anthropic", "session_id": "s-good", "project_dir": str(tmp_path), "now": 1_764_000_000_000,
            "messages": [{"role": "user", "content": "hello"}]}
    assert run_mc("transform", stdin=json.dumps(good), cwd=tmp_path).returncode == 0
    db = isolated_dirs["data"] / "context.db"
    before, files = _db_rows(db), _tree(isolated_dirs["data"])
    proc = run_mc("transform", stdin=_repro(name, tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _db_rows(db) == before
    assert _tree(isolated_dirs["data"]) == files


def test_invalid_json_on_a_fresh_machine_writes_nothing(tmp_path, isolated_dirs):
    proc = run_mc("transform", stdin=b"{", cwd=tmp_path)
    assert proc.returncode == 2
    assert not isolated_dirs["data"].exists()


@pytest.mark.parametrize("now", [-1, 1e30, 253_402_300_800_000, "1764000000000", True])
def test_now_out_of_range_or_mistyped_is_exit_2(now, tmp_path):
    doc = {"now": now, "messages": [{"role": "user", "content": "hi"}]}
    proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    _assert_one_line_error(proc.stderr, "now")


def test_project_dir_must_be_a_path_string(tmp_path):
    doc = {"project_dir": 7, "messages": [{"role": "user", "content": "hi"}]}
    proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
    assert proc.returncode == 2
    _assert_one_line_error(proc.stderr, "project_dir")


def test_nul_in_the_project_flag_is_bad_input():  # argv cannot carry a NUL: the proxy passes options in process
    from magic_context.errors import BadInput
    from magic_context.transform import protocol

    with pytest.raises(BadInput, match="--project contains a NUL"):
        protocol.read_input([{"role": "user", "content": "hi"}], {"--project": "a\x00b"})


def test_opencode_wrong_typed_fields_name_the_field(tmp_path):
    base = json.loads((REPRO / "opencode_status_list.json").read_text())
    cases = {
        ("parts", "not a list"): "`parts`",
        ("info.role", 3): "info.role",
        ("info.id", None): "info.id",
    }
    for (field, value), expected in cases.items():
        doc = json.loads(json.dumps(base))
        if field == "parts":
            doc[1]["parts"] = value
        else:
            doc[1]["info"][field.split(".")[1]] = value
        proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
        assert proc.returncode == 2, (field, proc.stderr)
        _assert_one_line_error(proc.stderr, expected)


@pytest.mark.parametrize("doc", [
    [],
    {"messages": []},
    {"harness": "anthropic", "session_id": "s", "messages": []},
    {"model": "gpt-4o", "messages": []},
    {"model": "gpt-5", "input": []},
])
def test_an_empty_conversation_is_served_unchanged(doc, tmp_path, isolated_dirs):
    raw = json.dumps(doc).encode()
    proc = run_mc("transform", "--report", stdin=raw, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == doc
    assert json.loads(proc.stderr.decode().strip().splitlines()[-1])["reason"] == "empty conversation served unchanged"
    assert not (isolated_dirs["data"] / "context.db").exists()


def test_the_empty_bare_array_repro_is_served_unchanged(tmp_path):
    proc = run_mc("transform", stdin=(REPRO / "empty_bare_array.json").read_bytes(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


# Found by the fuzzer (tests/fault): shapes that crashed a codec instead of naming the field.
FUZZ_FINDINGS = {
    "anthropic block type is a list": ({"model": "m", "system": "s", "messages": [
        {"role": "user", "content": [{"type": ["text"], "text": "hi"}]}]}, {0, 2}),
    "responses part type is a list": ({"model": "m", "input": [
        {"type": "message", "role": "user", "content": [{"type": ["input_text"], "text": "hi"}]}]}, {0, 2}),
    "responses role is a list": ({"model": "m", "input": [
        {"type": "message", "role": ["user"], "content": "hi"}]}, {2}),
    "message type is a list": ({"messages": [{"type": ["reasoning"], "role": "user", "content": "hi"}]}, {0, 2}),
    "anthropic system block of the wrong type": ({"model": "m", "system": [["x"]], "messages": [
        {"role": "user", "content": "hi"}]}, {2}),
}


@pytest.mark.parametrize("name", sorted(FUZZ_FINDINGS))
def test_fuzz_findings_exit_cleanly(name, tmp_path, isolated_dirs):
    doc, codes = FUZZ_FINDINGS[name]
    proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
    assert proc.returncode in codes, proc.stderr
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr
    if proc.returncode == 2:
        assert not isolated_dirs["data"].exists()
    else:
        json.loads(proc.stdout)


@pytest.mark.parametrize("created", [-1e30, 1e30, -5, "2026-13-99T00:00:00"])
def test_message_times_out_of_range_are_dropped_not_stored(created, tmp_path):
    base = json.loads((REPRO / "opencode_status_list.json").read_text())
    base[1]["parts"][0]["state"]["status"] = "completed"
    base[0]["info"]["time"]["created"] = created
    proc = run_mc("transform", stdin=json.dumps(base), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b"", proc.stderr  # served normally: no fallback warning
    pi = [{"role": "user", "content": "hi", "timestamp": created}]
    proc = run_mc("transform", "--harness", "pi", stdin=json.dumps(pi), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
