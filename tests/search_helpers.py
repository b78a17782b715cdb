"""Shared builders for the search tests: a synthetic Pi session folded up to a chosen ordinal."""

from __future__ import annotations

import hashlib
import sqlite3

from historian_helpers import NOW, PiBuilder, store_pi

from magic_context.config.model import MCConfig


def db_digest() -> str:
    """A digest of the whole database (schema and rows): equal before and after means a command wrote nothing."""
    from magic_context.store.db import open_db

    conn = open_db()
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


def session_with_history(conn: sqlite3.Connection, *, session_id: str = "syn", project_id: str = "dir:syn",
                         fold_through: int | None = 9) -> int:
    """A Pi session of 14 messages with distinctive words; compartments cover 0..`fold_through`."""
    b = PiBuilder()
    b.user("Please fix the flaky zebra parser in the importer")  # 0
    b.call("bash", {"command": "pytest tests/test_zebra.py -x"},
           "FAILED tests/test_zebra.py::test_stripes - ZebraStripeError: stripe count mismatch", error=True)  # 1, 2
    b.say("The zebra parser miscounts stripes when the header is empty.")  # 3
    b.call("read", {"path": "src/importer/zebra_parser.py"}, "def parse(): ...")  # 4, 5
    b.call("edit", {"path": "src/importer/zebra_parser.py", "oldText": "a", "newText": "b"}, "ok")  # 6, 7
    b.say("Committed the fix as 3f9a1c2 after the tests passed.")  # 8
    b.user("Now rename the walrus module, we decided against the old name")  # 9
    b.say("Renamed walrus to pinniped across the package.")  # 10
    b.user("What about the live tail penguin question?")  # 11
    b.say("The penguin answer stays in the live tail.")  # 12
    b.user("penguin follow-up")  # 13
    pk = store_pi(conn, b.messages, session_id=session_id, project_id=project_id)
    if fold_through is not None:
        fold(conn, pk, 0, fold_through, "Fixed the zebra parser and renamed walrus")
    return pk


def fold(conn: sqlite3.Connection, session_pk: int, start: int, end: int, title: str, *, content: str = "") -> int:
    seq = conn.execute("SELECT coalesce(max(sequence), 0) + 1 FROM compartments WHERE session_pk = ?",
                       (session_pk,)).fetchone()[0]
    cur = conn.execute("INSERT INTO compartments (session_pk, sequence, start_ordinal, end_ordinal, title, content, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (session_pk, seq, start, end, title, content or title, NOW))
    return int(cur.lastrowid)


def add_memory(conn: sqlite3.Connection, content: str, *, project_id: str = "dir:syn", category: str = "DECISIONS",
               status: str = "active", expires_at: int | None = None) -> int:
    import hashlib

    cur = conn.execute("INSERT INTO memories (project_id, category, content, normalized_hash, status, created_at, "
                       "updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (project_id, category, content, hashlib.sha256(content.encode()).hexdigest()[:32], status,
                        NOW, NOW, expires_at))
    return int(cur.lastrowid)


def remote(url: str) -> MCConfig:
    """A config whose embeddings come from the fake provider at `url` (openai-compatible, model "toy")."""
    return MCConfig.model_validate({"embedding": {"provider": "openai-compatible", "endpoint": url, "model": "toy"}})
