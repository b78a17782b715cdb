"""`response_usage`: the provider usage of a session's latest response, as `mc proxy` saw it (stdlib only).

Provider request bodies (Anthropic Messages, OpenAI Chat, Responses) carry no usage of their own, so
the proxy records what each response reported together with the raw-history ordinal of the last
message of the prompt it answered. The next pass applies it only to the assistant message that
directly follows that prompt (see `transform.pipeline`): one row per session, one indexed read.
"""

from __future__ import annotations

import sqlite3

from magic_context.store.db import classify
from magic_context.wire import model as m

_COLUMNS = "input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens"


def record(conn: sqlite3.Connection, harness: str, session_id: str, prompt_ordinal: int, usage: m.Usage,
           *, now_ms: int) -> bool:
    """Store `usage` as the latest response of the session; False when the session is unknown."""
    try:
        cursor = conn.execute(
            f"INSERT INTO response_usage (session_pk, prompt_ordinal, {_COLUMNS}, recorded_at) "
            "SELECT id, ?, ?, ?, ?, ?, ? FROM sessions WHERE harness = ? AND session_id = ? "
            "ON CONFLICT (session_pk) DO UPDATE SET prompt_ordinal = excluded.prompt_ordinal, "
            "input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, "
            "cache_read_input_tokens = excluded.cache_read_input_tokens, "
            "cache_creation_input_tokens = excluded.cache_creation_input_tokens, recorded_at = excluded.recorded_at",
            (prompt_ordinal, usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens,
             usage.cache_creation_input_tokens, now_ms, harness, session_id),
        )
    except sqlite3.Error as exc:
        raise classify(exc) from exc
    return cursor.rowcount > 0


def latest(conn: sqlite3.Connection, session_pk: int) -> tuple[int, m.Usage] | None:
    """(prompt ordinal, usage) of the session's latest recorded response, or None."""
    row = conn.execute(f"SELECT prompt_ordinal, {_COLUMNS} FROM response_usage WHERE session_pk = ?",
                       (session_pk,)).fetchone()
    if row is None:
        return None
    return int(row[0]), m.Usage(int(row[1]), int(row[2]), int(row[3]), int(row[4]))


def describe(conn: sqlite3.Connection, session_pk: int) -> dict[str, int] | None:
    """The session's latest recorded response usage as plain data (for `mc status`), or None."""
    row = conn.execute(f"SELECT prompt_ordinal, {_COLUMNS}, recorded_at FROM response_usage WHERE session_pk = ?",
                       (session_pk,)).fetchone()
    names = ("prompt_ordinal", *_COLUMNS.split(", "), "recorded_at")
    return dict(zip(names, (int(v) for v in row), strict=True)) if row is not None else None


__all__ = ["describe", "latest", "record"]
