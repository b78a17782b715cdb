"""The historian inside real replays: compartments reach the served head and keep the anchors."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import orjson
import pytest
from session_replay import replay

from magic_context import paths
from magic_context.history import files
from magic_context.store import raw as raw_store
from magic_context.transform.protocol import CODECS
from magic_context.wire import model as m

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
PATH_RE = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.\w{1,6}")


def _paths_in_calls(messages: list[m.Message]) -> set[str]:
    found: set[str] = set()
    for message in messages:
        for block in message.blocks:
            if block.kind == m.TOOL_CALL and isinstance(block.input, dict):
                for key in ("path", "file_path", "filePath"):
                    value = block.input.get(key)
                    if isinstance(value, str) and "/" in value:
                        found.add(value)
    return found


@pytest.mark.slow
def test_pi_before_compaction_folds_into_the_head_and_keeps_the_paths() -> None:
    session = "historian-replay"
    outcome = replay(SESSIONS / "pi_before-compaction.jsonl", "pi", 120_000, subprocess_mode=True,
                     session_id=session)
    assert outcome.problems == []
    assert outcome.peak_served <= 120_000
    served = orjson.dumps(outcome.last_document).decode()
    assert "<session-history>\\n## " in served  # compartments rendered in m[0] (JSON-escaped newline)

    conn = sqlite3.connect(paths.db_path())
    try:
        pk, harness = conn.execute("SELECT id, harness FROM sessions WHERE session_id = ?", (session,)).fetchone()
        fold = conn.execute("SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (pk,)).fetchone()[0]
        assert fold is not None and fold > 100
        stored = [row.raw for row in raw_store.read_range(conn, pk, 0, fold)]
    finally:
        conn.close()
    folded = CODECS[harness].decode(stored)
    touched = _paths_in_calls(folded)
    assert len(touched) >= 10
    # a compartment names a file by its last two parts (`history/files.py`), the key `mc replay`'s anchor
    # retention matches paths by: the full path is visible only while its message is still served raw
    visible = [p for p in touched if files.short(p) in served]
    assert len(visible) / len(touched) >= 0.9, sorted(touched - set(visible))
