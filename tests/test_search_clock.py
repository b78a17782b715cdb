"""The search index stamps `search_state` with the caller's clock (a publish's or a search's `now_ms`), not the
wall clock, so two runs of the same replay write the same database. Real SQLite and the loopback fake
embeddings server (never a patched client)."""

from __future__ import annotations

import json
import sqlite3

from historian_helpers import NOW
from search_helpers import add_memory, remote, session_with_history

from magic_context.search import backlog, embed, engine, indexer


def stamps(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT key, updated_at FROM search_state").fetchall())


def failure(conn: sqlite3.Connection) -> tuple[int, int]:
    value, at = conn.execute("SELECT value, updated_at FROM search_state WHERE key = ?",
                             (embed.FAILURE_KEY,)).fetchone()
    return json.loads(value)["at"], at


def test_a_publish_stamps_the_index_and_its_embedding_failure_with_its_now(conn, server) -> None:
    pk = session_with_history(conn)
    server.embeddings_status = 503
    report = indexer.after_publish(conn, pk, remote(server.openai_base_url), embed_now=True, now_ms=NOW)
    assert report["indexed"] > 0 and report.get("embedding_error"), report
    assert stamps(conn) == {f"indexed:{pk}": NOW, f"count:{pk}": NOW, embed.FAILURE_KEY: NOW}
    assert failure(conn) == (NOW, NOW)


def test_a_search_stamps_the_index_and_its_embedding_failure_with_its_now(conn, server) -> None:
    pk = session_with_history(conn)
    add_memory(conn, "zebra stripes are counted from the header")
    server.embeddings_status = 503
    result = engine.search(conn, "zebra stripes", session_pks=[pk], project_id="dir:syn",
                           config=remote(server.openai_base_url), now_ms=NOW + 5)
    assert any("FTS only" in w for w in result.warnings), result.warnings
    assert stamps(conn)[f"indexed:{pk}"] == NOW + 5 and failure(conn) == (NOW + 5, NOW + 5)


def test_a_backlog_run_stamps_its_failure_with_its_now(conn, server) -> None:
    pk = session_with_history(conn)
    server.embeddings_status = 503
    embedder = embed.from_config(remote(server.openai_base_url))
    result = backlog.run(conn, embedder, session_pks=[pk], project_ids=["dir:syn"], now_ms=NOW + 9)
    assert result.error and failure(conn) == (NOW + 9, NOW + 9)
    assert stamps(conn)[f"count:{pk}"] == NOW + 9


def test_without_a_clock_the_wall_clock_stamps(conn) -> None:
    import time

    pk = session_with_history(conn)
    before = int(time.time() * 1000)
    indexer.index_session(conn, pk)
    assert stamps(conn)[f"indexed:{pk}"] >= before
