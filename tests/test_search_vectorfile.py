"""The memory-mapped vector files beside the database (search/vectorfile.py), on real SQLite: written at embed
time, rebuilt from SQLite when stale, missing or corrupt, kept apart per model id, following deletes, and
never needed for a search to work (an unwritable folder builds the matrix in memory)."""

from __future__ import annotations

import os
import sqlite3
import stat

import numpy as np
import pytest
from fake_llm_server import FakeLLMServer
from historian_helpers import NOW
from search_helpers import session_with_history

from magic_context.config.model import MCConfig
from magic_context.search import engine, indexer, vectorfile
from magic_context.store import search_index
from magic_context.store.db import open_db

MODEL = "embedding-provider:test"
DIMS = 8


def unit(rows: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(rows, DIMS)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def put_block(conn: sqlite3.Connection, pk: int, number: int, ordinals: list[int], seed: int, *,
              model: str = MODEL, text_hash: str | None = None) -> np.ndarray:
    vectors = unit(len(ordinals), seed)
    search_index.put_vector(conn, "msgblock", str(number), model, scope=str(pk), text_hash=text_hash or f"h{seed}",
                            vector=indexer.pack_block(ordinals, vectors), dims=DIMS, now_ms=NOW,
                            start=ordinals[0], end=ordinals[-1])
    return vectors


def put_compartment(conn: sqlite3.Connection, pk: int, cid: int, span: tuple[int, int], *, seed: int) -> np.ndarray:
    vector = unit(1, seed)[0]
    search_index.put_vector(conn, "compartment", str(cid), MODEL, scope=str(pk), text_hash=f"c{seed}",
                            vector=vector.tobytes(), dims=DIMS, now_ms=NOW, start=span[0], end=span[1])
    return vector


def mapped(matrix: np.ndarray) -> bool:
    """True for a matrix read from its file (a view of the memory map), False for one built in memory."""
    base = matrix
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, np.memmap) or type(base).__name__ == "mmap"


def files(conn: sqlite3.Connection, model: str = MODEL) -> list[str]:
    where = vectorfile.folder(conn, model)
    return sorted(p.name for p in where.iterdir()) if where is not None and where.exists() else []


def test_sync_writes_a_private_file_that_load_maps(conn) -> None:
    vectors = put_block(conn, 1, 0, [0, 1, 2], seed=1)
    assert vectorfile.sync(conn, "msgblock", "1", MODEL) is True
    assert vectorfile.sync(conn, "msgblock", "1", MODEL) is False  # up to date: nothing rewritten
    [name] = files(conn)
    assert name.startswith("msgblock-1-d8-") and name.endswith(".npy")
    path = vectorfile.folder(conn, MODEL) / name
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert str(path).startswith(search_index.database_file(conn) + "-vectors" + os.sep)
    matrix = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
    assert mapped(matrix)
    assert matrix["ref"].tolist() == [0, 1, 2]
    query = vectors[1]
    np.testing.assert_allclose(vectorfile.cosines(matrix, query), vectors @ query, atol=0.02)  # int8 rows


def test_a_changed_vector_row_makes_the_file_stale_and_it_is_rebuilt(conn) -> None:
    put_block(conn, 1, 0, [0, 1], seed=1)
    vectorfile.sync(conn, "msgblock", "1", MODEL)
    [old] = files(conn)
    fresh = put_block(conn, 1, 0, [0, 1, 5], seed=2)  # the block re-embedded after its text changed
    matrix = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
    assert matrix["ref"].tolist() == [0, 1, 5]
    np.testing.assert_allclose(vectorfile.cosines(matrix, fresh[2])[2], 1.0, atol=0.02)
    [new] = files(conn)
    assert new != old  # the stale file is gone, its replacement named by the new rows


def test_a_missing_file_is_rebuilt_from_sqlite(conn) -> None:
    put_compartment(conn, 1, 7, (0, 9), seed=3)
    vectorfile.sync(conn, "compartment", "1", MODEL)
    [name] = files(conn)
    (vectorfile.folder(conn, MODEL) / name).unlink()
    matrix = vectorfile.load(conn, "compartment", "1", MODEL, DIMS)
    assert (matrix["ref"].tolist(), matrix["start"].tolist(), matrix["end"].tolist()) == ([7], [0], [9])
    assert matrix["vec"].dtype == np.float32  # compartment vectors keep their float32 precision
    assert files(conn) == [name]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "wrong shape"])
def test_a_corrupt_file_is_rebuilt_not_trusted(conn, damage: str) -> None:
    vectors = put_block(conn, 1, 0, list(range(40)), seed=4)
    vectorfile.sync(conn, "msgblock", "1", MODEL)
    [name] = files(conn)
    path = vectorfile.folder(conn, MODEL) / name
    if damage == "garbage":
        path.write_bytes(os.urandom(512))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        np.save(path, np.zeros((3, 3), dtype=np.float32))
    matrix = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
    assert matrix["ref"].tolist() == list(range(40))
    np.testing.assert_allclose(vectorfile.cosines(matrix, vectors[9])[9], 1.0, atol=0.02)
    assert vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)["ref"].tolist() == list(range(40))  # repaired file
    assert mapped(vectorfile.load(conn, "msgblock", "1", MODEL, DIMS))


