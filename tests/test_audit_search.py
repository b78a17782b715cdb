"""Audit (#12 acceptance): search claims that no earlier test could fail on — the merge's sort by
`score × source boost` through `engine.search` itself (tests/test_search.py sorts a list of its own)."""

from __future__ import annotations

import pytest
from historian_helpers import NOW
from search_helpers import add_memory, session_with_history

from magic_context.search import engine


def _note(conn, pk: int, content: str) -> None:
    conn.execute("INSERT INTO notes (type, status, content, session_pk, created_at, updated_at) "
                 "VALUES ('session', 'active', ?, ?, ?, ?)", (content, pk, NOW, NOW))


def test_the_merge_orders_lanes_by_boosted_score_not_raw_score(conn) -> None:
    """Raw lane scores: message 1.0, note 1.0, memory 0.8 (FTS only). Boosted (§3.4): message 1.15,
    memory 1.04, note 1.0 — so the memory must come before the note, which an unboosted sort reverses."""
    pk = session_with_history(conn)
    add_memory(conn, "the walrus module became pinniped")
    _note(conn, pk, "walrus")
    hits = engine.search(conn, "walrus", session_pks=[pk], project_id="dir:syn", now_ms=NOW,
                         sources=["memory", "message", "note"]).hits
    order = [h.source for h in hits if h.source in ("memory", "note")]
    assert order[:2] == ["memory", "note"], [(h.source, h.score) for h in hits]
    memory = next(h for h in hits if h.source == "memory")
    note = next(h for h in hits if h.source == "note")
    assert memory.score == pytest.approx(0.8 * 1.3) and note.score == pytest.approx(1.0)
    assert hits[0].source in ("message", "compartment") and hits[0].score == pytest.approx(1.15)
