"""Keeps the search index in step with a session's folded history (§3.2, §4.5).

`index_session` writes one `message_text` row per live raw message at or below the last compartment
end (the live tail is never indexed), re-indexes rows whose content changed and removes rows no
longer live. It is idempotent and cheap when nothing moved: a marker (newest raw row id, live count,
cutoff) is compared first. It runs after each historian publish (in the historian's process — the
background `mc wrapup`, or the pass itself only in inline mode, never on a defer pass) and before a
search, so a session published by an older mc is searchable too.

`embed_session` embeds compartments, messages (in blocks of 256 ordinals) and the project's memories with
the configured provider, then refreshes the sidecar matrices searches map (search/vectorfile.py); failures
are recorded and searching falls back to FTS.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Final

from magic_context.errors import MCError
from magic_context.search import text as search_text
from magic_context.store import search_index

DECODE_BATCH: Final = 200


def _now() -> int:
    return int(time.time() * 1000)


def cutoff(conn: sqlite3.Connection, session_pk: int) -> int:
    """The last compartment end, or -1 when nothing is folded yet (then no message is searchable)."""
    end = search_index.folded_through(conn, session_pk)
    return int(end) if end is not None else -1


def _marker(conn: sqlite3.Connection, session_pk: int, through: int) -> str:
    newest, live = search_index.raw_marker(conn, session_pk)
    return f"{newest}:{live}:{through}"


def index_session(conn: sqlite3.Connection, session_pk: int, *, now_ms: int | None = None) -> int:
    """Bring the session's message index up to its cutoff; returns the number of rows written or removed.
    Storage errors are typed (`StorageBusy` when another process holds the write lock)."""
    from magic_context.store.db import classify

    try:
        return _index_session(conn, session_pk, now_ms)
    except sqlite3.Error as exc:
        raise classify(exc) from exc


def _index_session(conn: sqlite3.Connection, session_pk: int, now_ms: int | None) -> int:
    from magic_context.history.runner import _decode
    from magic_context.store import raw
    from magic_context.store.db import atomic as transaction

    through = cutoff(conn, session_pk)
    key = f"indexed:{session_pk}"
    marker = _marker(conn, session_pk, through)
    if search_index.get_state(conn, key) == marker:
        return 0
    harness = search_index.session_field(conn, session_pk, "harness")
    live = [row for row in raw.live_index(conn, session_pk) if row[0] <= through]
    indexed = search_index.indexed_hashes(conn, session_pk)
    live_ordinals = {row[0] for row in live}
    todo = [row[0] for row in live if indexed.get(row[0]) != row[2]]
    gone = [o for o in indexed if o not in live_ordinals]
    changed = 0
    with transaction(conn):
        changed += search_index.delete_messages(conn, session_pk, gone)
        for i in range(0, len(todo), DECODE_BATCH):
            batch = todo[i:i + DECODE_BATCH]
            stored = raw.read_range(conn, session_pk, batch[0], batch[-1])
            wanted = set(batch)
            # decode the whole contiguous span so tool results pair with their calls, keep what is wanted
            messages = _decode(harness, stored)
            rows = [(msg.ordinal, msg.role, s.content_hash, msg.created_at or s.created_at,
                     search_text.message_text(msg))
                    for msg, s in zip(messages, stored, strict=True) if s.ordinal in wanted]
            changed += search_index.upsert_messages(conn, session_pk, rows)
        search_index.set_state(conn, key, marker, now_ms or _now())
        count = search_index.indexed_count(conn, session_pk)
        search_index.set_state(conn, f"count:{session_pk}", str(count), now_ms or _now())
    return changed


def indexed_count(conn: sqlite3.Connection, session_pk: int) -> int:
    """Indexed messages of the session, as counted by the last `index_session` (a count(*) costs ~30 ms at 100k)."""
    value = search_index.get_state(conn, f"count:{session_pk}")
    if value is not None:
        return int(value)
    return search_index.indexed_count(conn, session_pk)


BLOCK: Final = 256  # ordinals per message-vector block: 100k messages load as ~400 blobs, not 100k rows
MESSAGE_TEXT_CHARS: Final = 1500  # of one message, embedded (a static model averages: more text dilutes)


def block_of(ordinal: int) -> int:
    return ordinal // BLOCK


def pack_block(ordinals: list[int], vectors: Any) -> bytes:
    """int32 ordinals, float32 per-vector scales, then int8 vectors (v ≈ q · scale), little-endian, no header
    (count = len / (8 + dims)).

    Message vectors alone are stored quantized (compartments and memories stay float32): a search reads every
    block of the session, and at 100k messages × 128 dims float32 is 51 MB to read per query; int8 is 13 MB,
    converts to float32 fast (float16 did not: numpy's half conversion cost ~100 ms), and keeps cosines
    within ~0.01, which leaves the bench's rankings unchanged."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    scale = np.abs(matrix).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(matrix / scale[:, None]), -127, 127).astype("<i1")
    return np.asarray(ordinals, dtype="<i4").tobytes() + scale.astype("<f4").tobytes() + quantized.tobytes()


def unpack_block(blob: bytes, dims: int) -> tuple[Any, Any, Any]:
    """(ordinals, scales, int8 matrix) of one block: cosine = (matrix @ query) · scales for a unit query."""
    import numpy as np

    n = len(blob) // (8 + dims)
    return (np.frombuffer(blob, dtype="<i4", count=n), np.frombuffer(blob, dtype="<f4", offset=4 * n, count=n),
            np.frombuffer(blob, dtype="<i1", offset=8 * n).reshape(n, dims))


def block_digest(members: list[Any]) -> str:
    """The text hash of one message block's (ordinal, content hash, text) rows: changes when any member does."""
    from magic_context.search.embed import text_hash

    return text_hash("".join(f"{r[0]}:{r[1]};" for r in members))


def embed_messages(conn: sqlite3.Connection, session_pk: int, embedder: Any, *, now_ms: int | None = None,
                   max_blocks: int | None = None, only_if_behind: bool = False) -> int:
    """Embed the session's indexed messages into per-block vectors (re-embedding a block whose text changed).

    Returns the number of blocks embedded; `max_blocks` bounds the work. `only_if_behind` (the search path)
    first checks with two indexed reads whether the vectors end before the last indexed message, and does
    nothing when they do not: edits inside embedded blocks are picked up by the next publish.
    """
    from magic_context.store.db import atomic as transaction

    now = now_ms or _now()
    scope = str(session_pk)
    kind = "msgblock"
    if only_if_behind:
        last = search_index.last_text_ordinal(conn, session_pk)
        covered = search_index.vectors_end(conn, kind, scope, embedder.model_id)
        if last is None or (covered is not None and covered >= last):
            return 0
    rows = search_index.message_texts(conn, session_pk)
    blocks: dict[int, list[Any]] = {}
    for row in rows:
        blocks.setdefault(block_of(row[0]), []).append(row)
    have = search_index.vector_hashes(conn, kind, scope, embedder.model_id)
    done = 0
    for number, members in sorted(blocks.items()):
        digest = block_digest(members)
        if have.get(str(number)) == digest:
            continue
        if max_blocks is not None and done >= max_blocks:
            break
        vectors = embedder.embed_messages([r[2][:MESSAGE_TEXT_CHARS] for r in members])
        with transaction(conn):
            search_index.put_vector(conn, kind, str(number), embedder.model_id, scope=scope, text_hash=digest,
                                    vector=pack_block([r[0] for r in members], vectors), dims=int(vectors.shape[1]),
                                    now_ms=now, start=members[0][0], end=members[-1][0])
        done += 1
    return done


def _embed_missing(conn: sqlite3.Connection, embedder: Any, kind: str, scope: str, *,
                   items: list[tuple[str, str, int | None, int | None]], now_ms: int) -> int:
    """Embed (ref, text, start, end) items whose text hash has no vector yet under the embedder's model."""
    from magic_context.search.embed import pack, text_hash
    from magic_context.store.db import atomic as transaction

    have = search_index.vector_hashes(conn, kind, scope, embedder.model_id)
    todo = [(ref, body, s, e, text_hash(body)) for ref, body, s, e in items if body.strip()]
    todo = [t for t in todo if have.get(t[0]) != t[4]]
    done = 0
    for i in range(0, len(todo), 64):
        batch = todo[i:i + 64]
        vectors = embedder.embed([t[1] for t in batch])
        with transaction(conn):
            for (ref, _body, s, e, digest), vector in zip(batch, vectors, strict=True):
                search_index.put_vector(conn, kind, ref, embedder.model_id, scope=scope, text_hash=digest,
                                        vector=pack(vector), dims=int(vector.shape[0]), now_ms=now_ms, start=s, end=e)
        done += len(batch)
    return done


def embed_session(conn: sqlite3.Connection, session_pk: int, embedder: Any, *, now_ms: int | None = None) -> int:
    """Embed the session's compartments and messages and its project's memories (hash-guarded)."""
    now = now_ms or _now()
    scope = str(session_pk)
    comps = search_index.compartments(conn, session_pk)
    items = [(str(c["id"]), f"{c['title']}\n{c['content']}", c["start_ordinal"], c["end_ordinal"]) for c in comps]
    done = _embed_missing(conn, embedder, "compartment", scope, items=items, now_ms=now)
    done += embed_messages(conn, session_pk, embedder, now_ms=now)
    from magic_context.search import vectorfile

    for kind in ("compartment", "msgblock"):  # the searches' memory-mapped matrices, ready before the first search
        vectorfile.sync(conn, kind, scope, embedder.model_id)
    project = search_index.session_field(conn, session_pk, "project_id")
    if project:
        done += embed_memories(conn, project, embedder, now_ms=now)
    return done


def embed_memories(conn: sqlite3.Connection, project_id: str, embedder: Any, *, now_ms: int | None = None) -> int:
    """Embed the project's live memories that have no vector for this model (or whose content changed)."""
    now = now_ms or _now()
    mems = search_index.memories(conn, project_id, now)
    return _embed_missing(conn, embedder, "memory", project_id,
                          items=[(str(m["id"]), m["content"], None, None) for m in mems], now_ms=now)


def after_publish(conn: sqlite3.Connection, session_pk: int, config: Any, *, embed_now: bool | None = None,
                  now_ms: int | None = None) -> dict[str, Any]:
    """Index folded messages, then embed what the session and its project's memories lack — the chunk just
    published and a bounded catch-up of older backlog (`backlog.PUBLISH_BLOCKS` message blocks, newest first);
    never raises (a search index problem must not fail the historian). Stamps use `now_ms` (the publish's
    clock), else the wall clock.

    A historian run inside the transform pass (`MAGIC_CONTEXT_HISTORIAN=inline`: replays, tests) indexes but
    does not embed, so replayed pass times stay what they were; searches and the next background publish embed.
    """
    from magic_context.history.runner import inline_mode
    from magic_context.search import backlog, embed

    report: dict[str, Any] = {"indexed": 0, "embedded": 0}
    try:
        report["indexed"] = index_session(conn, session_pk, now_ms=now_ms)
    except (sqlite3.Error, MCError) as exc:
        report["error"] = str(exc)
        return report
    if not (embed_now if embed_now is not None else not inline_mode()):
        return report
    try:
        embedder = embed.from_config(config)
        if embedder is None:
            embed.clear_failure(conn)  # embeddings are off: no warning to keep showing
            return report
        project = search_index.session_field(conn, session_pk, "project_id")
        result = backlog.run(conn, embedder, session_pks=[session_pk], project_ids=[project] if project else [],
                             max_blocks=backlog.PUBLISH_BLOCKS, where="publish", now_ms=now_ms)
        report["embedded"] = result.total_embedded
        report["backlog_left"] = sum(result.left.values()) + sum(result.failed.values())
        if result.not_installed:
            embed.clear_failure(conn)  # the optional extra is absent: FTS only, not a fault
            report["embedding_error"] = "not installed"
        elif result.error:
            report["embedding_error"] = result.error
    except (sqlite3.Error, MCError, ImportError, OSError, ValueError) as exc:
        embed.record_failure(conn, exc, "publish", now_ms=now_ms)
        report["embedding_error"] = str(exc)
    return report


def describe(conn: sqlite3.Connection, session_pk: int | None = None) -> dict[str, Any]:
    """Index and embedding state for `mc status` / `mc doctor`."""
    from magic_context.search import embed

    out: dict[str, Any] = {"last_embedding_failure": embed.last_failure(conn)}
    if session_pk is not None:
        out["indexed_messages"] = search_index.indexed_count(conn, session_pk)
        out["searchable_through"] = cutoff(conn, session_pk)
        out["vectors"] = {k: search_index.count_vectors(conn, k, str(session_pk)) for k in ("compartment", "msgblock")}
    return out


__all__ = [
    "after_publish", "block_digest", "cutoff", "describe", "embed_memories", "embed_messages", "embed_session",
    "index_session", "indexed_count", "pack_block", "unpack_block",
]
