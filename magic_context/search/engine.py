"""Unified search (§3): validate the query, run the lanes, merge by `score × source boost`, render.

`search` is the engine function `mc search` and the agent tool share. It reads the index (catching up a
session whose index is behind its last publish first), hides the live tail (ordinals above the last
compartment end) and the memories already visible in the session's head, and never raises for a
query FTS5 cannot parse: such a query simply finds nothing.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Final

from magic_context.errors import BadInput, MCError
from magic_context.records import Factory, as_dict, record
from magic_context.search import lanes
from magic_context.search import text as st
from magic_context.search.lanes import Hit, Query

SOURCES: Final = ("memory", "message", "git_commit", "note")
ALIASES: Final = {"compartment": "message", "messages": "message", "memories": "memory", "notes": "note",
                  "git": "git_commit", "commit": "git_commit", "commits": "git_commit"}
BOOST: Final = {"memory": 1.3, "message": 1.15, "compartment": 1.15, "git_commit": 1.2, "note": 1.0}
LANE_ORDER: Final = {"memory": 0, "message": 1, "compartment": 1, "git_commit": 2, "note": 3}
DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
# Message-vector blocks a search may embed itself (each publish catches up 16, `mc embed` the rest: search/backlog).
LAZY_BLOCKS: Final = 4


@record
class SearchResult:
    query: str
    hits: list[Hit]
    warnings: list[str] = Factory(factory=list)
    sources: list[str] = Factory(factory=list)

    def as_dicts(self) -> list[dict[str, Any]]:
        out = []
        for h in self.hits:
            d = {k: v for k, v in as_dict(h).items() if v is not None and k != "extra"}
            d.update(h.extra)
            d["score"] = round(h.score, 4)
            out.append(d)
        return out


def validate_query(query: str | None) -> str:
    """The query stripped; BadInput when empty, over 16 KiB or over 64 terms."""
    text = (query or "").strip()
    if not text:
        raise BadInput("'query' is required", fix="pass the words to look for, e.g. mc search 'pytest failure'")
    size = len(text.encode("utf-8", "replace"))
    if size > st.MAX_QUERY_CHARS:  # in bytes: 9 000 'é' are 18 000 bytes, so say bytes, not characters
        raise BadInput(f"query is {size} bytes (UTF-8); the limit is {st.MAX_QUERY_CHARS} bytes",
                       fix="search for a few distinctive words or an identifier")
    if len(text.split()) > st.MAX_QUERY_TERMS:
        raise BadInput(f"query has {len(text.split())} terms; the limit is {st.MAX_QUERY_TERMS}",
                       fix="search for a few distinctive words or an identifier")
    return text


def parse_sources(sources: list[str] | None) -> list[str]:
    """Normalized source names (aliases allowed); all when None; BadInput for an unknown name."""
    if sources is None:
        return list(SOURCES)
    out: list[str] = []
    for raw in sources:
        for given in (p.strip().lower() for p in raw.split(",")):
            if not given:
                continue
            name = ALIASES.get(given, given)
            if name not in SOURCES:
                raise BadInput(f"unknown source {name!r}", fix=f"use one or more of {', '.join(SOURCES)}")
            if name not in out:
                out.append(name)
    return out


def visible_memory_ids(conn: sqlite3.Connection, session_pk: int) -> set[int]:
    """Memory ids the session's head shows (m[0]/m[1]): already in context, so search hides them."""
    from magic_context.store.memories import visible_ids

    return set(visible_ids(conn, session_pk))


def _embed_query(conn: sqlite3.Connection, config: Any, text: str, warnings: list[str], *,
                 session_pks: list[int], project_id: str | None = None, now_ms: int | None = None,
                 ) -> tuple[Any, Any, str | None]:
    """(query vector, its message view, model id); Nones when embeddings are off or failing (FTS only).

    Messages of the searched sessions not yet embedded are embedded first, a few blocks at most, and the
    project's memories without a vector (§3.3: missing vectors are embedded on the fly and saved)."""
    if config is None:
        return None, None, None
    from magic_context.search import embed
    from magic_context.search.indexer import embed_memories, embed_messages

    try:
        embedder = embed.from_config(config)
        if embedder is None:
            return None, None, None
        vector = embedder.embed([text])
        for pk in session_pks:
            embed_messages(conn, pk, embedder, max_blocks=LAZY_BLOCKS, only_if_behind=True, now_ms=now_ms)
        if project_id:
            embed_memories(conn, project_id, embedder, now_ms=now_ms)
        embed.clear_failure(conn)  # the provider answers again: `mc status` stops warning (README)
        return vector[0], embedder.message_view(vector)[0], embedder.model_id
    except embed.EmbeddingNotInstalled:
        return None, None, None  # the optional extra is absent: FTS only, quietly (`mc doctor` says so)
    except (MCError, ImportError, OSError, ValueError) as exc:
        embed.record_failure(conn, exc, "search", now_ms=now_ms)
        warnings.append(f"embedding unavailable, FTS only: {exc.one_line() if isinstance(exc, MCError) else exc}")
        return None, None, None


