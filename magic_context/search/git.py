"""Git commit index (§5): HEAD-only, non-merge commits bounded by age and count, refreshed on demand.

`refresh` runs `git log HEAD --no-merges` incrementally (from the newest indexed commit minus 60 s, or
`since_days` back), upserts, and evicts the oldest commits beyond `max_commits`. A directory that is not
a git work tree (or has no HEAD) is skipped and remembered for 24 h; a refresh within 10 minutes of the
last one is skipped (`force` overrides both).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from typing import Any, Final

from magic_context.errors import CheckFailed
from magic_context.records import record

US: Final = "\x1f"
RS: Final = "\x1e"
TIMEOUT_S: Final = 10
COOLDOWN_MS: Final = 10 * 60_000
PARK_MS: Final = 24 * 3_600_000


@record
class RefreshResult:
    status: str  # refreshed, cooldown, not_git
    added: int = 0
    evicted: int = 0


def _key(project_id: str) -> str:
    return f"git:{project_id}"


def is_work_tree(project_dir: str) -> bool:
    try:
        proc = subprocess.run(["git", "-C", project_dir, "rev-parse", "--is-inside-work-tree"], capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def read_log(project_dir: str, since_ms: int, max_count: int) -> list[tuple[str, str, str | None, int]]:
    """(sha, message, author email, committed_at ms) of HEAD's non-merge commits since `since_ms`, newest first."""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(0, since_ms) / 1000))
    try:
        proc = subprocess.run(["git", "-C", project_dir, "log", "HEAD", "--no-merges", f"--max-count={max_count}",
                               f"--since={since}", f"--format=%H{US}%s{US}%ae{US}%ct{US}%b{RS}"],
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CheckFailed(f"git log failed in {project_dir}: {exc}") from exc
    if proc.returncode != 0:
        raise CheckFailed(f"git log failed in {project_dir}: {proc.stderr.decode(errors='replace').strip()[:200]}")
    out = []
    for entry in proc.stdout.decode("utf-8", "replace").split(RS):
        fields = entry.strip("\n").split(US)
        if len(fields) < 5:
            continue
        sha, subject, email, ct, body = fields[0].strip(), fields[1], fields[2], fields[3], US.join(fields[4:])
        if len(sha) != 40 or not ct.strip().isdigit() or int(ct) <= 0:
            continue
        message = subject + ("\n\n" + body.strip() if body.strip() else "")
        out.append((sha, message, email or None, int(ct) * 1000))
    return out


def refresh(conn: sqlite3.Connection, project_id: str, project_dir: str, settings: Any, *, now_ms: int | None = None,
            force: bool = False) -> RefreshResult:
    """Bring the project's commit index up to date (see the module docstring)."""
    from magic_context.store import search_index as idx
    from magic_context.store.db import atomic as transaction

    now = now_ms if now_ms is not None else int(time.time() * 1000)
    state = json.loads(idx.get_state(conn, _key(project_id)) or "{}")
    if not force:
        if state.get("parked_until", 0) > now:
            return RefreshResult("not_git")
        if now - state.get("at", 0) < COOLDOWN_MS:
            return RefreshResult("cooldown")
    if not os.path.isdir(project_dir) or not is_work_tree(project_dir):
        with transaction(conn):
            idx.set_state(conn, _key(project_id), json.dumps({"parked_until": now + PARK_MS}), now)
        return RefreshResult("not_git")
    floor = now - settings.since_days * 86_400_000
    newest = idx.newest_commit_at(conn, project_id)
    since = max(floor, (newest or 0) - 60_000)
    try:
        log = read_log(project_dir, since, settings.max_commits)
    except CheckFailed:
        with transaction(conn):  # an empty repository has no HEAD
            idx.set_state(conn, _key(project_id), json.dumps({"parked_until": now + PARK_MS}), now)
        return RefreshResult("not_git")
    added = 0
    with transaction(conn):
        for sha, message, author, at in log:
            added += idx.upsert_commit(conn, project_id, sha, message, author=author, committed_at=at, now_ms=now)
        evicted = idx.evict_commits(conn, project_id, settings.max_commits, floor)
        idx.set_state(conn, _key(project_id), json.dumps({"at": now}), now)
    return RefreshResult("refreshed", added, evicted)


__all__ = ["RefreshResult", "is_work_tree", "read_log", "refresh"]
