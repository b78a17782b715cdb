"""Retrieval counters through the real CLI (knowledge-layer.md §3.4): a search that returns a memory counts it;
an id lookup (`mc search "#3"`) does not — the original's ctx_search answers an id query before its unified
search (the one that bumps `retrieval_count`) runs. Kept on purpose and documented in the README."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_mc


def _data(*args: str) -> dict:
    proc = run_mc(*args, "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)["data"]


def _counters(mid: int) -> tuple[int, int | None]:
    row = _data("memory", "show", str(mid))["memory"]
    return row["retrieval_count"], row["last_retrieved_at"]


def test_a_text_search_counts_the_memories_it_returns_an_id_lookup_does_not(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    mid = _data("memory", "add", "The zebra parser needs the stripes flag", "--category", "architecture",
                "--project", str(proj))["memory"]["id"]
    assert _counters(mid) == (0, None)

    for query in (f"#{mid}", str(mid), f"#{mid}, 999999"):
        hits = _data("search", query, "--project", str(proj))["results"]
        assert [(h["source"], h["id"]) for h in hits] == [("memory", mid)]  # the shortcut answered
    assert _counters(mid) == (0, None)

    hits = _data("search", "zebra stripes", "--project", str(proj))["results"]
    assert ("memory", mid) in [(h["source"], h["id"]) for h in hits]
    count, last = _counters(mid)
    assert count == 1 and last is not None
