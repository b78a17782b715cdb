"""Everything `mc status` shows for one session, as plain data (the command renders it)."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from magic_context import paths
from magic_context.errors import NotFound
from magic_context.history.states import HistorianState
from magic_context.results import Result
from magic_context.store import compartments as compartment_store
from magic_context.store import leases, passes, responses, sessions
from magic_context.store import memories as memory_store
from magic_context.store import notes as note_store
from magic_context.store import pending as pending_ops
from magic_context.store import raw as raw_store
from magic_context.store import state as state_store
from magic_context.store import tags as tag_rows
from magic_context.store.sessions import find_session, latest_session

RECENT_PASSES = 10


def cache_split(reports: list[dict[str, Any]]) -> dict[str, float]:
    """Estimated cache-read / cache-write tokens over consecutive passes (oldest first).

    A defer pass re-reads the previous request from cache and writes only what was appended; a
    busting pass is counted as written in full (conservative: a SOFT pass really keeps m[0] cached).
    """
    read = written = 0
    previous = None
    for report in reports:
        size = int(report.get("tokens_after", 0))
        if previous is not None and report.get("pass") == passes.PassKind.DEFER:
            reused = min(previous, size)
            read += reused
            written += size - reused
        else:
            written += size
        previous = size
    total = read + written
    return {"read_tokens": read, "write_tokens": written, "read_share": round(read / total, 4) if total else 0.0}


def session_status(conn: sqlite3.Connection, session_pk: int) -> dict[str, Any]:
    info = sessions.session_info(conn, session_pk)
    if info is None:
        raise NotFound(f"session #{session_pk} not found")
    project_id, limit, counter = info["project_id"], info["context_limit"], info["tag_counter"]
    tag_counts = tag_rows.status_counts(conn, session_pk)
    pending = pending_ops.queued_numbers(conn, session_pk)
    compartments = compartment_store.outline(conn, session_pk)
    memory_counts = memory_store.counts(conn, project_id, int(time.time() * 1000)) if project_id else {}
    memories = memory_counts.get("active", 0) + memory_counts.get("permanent", 0)
    notes = note_store.counts(conn, session_pk, project_id)
    raw_count = raw_store.count(conn, session_pk)
    reports = passes.recent_reports(conn, session_pk)
    last = reports[-1] if reports else {}
    state = state_store.load_state(conn, session_pk, ("historian", "historian_failure", "fallbacks"))
    used = int(last.get("tokens_after", 0))
    window = int(last.get("context_limit") or limit or 0)
    if compartments:
        from magic_context.history import decay

        tiers = decay.assign_tiers([{"importance": c["importance"]} for c in compartments],
                                   max(1, int(0.15 * window * 0.65)) if window else None)
        for compartment, tier in zip(compartments, tiers, strict=True):
            compartment["tier"] = tier
    return {
        "session": {"harness": info["harness"], "session_id": info["session_id"], "project_id": project_id,
                    "project_dir": info["project_dir"], "agent": info["agent"], "model": info["model_key"],
                    "created_at": info["created_at"], "updated_at": info["updated_at"]},
        "context": {"used_tokens": used, "limit_tokens": window,
                    "percent": round(100 * used / window, 1) if window else None,
                    "usage_tokens": last.get("usage_tokens"), "usage_source": last.get("usage_source"),
                    "last_response_usage": responses.describe(conn, session_pk)},
        "tags": {"total": counter, "active": tag_counts.get("active", 0), "dropped": tag_counts.get("dropped", 0)},
        "pending_drops": pending,
        "raw_messages": raw_count,
        "compartments": compartments,
        "memories": memories,
        "memory": memory_counts,
        "notes": notes,
        "historian": {"state": historian_state(conn, session_pk, state.get("historian", HistorianState.IDLE)),
                      "last_failure": state.get("historian_failure")},
        "fallbacks": state.get("fallbacks"),  # passes that served last-known-good or the input unchanged
        "search": _search(conn, session_pk, info["project_dir"]),
        "passes": reports[-RECENT_PASSES:],
        "cache": cache_split(reports),
        "paths": paths.all_paths(),
    }


def _search(conn: sqlite3.Connection, session_pk: int, project_dir: str | None) -> dict[str, Any]:
    """Search index and embedding state (issue #12): indexed messages, vectors, the last embedding failure, and
    the embedding provider and model the session's project is configured with (nothing is embedded to show it)."""
    from pathlib import Path

    from magic_context.config.load import load_config
    from magic_context.search.embed import LOCAL_MODEL
    from magic_context.search.indexer import describe
    from magic_context.search.lanes import effective_floors

    out = describe(conn, session_pk)
    config = load_config(Path(project_dir) if project_dir else None).config
    section = config.embedding
    model = section.model or (LOCAL_MODEL if section.provider == "local" else None)
    out["embedding"] = {"provider": section.provider, "model": None if section.provider == "off" else model}
    floors = effective_floors(section.provider, section.min_similarity)
    if floors is not None:  # what a hit found by its vector alone needs, and whether the user's setting decides it
        out["embedding"]["min_similarity"] = floors
        out["embedding"]["min_similarity_from"] = ("embedding.min_similarity" if section.min_similarity is not None
                                                   else "default")
    if section.provider == "local":
        from importlib.util import find_spec

        out["embedding"]["installed"] = find_spec("wordllama") is not None  # without the extra: FTS only
    if section.provider != "off" and out["embedding"].get("installed") is not False:
        out["embedding"]["missing"] = _missing(conn, session_pk, config)  # the backlog `mc embed` fills
    return out


def _missing(conn: sqlite3.Connection, session_pk: int, config: Any) -> Any:
    """kind -> {total, missing} vectors for the configured model (the embedding backlog `mc embed` fills), or
    None when embeddings are off or the provider is misconfigured; one indexed query, nothing is embedded."""
    from magic_context.errors import MCError
    from magic_context.search import backlog, embed

    try:
        embedder = embed.from_config(config)
        return None if embedder is None else backlog.missing(conn, session_pk, embedder.model_id)
    except (MCError, sqlite3.Error):
        return None


def historian_state(conn: sqlite3.Connection, session_pk: int, stored: Any) -> Any:
    """The stored historian state, unless it says "running" while no live process holds the lease: a run
    killed mid-way (kill -9, a crash) never wrote "idle", so it shows as stopped, not running."""
    if not isinstance(stored, dict) or stored.get("state") != HistorianState.RUNNING:
        return stored
    name = leases.historian_lease(session_pk)
    if leases.is_live(conn, name, int(time.time() * 1000)):
        found = leases.holder(conn, name)
        return {**stored, "holder": found[0] if found else None}
    return {**stored, "state": HistorianState.STOPPED,
            "note": "the run ended without finishing (its process is gone); the next pass may start another"}


def status(conn: sqlite3.Connection, *, session_id: str | None = None, harness: str | None = None,
           project_id: str | None = None) -> dict[str, Any]:
    """Status of the named session, else the latest one; `{"session": None, ...}` when there is none."""
    pk = find_session(conn, session_id, harness) if session_id else latest_session(conn, project_id)
    if pk is None:
        return {"session": None, "paths": paths.all_paths()}
    return session_status(conn, pk)


def config_files(project_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The config files read for `project_dir` (user's, project's) and their problems (`mc status`'s `config`)."""
    from pathlib import Path

    from magic_context.config.load import load_config

    loaded = load_config(Path(project_dir))
    read = [str(f) for f in (loaded.user_file, loaded.project_file) if f is not None and f.exists()]
    return {"files": read, "warnings": [str(w) for w in loaded.warnings]}


def report(conn: sqlite3.Connection, *, session_id: str | None = None, harness: str | None = None,
           project_id: str | None = None, project_dir: str | os.PathLike[str] | None = None) -> Result:
    """`mc status`'s result: `status(...)` as data, plus the config of the session's project (else `project_dir`,
    else the current directory)."""
    data = status(conn, session_id=session_id, harness=harness, project_id=project_id)
    where = (data.get("session") or {}).get("project_dir") or project_dir or os.getcwd()
    return Result("status", {**data, "config": config_files(where)})


__all__ = ["cache_split", "config_files", "historian_state", "latest_session", "report", "session_status", "status"]
