"""Regenerate tests/golden/extractive_pi_large.md: `python tests/golden/make_extractive_golden.py`.

Loads pi_large-session.jsonl into a throw-away database, runs `mc wrapup --keep 20` with the extractive
provider, and writes the compartments as markdown. `tests/test_historian_extractive.py` checks the file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def render() -> str:
    """The golden text, computed in the current storage dir (the caller isolates it)."""
    from historian_helpers import NOW, PI_LARGE, golden_markdown, load_pi

    from magic_context.history import wrapup
    from magic_context.store.db import open_db

    conn = open_db()
    try:
        pk, _, _ = load_pi(conn)
        wrapup.wrapup(conn, pk, keep=20, provider="extractive", now_ms=NOW)
        return golden_markdown(conn, pk, PI_LARGE.name)
    finally:
        conn.close()


def main() -> int:
    sys.path[:0] = [str(TESTS), str(TESTS.parent)]
    from historian_helpers import GOLDEN_EXTRACTIVE

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MAGIC_CONTEXT_STORAGE_DIR"] = str(Path(tmp) / "data")
        os.environ["MAGIC_CONTEXT_CONFIG_DIR"] = str(Path(tmp) / "config")
        text = render()
    GOLDEN_EXTRACTIVE.write_text(text, encoding="utf-8")
    print(f"wrote {GOLDEN_EXTRACTIVE} ({len(text)} chars)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