def search(conn: sqlite3.Connection, query: str, *, session_pks: list[int], project_id: str | None,
           sources: list[str] | None = None, limit: int = DEFAULT_LIMIT, since_ms: int | None = None,
           until_ms: int | None = None, config: Any = None, now_ms: int | None = None,
           count_retrievals: bool = True, refresh_git: bool = True, project_dir: str | None = None,
           hide_visible: bool = True) -> SearchResult:
    """Search the given sessions (message lanes) and project (memory, git_commit, note lanes). `hide_visible`
    drops the memories the sessions' heads show (the agent's search: they are in its context)."""
    text = validate_query(query)
    chosen = parse_sources(sources)
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"--limit {limit} is out of range", fix=f"use 1 to {MAX_LIMIT}")
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    result = SearchResult(text, [], sources=chosen)
    for name, why in _lanes_off(config).items():  # §3.1: a source is searched only while its feature is on
        if name in chosen:
            chosen.remove(name)
            if sources is not None:  # asked for by name: say why nothing comes from it
                result.warnings.append(f"{name} is not searched: {why}")
    hidden: set[int] = set()
    for pk in session_pks if hide_visible else ():
        hidden |= visible_memory_ids(conn, pk)
    ids = st.id_query(text)
    if ids is not None and "memory" in chosen and project_id:
        from magic_context.store import search_index as idx

        rows = {r["id"]: r for r in idx.memories(conn, project_id, now, ids, any_status=True)}
        shortcut = [Hit("memory", i, 1 - 0.01 * n, "fts", rows[i]["content"], category=rows[i]["category"],
                        status=rows[i]["status"], at_ms=rows[i]["updated_at"])
                    for n, i in enumerate(ids) if i in rows and i not in hidden]
        if shortcut:
            # Returned before `_bump` on purpose: §3.4 counts the memories "the search" returns, and the original's
            # ctx_search answers an id query before its unified search runs, so a lookup by id is not counted. The
            # caller already held the id (m[0]'s `#id`, an earlier hit); re-reading it must not inflate the count.
            result.hits = shortcut[:limit]
            return result
    if "message" in chosen:
        from magic_context.errors import StorageBusy
        from magic_context.search import indexer

        for pk in session_pks:
            try:
                indexer.index_session(conn, pk, now_ms=now)
            except StorageBusy as exc:  # a historian run holds the write lock: search what is indexed
                result.warnings.append(f"index not brought up to date (database busy): {exc.one_line()}")
    if "git_commit" in chosen and refresh_git and project_id and project_dir and config is not None \
            and config.memory.git_commit_indexing.enabled:
        from magic_context.search import git

        try:
            git.refresh(conn, project_id, project_dir, config.memory.git_commit_indexing, now_ms=now)
        except MCError as exc:
            result.warnings.append(f"git commits not refreshed: {exc.one_line()}")
    wants_vector = chosen not in (["git_commit"], ["note"]) and any(c.isalnum() for c in text)
    vector, message_vector, model_id = _embed_query(
        conn, config, text, result.warnings, session_pks=session_pks if "message" in chosen else [],
        project_id=project_id if "memory" in chosen else None, now_ms=now) \
        if wants_vector else (None, None, None)
    q = Query(text, st.probes(text), st.sanitize(text), st.any_words(text), vector, model_id, message_vector,
              since_ms, until_ms, min_similarity=config.embedding.min_similarity if config is not None else None)
    tier = max(3 * limit, 10)
    merged: list[Hit] = []
    if "memory" in chosen and project_id:
        merged += lanes.memories(conn, project_id, q, limit, now_ms=now, hidden=hidden)
    if "message" in chosen:
        for pk in session_pks:
            cut = _cutoff(conn, pk)
            comps = lanes.compartments(conn, pk, q, cut, tier)[:tier]
            merged += lanes.messages(conn, pk, q, cut, tier, compartment_hits=comps)[:tier]
    if "git_commit" in chosen and project_id:
        merged += lanes.commits(conn, project_id, q, limit)[:tier]
    if "note" in chosen:
        merged += lanes.notes(conn, session_pks[0] if session_pks else None, project_id, q, limit)[:tier]
    merged.sort(key=lambda h: (-h.score * BOOST[h.source], LANE_ORDER[h.source], _tie(h)))
    result.hits = _dedupe(merged)[:limit]
    lanes.reach_back(conn, result.hits)
    for h in result.hits:
        h.score = h.score * BOOST[h.source]
    if count_retrievals:
        _bump(conn, [int(h.id) for h in result.hits if h.source == "memory"], now)
    return result


def _lanes_off(config: Any) -> dict[str, str]:
    """Sources whose feature the config turns off, with the setting that does it (none without a config)."""
    if config is None:
        return {}
    off = {}
    if not config.memory.enabled:
        off["memory"] = "memory.enabled = false"
    if not config.memory.git_commit_indexing.enabled:
        off["git_commit"] = "memory.git_commit_indexing.enabled = false (set it true to index HEAD's commits)"
    return off


def _cutoff(conn: sqlite3.Connection, session_pk: int) -> int:
    from magic_context.search.indexer import cutoff

    return cutoff(conn, session_pk)


def _tie(h: Hit) -> Any:
    if h.source == "memory":
        return (0, int(h.id))
    if h.source in ("message", "compartment"):
        return (0, h.ordinal_start or 0)
    return (-(h.at_ms or 0), str(h.id))


def _dedupe(hits: list[Hit]) -> list[Hit]:
    """Drop a message hit whose ±3 range a better-ranked hit of the same session already covers exactly."""
    seen: set[tuple[Any, ...]] = set()
    out: list[Hit] = []
    for h in hits:
        key = (h.source, h.session_pk, h.id) if h.source != "message" else ("m", h.session_pk, h.ordinal)
        if key in seen:
            continue
        seen.add(key)
        out.append(h)
    return out


def _bump(conn: sqlite3.Connection, ids: list[int], now_ms: int) -> None:
    if not ids:
        return
    from magic_context.store import search_index as idx
    from magic_context.store.db import atomic as transaction

    try:
        with transaction(conn):
            idx.bump_retrievals(conn, ids, now_ms)
    except sqlite3.Error:
        pass  # counters are best effort: a busy database must not fail a search


__all__ = ["BOOST", "SOURCES", "SearchResult", "parse_sources", "search", "validate_query", "visible_memory_ids"]
