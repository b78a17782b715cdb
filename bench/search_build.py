"""Build a search index by replaying a recorded session through mc with the historian inline.

    python bench/search_build.py pi_large-session.jsonl 40000 /tmp/mc-search-bench/pi_large.db

Every recorded call is served by the real transform (`McRunner`, in-process) at a window smaller than
the session, so the historian folds history into compartments as it would live, and each publish
indexes and embeds (embedding.provider = local when wordllama is installed). The replay's database is
then copied to the given path (sqlite backup) for `bench/search_bench.py`.

The envelope's `project_dir` is the directory the recording says the harness ran in (a Pi session's header
`cwd`), as the live integration sends it (`ctx.cwd`), not the replay's empty temporary project: the
historian writes the paths under it relative to it, so a replayed compartment reads as a live one would
(`Read packages/…/theme.ts`, not `Read /Users/…/pi-mono/packages/…/theme.ts`). The directory need not exist.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def recorded_cwd(session: Path) -> str | None:
    """The working directory a recording names (a Pi session header's `cwd`), else None."""
    try:
        with session.open(encoding="utf-8") as handle:
            head = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    cwd = head.get("cwd") if isinstance(head, dict) and head.get("type") == "session" else None
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def build(name: str | Path, window: int, out: Path, *, provider: str = "local") -> dict:
    """Replay the recorded session `name` (a file in the shared sessions folder, or a path) into `out`."""
    from magic_context import paths
    from magic_context.replay.engine import McRunner
    from magic_context.replay.passes import prepare
    from magic_context.wire.importers import load_session

    session = SESSIONS / name  # an absolute `name` stays itself
    rep = prepare(load_session(session))
    started = time.perf_counter()
    with McRunner(harness=rep.harness, window=window, system=rep.system) as runner:
        cwd = recorded_cwd(session)
        if cwd:
            runner.project_dir = Path(cwd)  # what the live integration sends (see the module doc)
        config_file = paths.user_config_path()
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(f'[embedding]\nprovider = "{provider}"\n')
        for done, spec in enumerate(rep.passes, start=1):
            runner.serve(runner.payload(rep.native[:spec.end], spec.at_ms, spec.model))
            if done % 100 == 0:
                print(f"  {name}: {done}/{len(rep.passes)} passes", file=sys.stderr)
        from magic_context.config.load import load_config
        from magic_context.search import backlog, embed, indexer
        from magic_context.store.db import open_db

        # the inline historian indexed each publish; embed everything once at the end, as `mc embed --all` does
        # (a background run's publish embeds at most `backlog.PUBLISH_BLOCKS` blocks: the bench wants them all)
        conn = open_db()
        for (pk,) in conn.execute("SELECT id FROM sessions").fetchall():
            indexer.index_session(conn, pk)
        embedder = embed.from_config(load_config(None).config)
        if embedder is not None:
            pks, projects = backlog.scope_of(conn, all_sessions=True, session_pks=[], project_id=None)
            backlog.run(conn, embedder, session_pks=pks, project_ids=projects)
        conn.close()
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.unlink()
        src = sqlite3.connect(paths.db_file())
        dst = sqlite3.connect(out)
        src.backup(dst)
        facts = {
            "passes": len(rep.passes), "messages": len(rep.native), "seconds": round(time.perf_counter() - started, 1),
            "compartments": dst.execute("SELECT count(*) FROM compartments").fetchone()[0],
            "folded_through": dst.execute("SELECT max(end_ordinal) FROM compartments").fetchone()[0],
            "indexed": dst.execute("SELECT count(*) FROM message_text").fetchone()[0],
            "vectors": dst.execute("SELECT count(*) FROM embeddings").fetchone()[0],
        }
        src.close()
        dst.close()
    return facts


if __name__ == "__main__":
    print(build(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
