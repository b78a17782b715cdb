"""Why each question misses the top 5: where its answer is folded and what ranks above it.

    nice -n 19 python bench/search_misses.py [--set heldout|tuning] [--only pi_large] [--providers off,local]
        [--questions all|original|added]

For each question whose first correct hit is not in the top 5 (on the cached `bench/search_bench.py`
databases, with the current ranking) it prints: its rank in a 50-hit search; the ordinals whose indexed text
holds the first evidence string (none: the answer is in the live tail); the compartment holding them, its
rank in the compartment lane and the query's content words its summary matches; the summary line that covers
the evidence; the rank of the best message within ±3 of it in the cosine list (local only) and in the fused
message lane; and the top 5 with their titles. README "Search" reads its output into the misses table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.search_bench import CACHE, SETS, _config, _hit_text, _norm, evaluate, subset  # noqa: E402
from bench.search_flips import where  # noqa: E402

LINE = re.compile(r"^\s*\[(\d+)(?:-(\d+))?\]")


def _first(ranked: list[int], at: list[int], width: int = 3) -> int | None:
    return next((i for i, o in enumerate(ranked, 1) if any(abs(o - a) <= width for a in at)), None)


def explain(conn: Any, pk: int, item: dict[str, Any], provider: str, db: Path) -> dict[str, Any]:
    from magic_context.search import engine, lanes
    from magic_context.search import text as st

    evidence = [_norm(e) for e in item["evidence"]]
    wide = engine.search(conn, item["q"], session_pks=[pk], project_id=None, limit=50, config=_config(provider),
                         count_retrievals=False, refresh_git=False)
    rank50 = next((i for i, h in enumerate(wide.hits, 1) if all(e in _norm(_hit_text(conn, h, pk)) for e in evidence)),
                  None)
    found = where(db, item, provider)
    at = found["evidence_at"][0] if found["evidence_at"] else []
    lines = []
    for o in at[:2]:
        row = conn.execute("SELECT content FROM compartments WHERE session_pk = ? AND start_ordinal <= ? AND "
                           "end_ordinal >= ?", (pk, o, o)).fetchone()
        for line in (row[0] if row else "").splitlines():
            m = LINE.match(line)
            if m and int(m.group(1)) <= o <= int(m.group(2) or m.group(1)):
                lines.append(line.strip()[:240])
    cut = found["cutoff"]
    vector, message_vector, model = engine._embed_query(conn, _config(provider), item["q"], [], session_pks=[pk])
    q = lanes.Query(item["q"], st.probes(item["q"]), st.sanitize(item["q"]), st.any_words(item["q"]), vector, model,
                    message_vector)
    cosine = [o for o, _c in lanes._semantic_messages(conn, pk, q, cut, 200)] if message_vector is not None else []
    fused = [h.ordinal for h in lanes.messages(conn, pk, q, cut, 100) if h.source == "message"]
    return {"rank50": rank50, "at": at, "compartments": found["compartments"], "lines": lines,
            "cosine_rank": _first(cosine, at) if cosine else None, "message_rank": _first(fused, at),
            "top": [(h.source, h.ordinal_start, h.ordinal_end, (h.title or h.snippet or "")[:50])
                    for h in wide.hits[:5]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=sorted(SETS), default="heldout")
    parser.add_argument("--only", help="question files whose name contains this")
    parser.add_argument("--providers", default="off,local")
    parser.add_argument("--questions", choices=("all", "original", "added"), default="all")
    args = parser.parse_args(argv)
    os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(CACHE / "data"))
    os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(CACHE / "config"))
    from magic_context.store.db import open_db

    for path in sorted(SETS[args.set].glob("*.json")):
        if args.only and args.only not in path.name:
            continue
        spec = subset(json.loads(path.read_text()), args.questions)
        stem = Path(spec["session"]).stem
        db = CACHE / f"{stem}.db"
        for provider in args.providers.split(","):
            rows = evaluate(db, spec, provider)["rows"]
            conn = open_db(str(db))
            try:
                pk = conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]
                for item, row in zip(spec["questions"], rows, strict=True):
                    if row["rank"] is not None and row["rank"] <= 5:
                        continue
                    why = explain(conn, pk, item, provider, db)
                    print(f"{stem} {provider} [{item['kind']}] {item['q']!r}: rank {row['rank']} (in 50: "
                          f"{why['rank50']}); evidence at {why['at'] or 'the live tail'}")
                    for c in why["compartments"]:
                        print(f"    in [{c['range']}] lane rank {c['lane_rank']}, matches {c['matched']}: "
                              f"{c['title']!r}")
                    for line in why["lines"]:
                        print(f"    line: {line}")
                    print(f"    best message within ±3: cosine rank {why['cosine_rank']}, message lane rank "
                          f"{why['message_rank']}")
                    print(f"    top 5: {why['top']}")
            finally:
                conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
