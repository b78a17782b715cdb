"""bench/search_build.py and bench/search_bench.py: the replay is built as a live session would be, and a
held-out file's added questions are reported apart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bench import search_bench, search_build, search_misses

PI_BEFORE = search_build.SESSIONS / "pi_before-compaction.jsonl"
ROOT = "/Users/badlogic/workspaces/pi-mono"


def test_recorded_cwd_is_the_pi_header_cwd_and_none_elsewhere(tmp_path: Path) -> None:
    assert search_build.recorded_cwd(PI_BEFORE) == ROOT
    other = tmp_path / "x.jsonl"
    other.write_text('{"type": "message", "cwd": "/elsewhere"}\n')
    assert search_build.recorded_cwd(other) is None  # only a session header names the working directory
    other.write_text('{"type": "session", "cwd": "relative/dir"}\n')
    assert search_build.recorded_cwd(other) is None
    assert search_build.recorded_cwd(tmp_path / "missing.jsonl") is None


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The first 100 lines of pi_before replayed at a 12k window (~5 s), FTS only."""
    folder = tmp_path_factory.mktemp("replay")
    head = folder / "pi_head.jsonl"
    head.write_text("".join(PI_BEFORE.read_text(encoding="utf-8").splitlines(keepends=True)[:100]), encoding="utf-8")
    out = folder / "out.db"
    return out, search_build.build(head, 12_000, out, provider="off")


def test_replayed_compartments_name_files_relative_to_the_recorded_cwd(replayed: tuple[Path, dict]) -> None:
    """The live Pi integration sends `ctx.cwd` as project_dir, so the historian writes `Read packages/…`; a replay
    under an empty temporary project wrote every path in full (`Read /Users/…/pi-mono/packages/…`)."""
    out, facts = replayed
    assert facts["compartments"] >= 2
    conn = sqlite3.connect(out)
    try:
        assert conn.execute("SELECT project_dir FROM sessions").fetchone()[0] == ROOT
        text = "\n".join(row[0] for row in conn.execute("SELECT content FROM compartments"))
    finally:
        conn.close()
    assert "packages/coding-agent/src/" in text
    for verb in ("Read ", "read ", "Edited ", "edited "):
        assert verb + ROOT not in text


def test_questions_subset_keeps_original_or_added() -> None:
    spec = {"session": "s.jsonl", "questions": [{"q": "a"}, {"q": "b", "added": "2026-12-02"}, {"q": "c"}]}
    assert [q["q"] for q in search_bench.subset(spec, "original")["questions"]] == ["a", "c"]
    assert [q["q"] for q in search_bench.subset(spec, "added")["questions"]] == ["b"]
    assert search_bench.subset(spec, "all") is spec


def test_heldout_files_mark_every_added_question_and_keep_the_originals_first() -> None:
    for path in sorted(search_bench.SETS["heldout"].glob("*.json")):
        questions = json.loads(path.read_text())["questions"]
        marks = ["added" in q for q in questions]
        assert marks == sorted(marks), f"{path.name}: an added question sits among the original ones"
        for q in questions:
            assert q["kind"] in ("exact", "paraphrase", "decision", "first") and q["evidence"]


def test_misses_explains_where_a_folded_answer_sits(replayed: tuple[Path, dict]) -> None:
    """bench/search_misses.py's explanation of one question on a real replayed database: the evidence's ordinal,
    the compartment holding it (with the query words its summary matches) and the summary line covering it."""
    from magic_context.store.db import open_db

    out, _facts = replayed
    conn = open_db(str(out))
    try:
        pk = conn.execute("SELECT id FROM sessions").fetchone()[0]
        item = {"kind": "paraphrase", "q": "test the agent core", "evidence": ["allow us to test the agent core"]}
        why = search_misses.explain(conn, pk, item, "off", out)
    finally:
        conn.close()
    assert why["at"] == [13]  # "will this also allow us to test the agent core?" (user, ordinal 13)
    assert [c["range"] for c in why["compartments"]] and all("core" in c["matched"] for c in why["compartments"])
    assert why["lines"] and why["lines"][0].startswith("[13")
    assert why["rank50"] is not None and why["message_rank"] is not None
    assert why["cosine_rank"] is None  # FTS only: no cosine list
