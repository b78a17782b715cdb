"""The embedding state for `mc doctor` and `mc status`: which provider, whether it embeds now, the last failure."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from magic_context.doctor.registry import Status


def last_failure_readonly(db_path: str) -> dict[str, Any] | None:
    """The last recorded embedding failure, read without writing (None when absent or unreadable)."""
    from magic_context.search.embed import FAILURE_KEY

    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        from magic_context.errors import MCError
        from magic_context.store.search_index import get_state

        value = get_state(conn, FAILURE_KEY)
        return json.loads(value) if value else None
    except (sqlite3.Error, MCError, ValueError):
        return None
    finally:
        conn.close()


def probe(config: Any) -> tuple[Status, str]:
    """(ok | warn, detail): embed one short text with the configured provider (nothing is stored)."""
    from magic_context.errors import MCError
    from magic_context.search import embed

    provider = config.embedding.provider
    if provider == "off":
        return Status.OK, "embedding.provider = off: search is FTS only"
    try:
        embedder = embed.from_config(config)
        if embedder is None:
            return Status.OK, "off"
        vector = embedder.embed(["mc doctor checks the embedding provider"])
    except embed.EmbeddingNotInstalled:  # an optional extra left out on purpose is not a fault
        return Status.OK, ("local embeddings not installed: search uses FTS only "
                      "(pip install 'magic-context[embeddings]' to add them)")
    except (MCError, ImportError, OSError, ValueError) as exc:
        text = exc.one_line() if isinstance(exc, MCError) else str(exc)
        return Status.WARN, f"{provider}: {text}; search falls back to FTS only"
    from magic_context.search.lanes import effective_floors, floors_text

    floors = effective_floors(provider, config.embedding.min_similarity) or {}
    source = "embedding.min_similarity" if config.embedding.min_similarity is not None else "default"
    return Status.OK, f"{provider} ({embedder.model}): {vector.shape[1]} dimensions; {floors_text(floors, source)}"


__all__ = ["last_failure_readonly", "probe"]
