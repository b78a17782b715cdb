"""The embedding backlog: embed what has no current vector for the configured model (§4, issue #12).

Vectors are keyed by model id, so after the provider was down at publish time, after `embedding.provider` or
`embedding.model` changed, or on a database from an older mc, most history has no vector the current model can
use and semantic search covers only what searches embedded lazily. `run` embeds the memories, compartments and
message blocks (256 ordinals each) of the given sessions and projects that lack a vector for the embedder's
model, or whose text changed since (the same text-hash guard as publish), and nothing else: a second run embeds
nothing. Work goes in bounded batches, each committed on its own, so a run stopped anywhere (a provider failure,
Ctrl-C, the `max_blocks` bound) keeps what it wrote and the next run resumes from there.

Callers: the background historian after each publish (`indexer.after_publish`, bounded by `PUBLISH_BLOCKS`)
and `mc embed` (the whole scope, with progress). The engine never prints: progress goes to a callback. A
provider failure stops the run with a partial result (`error` set), recorded where `mc status` / `mc doctor`
show the last embedding failure; search keeps falling back to FTS for what has no vector.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from magic_context.errors import MCError
from magic_context.records import Factory, record
from magic_context.store import search_index

KINDS: Final = ("memory", "compartment", "msgblock")
KIND_NAMES: Final = {"msgblock": "message blocks", "compartment": "compartments", "memory": "memories"}  # for people
BATCH: Final = 64  # memories or compartments per provider call and per transaction
# Message blocks a background historian run embeds after its publish: newest first, so the chunk it just folded
# is always among them. The run holds the session's historian lease until it returns, and a later compaction of
# that session waits for it; 16 blocks (≤ 4 096 messages) take about a second with the local model and at most
# 64 requests of 64 texts with an openai-compatible endpoint, where a whole 100k-message session after a model
# switch would hold the lease for minutes. What is left is embedded by the next runs or by `mc embed`.
PUBLISH_BLOCKS: Final = 16

Progress = Callable[[int, int, str], None]
"""(items done, items planned, kind being embedded) after each committed batch."""


def _zeros() -> dict[str, int]:
    return dict.fromkeys(KINDS, 0)


@record
class BacklogResult:
    """What one run did, per kind: embedded now, skipped (already current), left (bound or failure), failed."""

    model_id: str
    model: str
    provider: str
    sessions: int = 0
    projects: int = 0
    embedded: dict[str, int] = Factory(factory=_zeros)
    skipped: dict[str, int] = Factory(factory=_zeros)
    left: dict[str, int] = Factory(factory=_zeros)
    failed: dict[str, int] = Factory(factory=_zeros)
    messages: int = 0  # messages inside the embedded message blocks
    error: str | None = None  # the provider failure that stopped the run (recorded for status/doctor)
    not_installed: bool = False  # `local` without the optional extra: FTS only, not a fault

    @property
    def total_embedded(self) -> int:
        return sum(self.embedded.values())

    @property
    def complete(self) -> bool:
        return self.error is None and not any(self.left.values()) and not any(self.failed.values())

    def as_dict(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "model": self.model, "provider": self.provider,
                "sessions": self.sessions, "projects": self.projects, "embedded": dict(self.embedded),
                "messages": self.messages, "skipped": dict(self.skipped), "left": dict(self.left),
                "failed": dict(self.failed), "complete": self.complete, "error": self.error}


@record
class _Job:
    kind: str
    scope: str
    items: list[tuple[str, str, int | None, int | None, str]]  # (ref, text, start, end, text hash)


def _now() -> int:
    return int(time.time() * 1000)


def _pending(have: dict[str, str], items: Sequence[tuple[str, str, int | None, int | None]],
             result: BacklogResult, kind: str) -> list[tuple[str, str, int | None, int | None, str]]:
    from magic_context.search.embed import text_hash

    todo = []
    for ref, body, start, end in items:
        if not body.strip():
            continue
        digest = text_hash(body)
        if have.get(ref) == digest:
            result.skipped[kind] += 1
        else:
            todo.append((ref, body, start, end, digest))
    return todo


def _plan(conn: sqlite3.Connection, model_id: str, result: BacklogResult, *, session_pks: Sequence[int],
          project_ids: Sequence[str], now: int, max_blocks: int | None) -> list[_Job]:
    """The batches to embed: memories, then compartments, then message blocks newest first (up to `max_blocks`)."""
    from magic_context.search import indexer

    jobs: list[_Job] = []
    for project in project_ids:
        have = search_index.vector_hashes(conn, "memory", project, model_id)
        mems = [(str(m["id"]), m["content"], None, None) for m in search_index.memories(conn, project, now)]
        todo = _pending(have, mems, result, "memory")
        jobs += [_Job("memory", project, todo[i:i + BATCH]) for i in range(0, len(todo), BATCH)]
    for pk in session_pks:
        scope = str(pk)
        have = search_index.vector_hashes(conn, "compartment", scope, model_id)
        comps = [(str(c["id"]), f"{c['title']}\n{c['content']}", c["start_ordinal"], c["end_ordinal"])
                 for c in search_index.compartments(conn, pk)]
        todo = _pending(have, comps, result, "compartment")
        jobs += [_Job("compartment", scope, todo[i:i + BATCH]) for i in range(0, len(todo), BATCH)]
    blocks: list[_Job] = []
    for pk in session_pks:
        scope = str(pk)
        have = search_index.vector_hashes(conn, "msgblock", scope, model_id)
        members: dict[int, list[Any]] = {}
        for row in search_index.message_texts(conn, pk):
            members.setdefault(indexer.block_of(row[0]), []).append(row)
        for number in sorted(members, reverse=True):  # newest first: what a publish just folded comes first
            rows = members[number]
            digest = indexer.block_digest(rows)
            if have.get(str(number)) == digest:
                result.skipped["msgblock"] += 1
                continue
            blocks.append(_Job("msgblock", scope, [(str(r[0]), r[2][:indexer.MESSAGE_TEXT_CHARS], r[0], r[0], digest)
                                                  for r in rows]))
    if max_blocks is not None and len(blocks) > max_blocks:
        result.left["msgblock"] += len(blocks) - max_blocks
        blocks = blocks[:max_blocks]
    return jobs + blocks


def _size(job: _Job) -> int:
    return 1 if job.kind == "msgblock" else len(job.items)


def _write(conn: sqlite3.Connection, job: _Job, embedder: Any, model_id: str, now: int) -> None:
    """Embed one batch and commit it (one transaction: a stop between batches keeps every earlier one)."""
    from magic_context.search import indexer
    from magic_context.search.embed import pack
    from magic_context.store.db import atomic

    if job.kind == "msgblock":
        vectors = embedder.embed_messages([t[1] for t in job.items])
        ordinals = [int(t[2] or 0) for t in job.items]
        number = str(indexer.block_of(ordinals[0]))
        with atomic(conn):
            search_index.put_vector(conn, "msgblock", number, model_id, scope=job.scope, text_hash=job.items[0][4],
                                    vector=indexer.pack_block(ordinals, vectors), dims=int(vectors.shape[1]),
                                    now_ms=now, start=ordinals[0], end=ordinals[-1])
        return
    vectors = embedder.embed([t[1] for t in job.items])
    with atomic(conn):
        for (ref, _body, start, end, digest), vector in zip(job.items, vectors, strict=True):
            search_index.put_vector(conn, job.kind, ref, model_id, scope=job.scope, text_hash=digest,
                                    vector=pack(vector), dims=int(vector.shape[0]), now_ms=now, start=start, end=end)


def run(conn: sqlite3.Connection, embedder: Any, *, session_pks: Sequence[int], project_ids: Sequence[str],
        max_blocks: int | None = None, progress: Progress | None = None, where: str = "backlog",
        now_ms: int | None = None) -> BacklogResult:
    """Embed what the sessions (compartments, message blocks) and projects (live memories) lack for the
    embedder's model. Sessions are indexed first (a session published by an older mc has no message index).

    Stops at the first provider failure with a partial result (`error` set, the failure recorded under `where`);
    storage errors are typed and propagate (what was committed before them stays)."""
    from magic_context.search import embed, indexer, vectorfile

    now = now_ms or _now()
    result = BacklogResult(embedder.model_id, embedder.model, embedder.provider, len(session_pks), len(project_ids))
    for pk in session_pks:
        indexer.index_session(conn, pk, now_ms=now)
    jobs = _plan(conn, embedder.model_id, result, session_pks=session_pks, project_ids=project_ids, now=now,
                 max_blocks=max_blocks)
    total, done = sum(_size(j) for j in jobs), 0
    touched: set[tuple[str, str]] = set()
    at = 0  # the batch being embedded: after a failure, it and those after it are left
    try:
        while at < len(jobs):
            job = jobs[at]
            _write(conn, job, embedder, embedder.model_id, now)
            touched.add((job.kind, job.scope))
            result.embedded[job.kind] += _size(job)
            result.messages += len(job.items) if job.kind == "msgblock" else 0
            done += _size(job)
            at += 1
            if progress is not None:
                progress(done, total, job.kind)
    except embed.EmbeddingNotInstalled as exc:
        result.error, result.not_installed = exc.one_line(), True
        _leave(result, jobs[at:])
    except (embed.EmbeddingUnavailable, ImportError, OSError, ValueError) as exc:
        result.error = exc.one_line() if isinstance(exc, MCError) else f"{type(exc).__name__}: {exc}"
        result.failed[jobs[at].kind] += _size(jobs[at])
        _leave(result, jobs[at + 1:])
        embed.record_failure(conn, exc, where, now_ms=now)
    finally:
        for kind, scope in sorted(touched):  # the searches' mapped matrices, ready before the next search
            if kind != "memory":
                vectorfile.sync(conn, kind, scope, embedder.model_id)
    if result.error is None:
        embed.clear_failure(conn)  # the provider answers: `mc status` stops warning
    return result


def _leave(result: BacklogResult, jobs: Sequence[_Job]) -> None:
    for job in jobs:
        result.left[job.kind] += _size(job)


def scope_of(conn: sqlite3.Connection, *, all_sessions: bool, session_pks: Sequence[int],
             project_id: str | None) -> tuple[list[int], list[str]]:
    """(sessions, projects) a run covers: the given sessions and their projects, or every session and every
    project with a session or a memory (`--all`)."""
    if all_sessions:
        pks = search_index.all_session_pks(conn)
        projects = {search_index.session_field(conn, pk, "project_id") for pk in pks}
        projects.update(search_index.memory_projects(conn))
        return pks, sorted(p for p in projects if p)
    projects = {search_index.session_field(conn, pk, "project_id") for pk in session_pks}
    if project_id:
        projects.add(project_id)
    return list(session_pks), sorted(p for p in projects if p)


def missing(conn: sqlite3.Connection, session_pk: int, model_id: str, *, now_ms: int | None = None,
            ) -> dict[str, dict[str, int]]:
    """kind -> {"total", "missing"} for one session and its project's memories under `model_id` (one indexed
    query; `mc status`). Blocks of messages not indexed yet are not counted: the next publish or run indexes them."""
    from magic_context.search.indexer import BLOCK

    project = search_index.session_field(conn, session_pk, "project_id")
    counts = search_index.missing_vectors(conn, session_pk, project, model_id, block=BLOCK, now_ms=now_ms or _now())
    return {kind: {"total": total, "missing": gone} for kind, (total, gone) in counts.items()}


def missing_all(conn: sqlite3.Connection, model_id: str, *, now_ms: int | None = None) -> dict[str, dict[str, int]]:
    """`missing` summed over every session and project (what `mc embed --all` would embed; `mc doctor`): the
    same indexed query once per session, each project's memories counted once."""
    from magic_context.search.indexer import BLOCK

    now = now_ms or _now()
    pks, projects = scope_of(conn, all_sessions=True, session_pks=(), project_id=None)
    out = {kind: {"total": 0, "missing": 0} for kind in KINDS}
    scopes: list[tuple[int | None, str | None]] = [(pk, None) for pk in pks] + [(None, p) for p in projects]
    for pk, project in scopes:
        counts = search_index.missing_vectors(conn, pk, project, model_id, block=BLOCK, now_ms=now)
        for kind, (total, gone) in counts.items():
            out[kind]["total"] += total
            out[kind]["missing"] += gone
    return out


def describe_missing(counts: dict[str, dict[str, int]]) -> str | None:
    """"812 of 896 message blocks, 3 of 40 memories" (the kinds with something missing), or None when nothing is:
    the words `mc status` and `mc doctor` both use."""
    parts = [f"{counts[k]['missing']} of {counts[k]['total']} {name}" for k, name in KIND_NAMES.items()
             if (counts.get(k) or {}).get("missing")]
    return ", ".join(parts) or None


__all__ = ["KINDS", "KIND_NAMES", "PUBLISH_BLOCKS", "BacklogResult", "Progress", "describe_missing", "missing",
           "missing_all", "run", "scope_of"]
