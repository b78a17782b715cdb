"""`mc doctor`'s embeddings check counts what lacks a vector for the configured model over the whole database
(the same engine count as `mc status`, `search.backlog`), warns naming `mc embed --all`, and is ok once embedded.
Real CLI in a subprocess, real SQLite, the loopback fake embeddings server (never a patched client)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from search_helpers import add_memory, session_with_history

from magic_context.search import backlog, indexer
from magic_context.store.db import open_db


def _embeddings_check(mc) -> dict:
    proc = mc("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(proc.stdout)["data"]["checks"]}
    return checks["embeddings"]


def test_doctor_warns_what_lacks_a_vector_then_is_ok_after_mc_embed(mc, server) -> None:
    conn = open_db()
    pk = session_with_history(conn, session_id="ses-a")
    add_memory(conn, "zebra stripes are counted from the header")
    add_memory(conn, "the walrus module was renamed", project_id="dir:elsewhere")  # a project with no session
    indexer.index_session(conn, pk)
    conn.close()
    cfg = Path(os.environ["MAGIC_CONTEXT_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(
        f'[embedding]\nprovider = "openai-compatible"\nendpoint = "{server.openai_base_url}"\nmodel = "toy"\n')

    check = _embeddings_check(mc)
    assert check["status"] == "warn", check
    assert ("1 of 1 message blocks, 1 of 1 compartments, 2 of 2 memories missing for toy: run `mc embed --all`"
            in check["detail"]), check
    human = mc("doctor", env={"COLUMNS": "400"})
    assert b"mc embed --all" in human.stdout and human.returncode == 0, human.stderr.decode()

    embedded = mc("embed", "--all", "--json")
    assert embedded.returncode == 0, embedded.stderr.decode()
    check = _embeddings_check(mc)
    assert check["status"] == "ok" and "nothing indexed lacks a vector for toy" in check["detail"], check


def test_missing_all_sums_the_per_session_count(conn) -> None:
    one = session_with_history(conn, session_id="a")
    two = session_with_history(conn, session_id="b", project_id="dir:other")
    add_memory(conn, "zebra stripes are counted from the header")
    for pk in (one, two):
        indexer.index_session(conn, pk)
    apart = [backlog.missing(conn, pk, "m") for pk in (one, two)]
    assert backlog.missing_all(conn, "m") == {
        kind: {key: apart[0][kind][key] + apart[1][kind][key] for key in ("total", "missing")}
        for kind in backlog.KINDS}
    assert backlog.describe_missing(backlog.missing_all(conn, "m")) == (
        "2 of 2 message blocks, 2 of 2 compartments, 1 of 1 memories")
