"""Vector matrices beside the database: one memory-mapped `.npy` per (model, kind, scope, dims).

SQLite's `embeddings` table stays the source of truth; a sidecar file is a cache of its rows for one
(kind, scope, model id, dims) as one contiguous structured array (`ref, start, end, scale, vec`), so a
search scores every vector with one matrix product instead of fetching and unpacking blobs row by row.
Measured gain (bench/search_bench.py, 100k indexed messages, local provider): the two semantic lanes took
~200 ms per query reading ~400 message blocks and ~2 000 compartment vectors from SQLite, and ~30 ms with
the mapped matrices; p95 of the whole search went from 500 ms (9.5× the FTS-only search of the same run)
to 179 ms (2.0×).

Files live in `<database>-vectors/<epoch>/<md5(model id)>/`, named `<kind>-<scope>-d<dims>-<stamp>.npy`.
The stamp is the rows' count, highest id and id sum, read from an index without touching a blob (a
content digest cost ~10–20 ms per search at 100k messages); it changes with every row added, re-embedded
(`search_index.put_vector` gives a replaced row a new id) or deleted, so a stale file is never opened: it
is rebuilt from SQLite and its older siblings removed. The epoch, a random id kept in `search_state`,
ties the folder to this database: a database deleted and created again at the same path gets a new
epoch, and the old folder is removed. A missing, truncated or otherwise unreadable file is rebuilt the
same way; when the folder cannot be written (read-only data dir, in-memory database) the matrix is built
in memory and used without a file. Message vectors keep their int8 form (scale per row); compartment and
memory vectors stay float32.

The embedding paths (`backlog.run`, `indexer.embed_session`) call `sync` right after writing vectors, so searches find
the file ready; a search rebuilds it only when something else changed the rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from magic_context.store import search_index

TMP_MAX_AGE_S: Final = 600  # a temporary file this old was left by a killed writer
EPOCH_KEY: Final = "vectors_epoch"


def epoch(conn: sqlite3.Connection, *, create: bool = True) -> str | None:
    """This database's sidecar epoch, created on first use; None when it cannot be written (then no files)."""
    import secrets

    from magic_context.errors import MCError
    from magic_context.store.db import atomic

    try:
        value = search_index.get_state(conn, EPOCH_KEY)
        if value is None and create:
            with atomic(conn):
                value = search_index.get_state(conn, EPOCH_KEY)
                if value is None:
                    value = secrets.token_hex(8)
                    search_index.set_state(conn, EPOCH_KEY, value, int(time.time() * 1000))
        return value
    except (sqlite3.Error, MCError):
        return None


def folder(conn: sqlite3.Connection, model_id: str, *, create: bool = True) -> Path | None:
    """The sidecar folder for `model_id` beside the connection's main database file; None when in memory."""
    path = search_index.database_file(conn)
    if not path:
        return None
    current = epoch(conn, create=create)
    if current is None:
        return None
    model = hashlib.md5(model_id.encode(), usedforsecurity=False).hexdigest()[:16]
    return Path(f"{path}-vectors") / current / model


def _prefix(kind: str, scope: str, dims: int) -> str:
    safe = scope if scope.isalnum() else hashlib.md5(scope.encode(), usedforsecurity=False).hexdigest()[:16]
    return f"{kind}-{safe}-d{dims}-"


def _dtype(dims: int, vec: str) -> Any:
    import numpy as np

    return np.dtype([("ref", "<i8"), ("start", "<i8"), ("end", "<i8"), ("scale", "<f4"), ("vec", vec, (dims,))])


def digest(stamp: str) -> str:
    """The file-name form of a `search_index.vector_stamp`."""
    return hashlib.md5(stamp.encode(), usedforsecurity=False).hexdigest()[:16]


def build(conn: sqlite3.Connection, kind: str, scope: str, model_id: str, dims: int) -> tuple[Any, str]:
    """(matrix, digest) read from SQLite: one row per vector (per message for `msgblock`), ordered by ref."""
    import numpy as np

    from magic_context.search.indexer import unpack_block

    rows = search_index.vectors_full(conn, kind, scope, model_id)
    ids = [int(r["id"]) for r in rows]
    stamp = digest(f"{len(ids)}:{max(ids, default=0)}:{sum(ids)}")
    rows = [r for r in rows if r["dims"] == dims]
    if kind == "msgblock":
        parts = [unpack_block(r["vector"], dims) for r in rows]
        n = sum(len(p[0]) for p in parts)
        out = np.zeros(n, dtype=_dtype(dims, "<i1"))
        at = 0
        for ordinals, scales, matrix in parts:
            k = len(ordinals)
            sl = slice(at, at + k)
            out["ref"][sl] = out["start"][sl] = out["end"][sl] = ordinals
            out["scale"][sl] = scales
            out["vec"][sl] = matrix
            at += k
    else:
        out = np.zeros(len(rows), dtype=_dtype(dims, "<f4"))
        for i, r in enumerate(rows):
            out[i] = (int(r["ref"]), -1 if r["start_ordinal"] is None else r["start_ordinal"],
                      -1 if r["end_ordinal"] is None else r["end_ordinal"], 1.0,
                      np.frombuffer(r["vector"], dtype="<f4", count=dims))
    out = out[np.argsort(out["ref"], kind="stable")]
    return out, stamp


