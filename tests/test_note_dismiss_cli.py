"""`mc note dismiss` through the real CLI: it reaches only a note `mc note list` with the same flags shows.

Regression (#12 acceptance): run from another project's directory, `mc note dismiss 1` dismissed project A's
note #1. Now it names the id and the scope it looked in, exits 2 and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_mc

from magic_context import project
from magic_context.store import raw as raw_store
from magic_context.store.db import open_db


def _json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)["data"]


def _refused(proc) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"" and len(err.strip().splitlines()) == 1, err
    return err


def _note(note_id: int, where: Path) -> dict:
    rows = _json(run_mc("note", "list", "--project", str(where), "--status", "all", "--json"))["notes"]
    return next(n for n in rows if n["id"] == note_id)


def test_dismiss_from_another_projects_directory_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    note = _json(run_mc("note", "add", "rerun the flaky test", "--project", str(a), "--json"))["note"]
    before = _note(note["id"], a)

    err = _refused(run_mc("note", "dismiss", str(note["id"]), cwd=b))
    assert f"note #{note['id']} not found among project {project.identity(b)}'s notes" in err
    _refused(run_mc("note", "dismiss", str(note["id"]), "--project", str(b), "--json"))
    assert _note(note["id"], a) == before  # nothing written: still active, same updated_at

    done = _json(run_mc("note", "dismiss", str(note["id"]), "--json", cwd=a))
    assert done["note"]["status"] == "dismissed" and done["message"] == f"Note #{note['id']} dismissed."
    assert f"note #{note['id']} is already dismissed" in _refused(run_mc("note", "dismiss", str(note["id"]), cwd=a))


def test_dismiss_with_session_sees_its_own_and_its_projects_notes(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    pid = project.identity(proj)
    conn = open_db()
    for sid in ("ses_one", "ses_two"):
        raw_store.ensure_session(conn, "opencode", sid, project_id=pid, project_dir=str(proj), now_ms=1)
    conn.close()
    own = _json(run_mc("note", "add", "one's own", "--session", "ses_one", "--json"))["note"]
    shared = _json(run_mc("note", "add", "for all", "--session", "ses_one", "--project-note", "--json"))["note"]

    err = _refused(run_mc("note", "dismiss", str(own["id"]), "--session", "ses_two"))
    assert f"note #{own['id']} not found among session ses_two's notes and project {pid}'s project notes" in err
    assert _note(own["id"], proj)["status"] == "active"
    assert _json(run_mc("note", "dismiss", str(shared["id"]), "--session", "ses_two", "--json"))["note"]["status"] \
        == "dismissed"
    assert _json(run_mc("note", "dismiss", str(own["id"]), "--session", "ses_one", "--json"))["note"]["status"] \
        == "dismissed"