def test_each_model_id_has_its_own_files(conn) -> None:
    a = put_block(conn, 1, 0, [0, 1], seed=5)
    b = put_block(conn, 1, 0, [0, 1, 2, 3], seed=6, model="embedding-provider:other")
    vectorfile.sync(conn, "msgblock", "1", MODEL)
    vectorfile.sync(conn, "msgblock", "1", "embedding-provider:other")
    assert vectorfile.folder(conn, MODEL) != vectorfile.folder(conn, "embedding-provider:other")
    ma = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
    mb = vectorfile.load(conn, "msgblock", "1", "embedding-provider:other", DIMS)
    assert (ma["ref"].tolist(), mb["ref"].tolist()) == ([0, 1], [0, 1, 2, 3])
    np.testing.assert_allclose(vectorfile.cosines(ma, a[0])[0], 1.0, atol=0.02)
    np.testing.assert_allclose(vectorfile.cosines(mb, b[3])[3], 1.0, atol=0.02)
    assert len(vectorfile.load(conn, "msgblock", "1", "embedding-provider:none", DIMS)) == 0  # no rows, no vectors


def test_deleted_rows_leave_the_matrix(conn) -> None:
    put_compartment(conn, 1, 1, (0, 4), seed=7)
    put_compartment(conn, 1, 2, (5, 9), seed=8)
    put_compartment(conn, 2, 3, (0, 3), seed=9)  # another session: another file
    vectorfile.sync(conn, "compartment", "1", MODEL)
    assert vectorfile.load(conn, "compartment", "1", MODEL, DIMS)["ref"].tolist() == [1, 2]
    conn.execute("DELETE FROM embeddings WHERE kind = 'compartment' AND ref = '1'")
    assert vectorfile.load(conn, "compartment", "1", MODEL, DIMS)["ref"].tolist() == [2]
    assert vectorfile.load(conn, "compartment", "2", MODEL, DIMS)["ref"].tolist() == [3]
    conn.execute("DELETE FROM embeddings")
    assert len(vectorfile.load(conn, "compartment", "1", MODEL, DIMS)) == 0


def test_an_unwritable_folder_still_searches_from_memory(conn) -> None:
    put_block(conn, 1, 0, [0, 1, 2], seed=10)
    blocker = search_index.database_file(conn) + "-vectors"
    with open(blocker, "w") as fh:  # a file where the folder should be: every write fails (even as root)
        fh.write("not a folder")
    assert vectorfile.sync(conn, "msgblock", "1", MODEL) is False
    matrix = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
    assert matrix["ref"].tolist() == [0, 1, 2] and not mapped(matrix)


def test_an_in_memory_database_has_no_folder() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        assert vectorfile.folder(conn, MODEL) is None
    finally:
        conn.close()


def test_publish_writes_the_files_and_search_uses_them(conn) -> None:
    with FakeLLMServer() as server:
        config = MCConfig.model_validate({"embedding": {"provider": "openai-compatible",
                                                        "endpoint": server.openai_base_url, "model": "toy"}})
        pk = session_with_history(conn)
        indexer.after_publish(conn, pk, config, embed_now=True)
        names = files(conn, conn.execute("SELECT model_id FROM embeddings LIMIT 1").fetchone()[0])
        assert [n.split("-")[0] for n in names] == ["compartment", "msgblock"]
        result = engine.search(conn, "miscounts stripes header", session_pks=[pk], project_id="dir:syn",
                               config=config, now_ms=NOW, sources=["message"])
        assert result.hits[0].ordinal == 3 and result.hits[0].match == "hybrid"
        # the live tail stays out even though its vectors exist: ordinals past the cutoff are masked
        conn.execute("DELETE FROM compartments WHERE session_pk = ?", (pk,))
        assert engine.search(conn, "miscounts stripes header", session_pks=[pk], project_id="dir:syn",
                             config=config, now_ms=NOW, sources=["message"]).hits == []


def test_a_re_embedded_block_with_the_same_ordinals_is_seen() -> None:
    conn = open_db()
    try:
        put_block(conn, 1, 0, [0, 1, 2], seed=11)
        vectorfile.sync(conn, "msgblock", "1", MODEL)
        fresh = put_block(conn, 1, 0, [0, 1, 2], seed=12)  # same row, same size: only its vector changed
        matrix = vectorfile.load(conn, "msgblock", "1", MODEL, DIMS)
        np.testing.assert_allclose(vectorfile.cosines(matrix, fresh[1])[1], 1.0, atol=0.02)
    finally:
        conn.close()


def test_a_database_created_again_at_the_same_path_never_reads_the_old_files(tmp_path) -> None:
    path = tmp_path / "context.db"
    first = open_db(str(path))
    put_block(first, 1, 0, [0, 1], seed=13)
    vectorfile.sync(first, "msgblock", "1", MODEL)
    old_folder = vectorfile.folder(first, MODEL)
    first.close()
    for leftover in tmp_path.glob("context.db*"):
        if leftover.is_file():
            leftover.unlink()
    second = open_db(str(path))
    try:
        fresh = put_block(second, 1, 0, [0, 1], seed=14)  # same ids, same count: only the epoch tells them apart
        assert vectorfile.folder(second, MODEL) != old_folder
        matrix = vectorfile.load(second, "msgblock", "1", MODEL, DIMS)
        np.testing.assert_allclose(vectorfile.cosines(matrix, fresh[0])[0], 1.0, atol=0.02)
        assert not old_folder.exists()  # the earlier database's folder is removed
    finally:
        second.close()
