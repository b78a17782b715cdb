"""Git commit index (§5) on a real temporary repository: HEAD-only, non-merge, bounded, refreshed on demand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from magic_context.config.model import GitCommitIndexing, MCConfig
from magic_context.search import engine, git
from magic_context.store.db import open_db

DAY = 86_400_000


def _git(repo: Path, *args: str, when: str = "2026-11-20T10:00:00") -> None:
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    for i, subject in enumerate(["Add the zebra parser", "Fix stripe counting in the zebra parser",
                                 "Rename walrus to pinniped"]):
        (root / f"f{i}.txt").write_text(subject)
        _git(root, "add", ".")
        _git(root, "commit", "-q", "-m", subject, "-m", f"Body line {i}", when=f"2026-11-2{i}T10:00:00")
    _git(root, "checkout", "-q", "-b", "side")
    (root / "side.txt").write_text("x")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "Side branch quokka work", when="2026-11-24T10:00:00")
    _git(root, "checkout", "-q", "main")
    _git(root, "merge", "-q", "--no-ff", "side", "-m", "Merge branch side with quokka", when="2026-11-25T10:00:00")
    _git(root, "checkout", "-q", "-b", "abandoned")
    (root / "gone.txt").write_text("x")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "Abandoned okapi experiment", when="2026-11-26T10:00:00")
    _git(root, "checkout", "-q", "main")
    return root


NOW_MS = 1_796_083_200_000  # 2026-12-01T00:00:00Z


def settings(**kw) -> GitCommitIndexing:
    return GitCommitIndexing(**{"enabled": True, "since_days": 365, "max_commits": 2000, **kw})


def test_refresh_indexes_head_non_merge_commits_only(repo) -> None:
    conn = open_db()
    result = git.refresh(conn, "git:p", str(repo), settings(), now_ms=NOW_MS)
    assert result.status == "refreshed" and result.added == 4
    messages = [r[0] for r in conn.execute("SELECT message FROM git_commits ORDER BY committed_at")]
    assert [m.split("\n")[0] for m in messages] == ["Add the zebra parser", "Fix stripe counting in the zebra parser",
                                                    "Rename walrus to pinniped", "Side branch quokka work"]
    assert messages[0] == "Add the zebra parser\n\nBody line 0"
    # a second refresh within the cooldown does nothing; forced, it adds nothing new
    assert git.refresh(conn, "git:p", str(repo), settings(), now_ms=NOW_MS + 1000).status == "cooldown"
    assert git.refresh(conn, "git:p", str(repo), settings(), now_ms=NOW_MS, force=True).added == 0


def test_bounded_by_count_and_age(repo) -> None:
    conn = open_db()
    git.refresh(conn, "git:p", str(repo), settings(max_commits=2), now_ms=NOW_MS)
    assert [r[0].split("\n")[0] for r in conn.execute("SELECT message FROM git_commits ORDER BY committed_at")] == [
        "Rename walrus to pinniped", "Side branch quokka work"]
    conn2 = open_db()
    conn2.execute("DELETE FROM git_commits")
    git.refresh(conn2, "git:q", str(repo), settings(since_days=9), now_ms=NOW_MS, force=True)
    assert conn2.execute("SELECT count(*) FROM git_commits WHERE project_id = 'git:q'").fetchone()[0] == 2


def test_not_a_work_tree_is_off_and_parked(tmp_path) -> None:
    conn = open_db()
    assert git.refresh(conn, "dir:x", str(tmp_path), settings(), now_ms=NOW_MS).status == "not_git"
    assert git.refresh(conn, "dir:x", str(tmp_path), settings(), now_ms=NOW_MS + DAY - 1).status == "not_git"
    assert conn.execute("SELECT count(*) FROM git_commits").fetchone()[0] == 0


def test_search_lane_finds_commits_and_refreshes_on_demand(repo) -> None:
    conn = open_db()
    config = MCConfig.model_validate({"embedding": {"provider": "off"},
                                      "memory": {"git_commit_indexing": {"enabled": True}}})
    result = engine.search(conn, "stripe counting", session_pks=[], project_id="git:p", config=config,
                           now_ms=NOW_MS, project_dir=str(repo), sources=["git_commit"])
    assert result.hits and result.hits[0].snippet.startswith("Fix stripe counting")
    assert result.hits[0].score == pytest.approx(0.8 * 1.2)
    from magic_context.search import format as fmt

    block = fmt.block(1, result.hits[0], NOW_MS)
    assert block.startswith(f"[1] [git_commit] score=0.96 sha={result.hits[0].sha[:7]} ") and "match=fts" in block
    # the merge commit and the abandoned branch are not searchable
    assert engine.search(conn, "okapi", session_pks=[], project_id="git:p", config=config, now_ms=NOW_MS,
                         project_dir=str(repo), sources=["git_commit"]).hits == []
    # LIKE fallback when FTS finds nothing (a fragment inside a word)
    like = engine.search(conn, "innip", session_pks=[], project_id="git:p", config=config, now_ms=NOW_MS,
                         project_dir=str(repo), sources=["git_commit"])
    assert [h.snippet.split("\n")[0] for h in like.hits] == ["Rename walrus to pinniped"]


def test_commit_triggers_follow_edits_and_deletes(repo) -> None:
    conn = open_db()
    git.refresh(conn, "git:p", str(repo), settings(), now_ms=NOW_MS)
    row_id = conn.execute("SELECT id FROM git_commits WHERE message LIKE 'Add the zebra%'").fetchone()[0]
    conn.execute("UPDATE git_commits SET message = 'Add the capybara parser' WHERE id = ?", (row_id,))
    assert [r[0] for r in conn.execute("SELECT rowid FROM git_commit_fts WHERE git_commit_fts MATCH 'capybara'")] \
        == [row_id]
    conn.execute("DELETE FROM git_commits WHERE id = ?", (row_id,))
    assert conn.execute("SELECT count(*) FROM git_commit_fts WHERE git_commit_fts MATCH 'capybara'").fetchone()[0] == 0
