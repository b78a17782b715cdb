"""The embedding backlog (`search.backlog`, `mc embed`): a database whose vectors are missing or keyed by another
model gets them all, a second run embeds nothing, a provider failing mid-run leaves a partial result and a
recorded warning with nothing corrupted and FTS still working, the background historian's bounded catch-up,
and `mc status`'s missing count. Real SQLite, the real local model, and the openai-compatible path against the
loopback fake embeddings server (never a patched client)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from historian_helpers import NOW, PiBuilder, store_pi
from search_helpers import add_memory, fold, remote, session_with_history

from magic_context.config.model import MCConfig
from magic_context.search import backlog, embed, engine, indexer
from magic_context.store.db import open_db


def long_session(conn: sqlite3.Connection, messages: int, *, session_id: str = "long") -> int:
    """A Pi session of `messages` messages, all folded but the last two: `messages // 256` message blocks and more."""
    b = PiBuilder()
    for i in range(messages // 2):
        b.user(f"question {i} about the aardvark module number {i}")
        b.say(f"answer {i}: the aardvark module {i} parses tokens")
    pk = store_pi(conn, b.messages, session_id=session_id, project_id="dir:syn")
    fold(conn, pk, 0, messages - 3, "The aardvark modules")
    return pk


def kinds(conn: sqlite3.Connection, model_id: str) -> dict[str, int]:
    return dict(conn.execute("SELECT kind, count(*) FROM embeddings WHERE model_id = ? GROUP BY kind",
                             (model_id,)).fetchall())


def run_all(conn: sqlite3.Connection, embedder: embed.Embedder, pks: list[int], **kw) -> backlog.BacklogResult:
    sessions, projects = backlog.scope_of(conn, all_sessions=False, session_pks=pks, project_id=None)
    return backlog.run(conn, embedder, session_pks=sessions, project_ids=projects, **kw)


def test_vectors_of_another_model_are_replaced_by_the_local_models_and_a_second_run_embeds_nothing(conn, server):
    pk = session_with_history(conn)
    add_memory(conn, "zebra stripes are counted from the header")
    indexer.after_publish(conn, pk, remote(server.openai_base_url), embed_now=True)  # the old model's vectors
    old = embed.model_id("openai-compatible", "toy", server.openai_base_url)
    assert kinds(conn, old) == {"compartment": 1, "msgblock": 1, "memory": 1}
    local = embed.from_config(MCConfig())
    assert local is not None and local.model_id != old
    assert backlog.missing(conn, pk, local.model_id) == {
        "msgblock": {"total": 1, "missing": 1}, "compartment": {"total": 1, "missing": 1},
        "memory": {"total": 1, "missing": 1}}
    seen: list[tuple[int, int, str]] = []
    first = run_all(conn, local, [pk], progress=lambda d, t, k: seen.append((d, t, k)))
    assert first.embedded == {"memory": 1, "compartment": 1, "msgblock": 1} and first.complete, first.as_dict()
    assert first.messages == 10 and seen[-1][:2] == (3, 3) and [s[2] for s in seen] == ["memory", "compartment",
                                                                                      "msgblock"]
    assert kinds(conn, local.model_id) == {"compartment": 1, "msgblock": 1, "memory": 1}
    assert all(v["missing"] == 0 for v in backlog.missing(conn, pk, local.model_id).values())
    second = run_all(conn, local, [pk])
    assert second.total_embedded == 0 and second.skipped == {"memory": 1, "compartment": 1, "msgblock": 1}
    result = engine.search(conn, "miscounts stripes header", session_pks=[pk], project_id="dir:syn",
                           config=MCConfig(), now_ms=NOW, sources=["message"])
    assert result.hits[0].ordinal == 3 and result.hits[0].match == "hybrid"


def test_a_session_never_embedded_gets_every_block_and_edits_are_reembedded(conn, server) -> None:
    pk = long_session(conn, 700)  # ordinals 0..697 folded: blocks 0, 1, 2
    config = remote(server.openai_base_url)
    embedder = embed.from_config(config)
    assert embedder is not None
    result = run_all(conn, embedder, [pk])
    assert result.embedded["msgblock"] == 3 and result.messages == 698 and result.complete
    blocks = conn.execute("SELECT ref, start_ordinal, end_ordinal FROM embeddings WHERE kind = 'msgblock' "
                          "ORDER BY start_ordinal").fetchall()
    assert [tuple(b) for b in blocks] == [("0", 0, 255), ("1", 256, 511), ("2", 512, 697)]
    requests = len(server.requests)
    assert run_all(conn, embedder, [pk]).total_embedded == 0 and len(server.requests) == requests


def test_two_sessions_keep_their_own_blocks_and_a_second_run_embeds_nothing(conn, server) -> None:
    """Block 0 of one session never replaces block 0 of another (m005's per-scope key)."""
    one, two = long_session(conn, 300, session_id="one"), long_session(conn, 300, session_id="two")
    embedder = embed.from_config(remote(server.openai_base_url))
    assert embedder is not None
    first = run_all(conn, embedder, [one, two])
    assert first.embedded["msgblock"] == 4 and first.complete, first.as_dict()  # blocks 0 and 1 of each
    assert kinds(conn, embedder.model_id)["msgblock"] == 4
    for pk in (one, two):
        assert backlog.missing(conn, pk, embedder.model_id)["msgblock"] == {"total": 2, "missing": 0}
    assert run_all(conn, embedder, [one, two]).total_embedded == 0


def test_the_provider_failing_mid_run_keeps_what_was_written_and_the_next_run_resumes(conn, server) -> None:
    pk = long_session(conn, 700)
    config = remote(server.openai_base_url)
    embedder = embed.from_config(config)
    assert embedder is not None

    def fail_after_first(done: int, total: int, kind: str) -> None:
        if kind == "msgblock":
            server.embeddings_status = 503

    partial = run_all(conn, embedder, [pk], progress=fail_after_first)
    assert not partial.complete and partial.error and "HTTP 503" in partial.error
    assert partial.embedded == {"memory": 0, "compartment": 1, "msgblock": 1}
    assert partial.failed["msgblock"] == 1 and partial.left["msgblock"] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    newest = conn.execute("SELECT ref FROM embeddings WHERE kind = 'msgblock'").fetchall()
    assert [r[0] for r in newest] == ["2"]  # newest block first; the failed one wrote nothing
    failure = embed.last_failure(conn)
    assert failure is not None and failure["where"] == "backlog" and "HTTP 503" in failure["message"]
    fts = engine.search(conn, "aardvark module 7", session_pks=[pk], project_id="dir:syn", config=config,
                        now_ms=NOW, sources=["message"])
    assert fts.hits and all(h.match == "fts" for h in fts.hits)
    server.embeddings_status = 200
    rest = run_all(conn, embedder, [pk])
    assert rest.embedded == {"memory": 0, "compartment": 0, "msgblock": 2} and rest.complete
    assert embed.last_failure(conn) is None  # the provider answers again: status stops warning
    assert conn.execute("SELECT count(*) FROM embeddings WHERE kind = 'msgblock'").fetchone()[0] == 3


def test_a_provider_down_from_the_start_is_a_partial_result_not_an_error(conn) -> None:
    pk = session_with_history(conn)
    dead = embed.Embedder("openai-compatible", "toy", "embedding-provider:dead", endpoint="http://127.0.0.1:9/v1")
    result = run_all(conn, dead, [pk])
    assert result.total_embedded == 0 and result.failed["compartment"] == 1 and result.left["msgblock"] == 1
    assert "unreachable" in (result.error or "")
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0


def test_the_publish_catches_up_a_bounded_number_of_blocks_newest_first(conn, server, monkeypatch) -> None:
    monkeypatch.setattr(backlog, "PUBLISH_BLOCKS", 2)
    pk = long_session(conn, 1000)  # blocks 0..3
    config = remote(server.openai_base_url)
    report = indexer.after_publish(conn, pk, config, embed_now=True)
    assert report["backlog_left"] == 2 and report["embedded"] == 1 + 2, report
    refs = sorted(int(r[0]) for r in conn.execute("SELECT ref FROM embeddings WHERE kind = 'msgblock'"))
    assert refs == [2, 3]
    report = indexer.after_publish(conn, pk, config, embed_now=True)
    assert report["backlog_left"] == 0 and report["embedded"] == 2
    assert indexer.after_publish(conn, pk, config, embed_now=True)["embedded"] == 0


def _config_file(url: str) -> None:
    cfg = Path(os.environ["MAGIC_CONTEXT_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(
        f'[embedding]\nprovider = "openai-compatible"\nendpoint = "{url}"\nmodel = "toy"\n')


def test_mc_embed_json_then_status_shows_nothing_missing(mc, server) -> None:
    conn = open_db()
    pk = session_with_history(conn, session_id="ses-bk")
    add_memory(conn, "zebra stripes are counted from the header")
    indexer.index_session(conn, pk)
    conn.close()
    _config_file(server.openai_base_url)

    status = json.loads(mc("status", "--session", "ses-bk", "--json").stdout)
    assert status["data"]["search"]["embedding"]["missing"]["msgblock"] == {"total": 1, "missing": 1}
    human = mc("status", "--session", "ses-bk")
    assert b"embeddings: 1 of 1 message blocks, 1 of 1 compartments, 1 of 1 memories missing for toy" in human.stdout
    assert b"mc embed --session ses-bk" in human.stdout

    proc = mc("embed", "--session", "ses-bk", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    data = json.loads(proc.stdout)["data"]
    assert data["embedded"] == {"memory": 1, "compartment": 1, "msgblock": 1} and data["complete"]
    assert data["model_id"] == embed.model_id("openai-compatible", "toy", server.openai_base_url)
    again = json.loads(mc("embed", "--all", "--json").stdout)["data"]
    assert sum(again["embedded"].values()) == 0 and again["skipped"]["msgblock"] == 1
    assert b"missing for" not in mc("status", "--session", "ses-bk").stdout


def test_mc_embed_with_the_provider_down_exits_1_with_a_partial_result(mc, server) -> None:
    conn = open_db()
    session_with_history(conn, session_id="ses-down")
    conn.close()
    _config_file(server.openai_base_url)
    server.embeddings_status = 503
    proc = mc("embed", "--session", "ses-down", "--json")
    assert proc.returncode == 1
    document = json.loads(proc.stdout)
    assert document["problems"][0]["code"] == "embedding_failed" and "HTTP 503" in document["errors"][0]
    assert document["data"]["complete"] is False and document["data"]["failed"]["compartment"] == 1
    human = mc("embed", "--session", "ses-down")
    assert human.returncode == 1 and b"Traceback" not in human.stderr
    assert b"HTTP 503" in human.stderr
    status = mc("status", "--session", "ses-down")
    assert b"embeddings failing" in status.stdout


def test_mc_embed_bad_usage_is_one_line_and_writes_nothing(mc, server) -> None:
    from search_helpers import db_digest

    conn = open_db()
    session_with_history(conn, session_id="ses-x")
    conn.close()
    before = db_digest()
    both = mc("embed", "--all", "--session", "ses-x")
    assert both.returncode == 2 and b"--all excludes" in both.stderr
    unknown = mc("embed", "--session", "nope")
    assert unknown.returncode == 2 and len(unknown.stderr.decode().strip().splitlines()) <= 2
    cfg = Path(os.environ["MAGIC_CONTEXT_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text('[embedding]\nprovider = "off"\n')
    off = mc("embed", "--session", "ses-x")
    assert off.returncode == 1 and b"embedding.provider is 'off'" in off.stderr
    assert db_digest() == before


def test_a_real_wrapup_run_embeds_its_chunk_and_catches_up_the_sessions_older_backlog(mc, server) -> None:
    """`mc wrapup` outside inline mode (what the transform's detached historian runs): after its publish the
    session's older blocks, folded while embeddings were failing, get vectors too (3 blocks: within the bound)."""
    conn = open_db()
    pk = long_session(conn, 700, session_id="ses-wrap")
    conn.execute("DELETE FROM compartments WHERE session_pk = ?", (pk,))
    fold(conn, pk, 0, 599, "The aardvark modules, first part")
    conn.commit()
    conn.close()
    _config_file(server.openai_base_url)
    proc = mc("wrapup", "--session", "ses-wrap", "--keep", "4", "--json",
              env={"MAGIC_CONTEXT_HISTORIAN": "background"})  # not inline: the run embeds after its publish
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["data"]["disposition"] == "completed"
    conn = open_db()
    try:
        model = embed.model_id("openai-compatible", "toy", server.openai_base_url)
        refs = sorted(int(r[0]) for r in conn.execute(
            "SELECT ref FROM embeddings WHERE kind = 'msgblock' AND model_id = ? AND scope = ?", (model, str(pk))))
        assert refs == [0, 1, 2]
        assert all(v["missing"] == 0 for v in backlog.missing(conn, pk, model).values())
    finally:
        conn.close()
