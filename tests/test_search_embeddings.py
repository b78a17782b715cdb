"""Embeddings: the openai-compatible provider against a loopback fake, FTS fallback when it is down, the local
model offline, vectors keyed by model id, and the state `mc status` / `mc doctor` show."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fake_llm_server import EMBEDDING_DIMS
from historian_helpers import NOW
from search_helpers import add_memory, remote, session_with_history

from magic_context.config.model import MCConfig
from magic_context.search import embed, engine, health, indexer


def test_publish_embeds_compartments_messages_and_memories(conn, server) -> None:
    pk = session_with_history(conn)
    add_memory(conn, "zebra stripes are counted from the header")
    report = indexer.after_publish(conn, pk, remote(server.openai_base_url), embed_now=True)
    assert report["indexed"] == 10 and report["embedded"] >= 3, report
    kinds = dict(conn.execute("SELECT kind, count(*) FROM embeddings GROUP BY kind").fetchall())
    assert kinds == {"compartment": 1, "msgblock": 1, "memory": 1}
    dims = {r[0] for r in conn.execute("SELECT dims FROM embeddings")}
    assert dims == {EMBEDDING_DIMS}
    model_id = embed.model_id("openai-compatible", "toy", server.openai_base_url)
    assert {r[0] for r in conn.execute("SELECT model_id FROM embeddings")} == {model_id}
    posted = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert posted and all(r.body["model"] == "toy" for r in posted)
    # a second publish with nothing new embeds nothing (text hashes guard every vector)
    before = len(server.requests)
    assert indexer.after_publish(conn, pk, remote(server.openai_base_url), embed_now=True)["embedded"] == 0
    assert len(server.requests) == before


def test_semantic_lane_contributes_to_message_hits(conn, server) -> None:
    pk = session_with_history(conn)
    config = remote(server.openai_base_url)
    indexer.after_publish(conn, pk, config, embed_now=True)
    result = engine.search(conn, "miscounts stripes header", session_pks=[pk], project_id="dir:syn", config=config,
                           now_ms=NOW, sources=["message"])
    top = result.hits[0]
    assert top.source == "message" and top.ordinal == 3 and top.match == "hybrid"
    assert result.warnings == []


def test_provider_down_falls_back_to_fts_with_a_recorded_warning(conn, server) -> None:
    pk = session_with_history(conn)
    server.embeddings_status = 503
    config = remote(server.openai_base_url)
    report = indexer.after_publish(conn, pk, config, embed_now=True)
    assert report["indexed"] == 10 and "HTTP 503" in report["embedding_error"]
    result = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", config=config, now_ms=NOW)
    assert result.hits and all(h.match == "fts" for h in result.hits)
    assert result.warnings and "embedding unavailable, FTS only" in result.warnings[0]
    failure = indexer.describe(conn, pk)["last_embedding_failure"]
    assert failure["where"] == "search" and "HTTP 503" in failure["message"]
    # once the provider is back, the next publish clears the warning
    server.embeddings_status = 200
    indexer.after_publish(conn, pk, config, embed_now=True)
    assert indexer.describe(conn, pk)["last_embedding_failure"] is None


def test_unreachable_endpoint_and_bad_config_never_raise(conn) -> None:
    pk = session_with_history(conn)
    closed = remote("http://127.0.0.1:9/v1")
    assert "unreachable" in indexer.after_publish(conn, pk, closed, embed_now=True)["embedding_error"]
    assert engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", config=closed, now_ms=NOW).hits
    no_endpoint = MCConfig.model_validate({"embedding": {"provider": "openai-compatible"}})
    assert "endpoint is not set" in indexer.after_publish(conn, pk, no_endpoint, embed_now=True)["embedding_error"]
    state, detail = health.probe(closed)
    assert state == "warn" and "falls back to FTS" in detail


def test_model_id_names_provider_model_endpoint_never_the_key() -> None:
    assert embed.model_id("off", "") == "embedding-provider:off"
    a = embed.model_id("openai-compatible", "m", "http://x/v1/", api_key_present=True)
    assert a == embed.model_id("openai-compatible", "M", "http://x/v1", api_key_present=True)
    assert a != embed.model_id("openai-compatible", "m", "http://x/v1", api_key_present=False)


def test_local_model_embeds_with_the_network_blocked() -> None:
    pytest.importorskip("wordllama")
    code = (
        "import sys\n"
        "def refuse(event, args):\n"
        "    if event in ('socket.connect', 'socket.getaddrinfo'): raise OSError('network blocked: ' + event)\n"
        "sys.addaudithook(refuse)\n"
        "from magic_context.search import embed\n"
        "e = embed.Embedder('local', embed.LOCAL_MODEL, embed.model_id('local', embed.LOCAL_MODEL))\n"
        "v = e.embed(['where did we fix the table rendering bug', 'Fixed the markdown table alignment', 'apples'])\n"
        "m = e.embed_messages(['x'])\n"
        "print(v.shape[1], m.shape[1], float(v[0] @ v[1]) > float(v[0] @ v[2]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert proc.stdout.split() == ["256", "128", "True"]


def test_local_without_the_extra_is_fts_only_and_quiet(conn, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # what an install without [embeddings] looks like
    monkeypatch.setattr(embed, "_local_model", None)
    pk = session_with_history(conn)
    config = MCConfig.model_validate({"embedding": {"provider": "local"}})
    result = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", config=config, now_ms=NOW)
    assert result.hits and result.warnings == []
    assert indexer.describe(conn, pk)["last_embedding_failure"] is None  # nothing for mc status to warn about
    assert indexer.after_publish(conn, pk, config, embed_now=True)["embedding_error"] == "not installed"
    state, detail = health.probe(config)
    assert state == "ok" and "FTS only" in detail  # an optional extra left out is not a doctor warning


def test_memories_without_vectors_are_embedded_by_a_search(conn, server) -> None:
    pk = session_with_history(conn)
    config = remote(server.openai_base_url)
    mid = add_memory(conn, "penguins prefer the cold parser")
    result = engine.search(conn, "penguins cold", session_pks=[pk], project_id="dir:syn", config=config, now_ms=NOW,
                           sources=["memory"])
    assert [(h.id, h.match) for h in result.hits] == [(mid, "hybrid")]
    assert conn.execute("SELECT count(*) FROM embeddings WHERE kind = 'memory' AND ref = ?", (str(mid),)).fetchone()[0]


def test_turning_embeddings_off_clears_the_warning(conn) -> None:
    pk = session_with_history(conn)
    indexer.after_publish(conn, pk, remote("http://127.0.0.1:9/v1"), embed_now=True)
    assert indexer.describe(conn, pk)["last_embedding_failure"] is not None
    off = MCConfig.model_validate({"embedding": {"provider": "off"}})
    assert indexer.after_publish(conn, pk, off, embed_now=True) == {"indexed": 0, "embedded": 0}
    assert indexer.describe(conn, pk)["last_embedding_failure"] is None
    result = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", config=off, now_ms=NOW)
    assert result.hits and result.warnings == [] and all(h.match == "fts" for h in result.hits)