def _current(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> str:
    return digest(search_index.vector_stamp(conn, kind, scope, model_id))


def _read(path: Path, dims: int) -> Any:
    """The mapped matrix, or None when the file is missing or not a matrix of `dims` (corrupt, truncated)."""
    import numpy as np

    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    names = matrix.dtype.names or ()
    if matrix.ndim != 1 or names != ("ref", "start", "end", "scale", "vec") or matrix.dtype["vec"].shape != (dims,):
        return None
    return matrix.view(np.ndarray)  # still mapped; a plain view skips np.memmap's per-slice bookkeeping (~7 ms)


def _write(where: Path, name: str, matrix: Any, prefix: str) -> None:
    """Write atomically (temp file + rename), then remove older files of the same prefix; OSError propagates."""
    import numpy as np

    from magic_context import paths

    paths.ensure_private_dir(where.parent.parent)
    for other in where.parent.parent.iterdir():  # folders of an earlier database at this path
        if other.is_dir() and other.name != where.parent.name:
            shutil.rmtree(other, ignore_errors=True)
    paths.ensure_private_dir(where.parent)
    paths.ensure_private_dir(where)
    fd, tmp = tempfile.mkstemp(dir=where, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, matrix, allow_pickle=False)
        paths.secure_file(tmp)
        os.replace(tmp, where / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    now = time.time()
    for other in where.iterdir():
        stale = other.name.startswith(prefix) and other.name != name and other.suffix == ".npy"
        left = other.suffix == ".tmp" and now - _mtime(other) > TMP_MAX_AGE_S
        if stale or left:
            with contextlib.suppress(OSError):
                other.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def load(conn: sqlite3.Connection, kind: str, scope: str, model_id: str, dims: int) -> Any:
    """The current matrix for (kind, scope, model, dims): the mapped sidecar, rebuilt from SQLite when stale,
    missing or unreadable (in memory when it cannot be written). Storage errors are typed (from the store)."""
    where = folder(conn, model_id)
    prefix = _prefix(kind, scope, dims)
    if where is not None:
        name = f"{prefix}{_current(conn, kind, scope, model_id)}.npy"
        matrix = _read(where / name, dims)
        if matrix is not None:
            return matrix
    matrix, stamp = build(conn, kind, scope, model_id, dims)
    if where is not None:
        with contextlib.suppress(OSError):
            _write(where, f"{prefix}{stamp}.npy", matrix, prefix)
    return matrix


def sync(conn: sqlite3.Connection, kind: str, scope: str, model_id: str) -> bool:
    """Bring the sidecar files of (kind, scope, model) up to date after vectors were written; True when one was
    (re)written. Never raises for file problems: the file is a cache, the next search rebuilds it."""
    where = folder(conn, model_id)
    if where is None:
        return False
    current = _current(conn, kind, scope, model_id)
    wrote = False
    for dims in search_index.vector_dims(conn, kind, scope, model_id):
        prefix = _prefix(kind, scope, dims)
        if _read(where / f"{prefix}{current}.npy", dims) is not None:
            continue
        matrix, stamp = build(conn, kind, scope, model_id, dims)
        try:
            _write(where, f"{prefix}{stamp}.npy", matrix, prefix)
            wrote = True
        except OSError:
            return wrote
    return wrote


def cosines(matrix: Any, query: Any) -> Any:
    """Cosine of a unit query against every row (vectors are unit length; int8 rows carry their scale).

    `einsum` converts int8 rows on the fly, single-threaded: at 100k × 128 it took 10–20 ms where
    `astype(float32) @ query` took 75–100 ms (a 51 MB temporary, and BLAS threads fighting on a busy machine)."""
    import numpy as np

    if len(matrix) == 0:
        return np.zeros(0, dtype=np.float32)
    scores = np.einsum("ij,j->i", matrix["vec"], np.asarray(query, dtype=np.float32))
    return scores if matrix["vec"].dtype == np.float32 else scores * matrix["scale"]


__all__ = ["build", "cosines", "digest", "folder", "load", "sync"]
