"""Which questions a rebuild of the search databases flipped, and where their answers went.

    nice -n 10 python bench/search_flips.py OLD_CACHE [NEW_CACHE] [--set tuning|heldout|both]

Runs every question (embeddings off and local) on two caches of `bench/search_bench.py` databases with the
current ranking (so only the databases differ) and prints each question that is in the top 5 on one and not on
the other, with, on each side: the ordinals holding its evidence (none: the answer is in the live tail), the
compartment(s) holding them with their range and title, that compartment's rank in the compartment lane, the
query's content words its summary matches, and the top hits. A historian or transform change that moves fold
points or rewords summaries shows up here question by question (README, "Search": why the rebuilt databases
score lower).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.search_bench import CACHE, SETS, _config, _norm, evaluate  # noqa: E402


def where(db: Path, item: dict[str, Any], provider: str) -> dict[str, Any]:
    """Where the question's evidence sits in `db`, and how the compartment holding it ranks and matches."""
    from magic_context.search import engine, lanes
    from magic_context.search import text as st
    from magic_context.store.db import open_db

    conn = open_db(str(db))
    try:
        pk = conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]
        cut = engine._cutoff(conn, pk)
        texts = conn.execute("SELECT ordinal, text FROM message_text WHERE session_pk = ?", (pk,)).fetchall()
        holding = [[o for o, t in texts if _norm(e) in _norm(t)] for e in item["evidence"]]
        vector, message_vector, model = engine._embed_query(conn, _config(provider), item["q"], [], session_pks=[pk])
        q = lanes.Query(item["q"], st.probes(item["q"]), st.sanitize(item["q"]), st.any_words(item["q"]), vector,
                        model, message_vector)
        lane = [h.id for h in lanes.compartments(conn, pk, q, cut, 15)]
        comps = []
        for cid, a, b, title in conn.execute("SELECT id, start_ordinal, end_ordinal, title FROM compartments "
                                             "WHERE session_pk = ? ORDER BY start_ordinal", (pk,)).fetchall():
            if not any(a <= o <= b for found in holding for o in found):
                continue
            matched = []
            for word in st.content_words(item["q"]):
                try:
                    if conn.execute("SELECT 1 FROM compartment_fts WHERE compartment_fts MATCH ? AND rowid = ?",
                                    (st.phrase(word), cid)).fetchone():
                        matched.append(word)
                except sqlite3.Error:
                    pass
            comps.append({"range": f"{a}-{b}", "title": title[:70], "lane_rank": lane.index(cid) + 1
                          if cid in lane else None, "matched": matched})
        return {"cutoff": cut, "evidence_at": holding, "compartments": comps,
                "count": conn.execute("SELECT count(*) FROM compartments WHERE session_pk = ?", (pk,)).fetchone()[0]}
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="a cache directory of bench/search_bench.py databases")
    parser.add_argument("new", type=Path, nargs="?", default=CACHE, help=f"another one (default {CACHE})")
    parser.add_argument("--set", choices=[*SETS, "both"], default="both")
    args = parser.parse_args(argv)
    os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(CACHE / "data"))
    os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(CACHE / "config"))
    flips = 0
    for name, folder in SETS.items():
        if args.set not in (name, "both"):
            continue
        for path in sorted(folder.glob("*.json")):
            spec = json.loads(path.read_text())
            stem = Path(spec["session"]).stem
            dbs = {side: d / f"{stem}.db" for side, d in (("old", args.old), ("new", args.new))}
            for provider in ("off", "local"):
                ranks = {side: evaluate(db, spec, provider)["rows"] for side, db in dbs.items()}
                for item, old, new in zip(spec["questions"], ranks["old"], ranks["new"], strict=True):
                    if ((old["rank"] or 99) <= 5) == ((new["rank"] or 99) <= 5):
                        continue
                    flips += 1
                    print(f"{name} {stem} {provider} [{item['kind']}] rank {old['rank']} -> {new['rank']}: "
                          f"{item['q']!r}")
                    for side, db in dbs.items():
                        found = where(db, item, provider)
                        print(f"  {side}: {found['count']} compartments, folded through {found['cutoff']}, evidence at "
                              f"{found['evidence_at']}" + ("" if all(found["evidence_at"]) else " (live tail)"))
                        for c in found["compartments"]:
                            print(f"    in [{c['range']}] lane rank {c['lane_rank']}, matches {c['matched']}: "
                                  f"{c['title']!r}")
                    for side, row in (("old", old), ("new", new)):
                        print(f"  {side} top 3: {[f'{src[0]}:{a}-{b}' for src, a, b, _m in row['top']]}")
    print(f"{flips} flips", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
