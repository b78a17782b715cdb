"""The semantic-only floor with the real local model on real SQLite: a query the session never touched finds
nothing (a static model puts every text somewhere, so without the floor its nearest messages filled the page), while
a true paraphrase — no word shared with its answer, so FTS cannot find it — still comes back as a semantic hit."""

from __future__ import annotations

import sqlite3

import pytest
from historian_helpers import NOW, PiBuilder, store_pi
from search_helpers import add_memory, fold

from magic_context.config.model import MCConfig
from magic_context.search import embed, engine, indexer, lanes

LOCAL = MCConfig.model_validate({"embedding": {"provider": "local"}})
NONSENSE = ("xqzv blorfindel", "purple elephant spaceship", "chocolate cake recipe", "knitting a wool sweater",
            "migratory birds in autumn", "qwpfk zzrtv mmxq")
# Each shares no word (after stemming) with its answer: only the vectors can find these.
PARAPHRASES = {"login keeps failing": 5, "memory usage too high": 9}


def coding_session(conn: sqlite3.Connection) -> int:
    """A Pi session about a web service, folded and indexed with local vectors (messages and compartment)."""
    b = PiBuilder()
    b.user("The nightly deploy is broken again, can you look at it?")  # 0
    b.call("bash", {"command": "./deploy.sh --env staging"},
           "Error: ENOENT: no such file or directory, open 'config/staging.json'", error=True)  # 1, 2
    b.say("The staging config was renamed in the last refactor; I restored config/staging.json.")  # 3
    b.user("Users on the admin page cannot get in either")  # 4
    b.say("Authentication error: invalid credentials for user admin, the password hash column was truncated.")  # 5
    b.call("edit", {"path": "migrations/0042_widen_hash.sql", "oldText": "VARCHAR(32)", "newText": "VARCHAR(128)"},
           "ok")  # 6, 7
    b.say("Widened the hash column to 128 characters and re-ran the migration.")  # 8
    b.say("The worker process RAM consumption grew to 4 GB because the cache was never evicted.")  # 9
    b.call("edit", {"path": "app/cache.py", "oldText": "maxsize=None", "newText": "maxsize=2048"}, "ok")  # 10, 11
    b.say("Bounded the cache at 2048 entries; the worker now stays under 300 MB.")  # 12
    b.user("Tuned the dark theme colors: muted gray text, brighter accent blue")  # 13
    b.call("bash", {"command": "pytest -q tests/"}, "58 passed in 4.12s")  # 14, 15
    b.say("All 58 tests pass; committed as 9be41c0.")  # 16
    b.user("thanks, that's all for today")  # 17
    pk = store_pi(conn, b.messages, session_id="web", project_id="dir:web")
    fold(conn, pk, 0, 16, "Fixed the staging deploy, the admin page and the worker cache")
    report = indexer.after_publish(conn, pk, LOCAL, embed_now=True)
    assert report["indexed"] == 17 and report["embedded"] >= 2, report
    return pk


def search(conn: sqlite3.Connection, pk: int, query: str, **kw: object) -> engine.SearchResult:
    return engine.search(conn, query, session_pks=[pk], project_id="dir:web", config=LOCAL, now_ms=NOW,
                         count_retrievals=False, **kw)  # type: ignore[arg-type]


def test_a_nonsense_query_finds_no_semantic_only_hit(conn) -> None:
    pk = coding_session(conn)
    for query in NONSENSE:
        assert search(conn, pk, query).hits == [], query  # FTS finds nothing either: nothing at all


def test_without_the_floor_the_same_queries_return_noise(conn, monkeypatch) -> None:
    """The control: this session is one where the defect shows (so the test above can fail)."""
    pk = coding_session(conn)
    monkeypatch.setattr(lanes, "LOCAL_SEMANTIC_ONLY_FLOOR", dict.fromkeys(lanes.LOCAL_SEMANTIC_ONLY_FLOOR,
                                                                          lanes.MIN_MESSAGE_COSINE))
    noisy = [q for q in NONSENSE if search(conn, pk, q).hits]
    assert noisy and all(h.match == "semantic" for q in noisy for h in search(conn, pk, q).hits)


@pytest.mark.parametrize(("query", "ordinal"), sorted(PARAPHRASES.items()))
def test_a_true_paraphrase_still_comes_back(conn, query: str, ordinal: int) -> None:
    pk = coding_session(conn)
    off = engine.search(conn, query, session_pks=[pk], project_id="dir:web", now_ms=NOW, count_retrievals=False,
                        config=MCConfig.model_validate({"embedding": {"provider": "off"}}))
    assert off.hits == []  # no shared word: FTS alone cannot find it
    hits = search(conn, pk, query, sources=["message"]).hits
    messages = [h for h in hits if h.source == "message"]
    assert messages and messages[0].ordinal == ordinal and all(h.match == "semantic" for h in hits)


def test_memories_nonsense_hidden_paraphrase_found(conn) -> None:
    pk = coding_session(conn)
    ram = add_memory(conn, "The worker process RAM consumption grows unless the cache is bounded", project_id="dir:web")
    add_memory(conn, "Deploys read config/<env>.json; keep one file per environment", project_id="dir:web")
    for query in NONSENSE:
        assert search(conn, pk, query, sources=["memory"]).hits == [], query
    hits = search(conn, pk, "memory usage too high", sources=["memory"]).hits
    assert [(h.id, h.match) for h in hits] == [(ram, "semantic")]


def test_the_floor_is_the_local_models_only() -> None:
    local = embed.model_id("local", embed.LOCAL_MODEL)
    assert lanes.semantic_only_floor(local, "msgblock") == lanes.LOCAL_SEMANTIC_ONLY_FLOOR["msgblock"] > 0.2
    other = embed.model_id("openai-compatible", "nomic-embed-text", "http://127.0.0.1:11434/v1")
    assert lanes.semantic_only_floor(other, "msgblock") == lanes.MIN_MESSAGE_COSINE  # other scales: uncalibrated
