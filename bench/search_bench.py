"""Search benchmark (issue #12 item 7): recall@1/@5 and MRR on real sessions, and latency at scale.

    nice -n 10 python bench/search_bench.py                # build (cached), questions, latency; prints Markdown
    nice -n 10 python bench/search_bench.py --no-latency   # questions only
    nice -n 10 python bench/search_bench.py --rebuild      # replay the sessions again
    nice -n 10 python bench/search_bench.py --set heldout --no-latency   # the held-out questions

Index: each long recorded session is replayed through the real transform at a window smaller than the
session with the historian inline (`bench/search_build.py`), so history is folded and indexed exactly as
it would be live; the database is cached under `$TMPDIR/mc-search-bench/`, stamped with a fingerprint of the code
that built it (every `magic_context` module but the ranking's): a cache built by other code is reused with a
warning, since a historian or defaults change moves the figures.

Questions: `bench/search/<session>.json`, written by hand for each session — exact lookups (a path, an
error, a hash), paraphrases that share no identifier with the answer, decisions and "what happened
first". The ranking constants were tuned on the two Pi sets there, so `bench/search/heldout/` holds a
second, held-out set per session (mostly paraphrases, written before any later lever was tried): a
change is judged on it, never tuned on it. A hit is correct when the text `mc expand --range` shows for
its range (or a memory's content) contains every evidence string (case-insensitive, whitespace
collapsed). Each question runs with embeddings off and with the local provider. Questions a later session
added to a held-out file carry `"added": "<date>"`; `--questions original|added` runs one group alone, so
figures stay comparable with earlier rounds.

Off-topic queries: each file's `offtopic` list (random letters, pseudo-words, topics the session never
touched; at least 12 per session, each one FTS finds nothing for in it) is searched at `mc search`'s default
limit, and the table after the recall table gives the mean number of hits and the share of queries with none:
every hit there is noise. `--no-semantic-floor` runs everything with the ranking before the semantic-only floor
(`lanes.LOCAL_SEMANTIC_ONLY_FLOOR`), for a before/after comparison.

Latency: a synthetic session scaled from the real messages to 10k and 100k indexed messages; each size
is timed in a fresh process (the first query, with model load, included) over the question set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
QUESTIONS = REPO / "bench" / "search"
SETS = {"tuning": QUESTIONS, "heldout": QUESTIONS / "heldout"}
CACHE = Path(tempfile.gettempdir()) / "mc-search-bench"


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _config(provider: str) -> Any:
    from magic_context.config.model import MCConfig

    return MCConfig.model_validate({"embedding": {"provider": provider}})


def _hit_text(conn: Any, hit: Any, pk: int) -> str:
    from magic_context.tools.expand import expand_range

    if hit.source in ("message", "compartment"):
        return expand_range(conn, pk, hit.ordinal_start, hit.ordinal_end).text  # the real 15 000-token budget
    return hit.snippet


def evaluate(db_path: Path, spec: dict[str, Any], provider: str) -> dict[str, Any]:
    """Run every question; per question the rank (1-based) of the first correct hit, or None."""
    from magic_context.search import engine
    from magic_context.store.db import open_db

    conn = open_db(str(db_path))
    try:
        pk, project = conn.execute("SELECT id, project_id FROM sessions ORDER BY id LIMIT 1").fetchone()
        config = _config(provider)
        folded = [_norm(t) for (t,) in conn.execute("SELECT text FROM message_text WHERE session_pk = ?", (pk,))]
        rows = []
        for item in spec["questions"]:
            started = time.perf_counter()
            result = engine.search(conn, item["q"], session_pks=[pk], project_id=project, limit=5, config=config,
                                   count_retrievals=False, refresh_git=False)
            ms = (time.perf_counter() - started) * 1000
            evidence = [_norm(e) for e in item["evidence"]]
            rank = None
            for i, hit in enumerate(result.hits, 1):
                text = _norm(_hit_text(conn, hit, pk))
                if all(e in text for e in evidence):
                    rank = i
                    break
            rows.append({"q": item["q"], "kind": item["kind"], "rank": rank, "ms": ms,
                         # False when some evidence is in no folded message: the answer is in the live tail (in
                         # context, never a search hit), so no ranking can find it — the fold points decide
                         "folded": all(any(e in t for t in folded) for e in evidence),
                         "top": [(h.source, h.ordinal_start, h.ordinal_end, h.match) for h in result.hits[:3]],
                         "roles": [h.role or h.source for h in result.hits[:5]]})
        return {"rows": rows, "warnings": result.warnings if spec["questions"] else []}
    finally:
        conn.close()


def offtopic(db_path: Path, spec: dict[str, Any], provider: str, limit: int = 10) -> dict[str, Any]:
    """Search each of the spec's off-topic queries (`offtopic`: random words, topics the session never touched,
    misspellings of nothing) at `mc search`'s default limit: how many hits come back (mean), the share of queries
    with none, and the queries FTS alone answers (then they are not off-topic for this session: fix the list)."""
    from magic_context.search import engine
    from magic_context.store.db import open_db

    queries = spec.get("offtopic", [])
    conn = open_db(str(db_path))
    try:
        pk, project = conn.execute("SELECT id, project_id FROM sessions ORDER BY id LIMIT 1").fetchone()
        config, counts, lexical = _config(provider), [], []
        for q in queries:
            hits = engine.search(conn, q, session_pks=[pk], project_id=project, limit=limit, config=config,
                                 count_retrievals=False, refresh_git=False).hits
            counts.append(len(hits))
            if any(h.match != "semantic" for h in hits):
                lexical.append(q)
    finally:
        conn.close()
    n = len(counts)
    return {"n": n, "mean": sum(counts) / n if n else 0.0, "zero": sum(1 for c in counts if c == 0) / n if n else 0.0,
            "lexical": lexical}


def subset(spec: dict[str, Any], which: str) -> dict[str, Any]:
    """The spec with only the `original` questions (no `added` mark), only the `added` ones, or `all`."""
    if which == "all":
        return spec
    return {**spec, "questions": [q for q in spec["questions"] if ("added" in q) == (which == "added")]}


def summarize(rows: list[dict[str, Any]], kinds: tuple[str, ...] | None = None) -> dict[str, float]:
    chosen = [r for r in rows if kinds is None or r["kind"] in kinds]
    if not chosen:
        return {"n": 0, "r1": 0.0, "r5": 0.0, "mrr": 0.0}
    n = len(chosen)
    return {"n": n, "r1": sum(1 for r in chosen if r["rank"] == 1) / n,
            "r5": sum(1 for r in chosen if r["rank"] is not None and r["rank"] <= 5) / n,
            "mrr": sum(1 / r["rank"] for r in chosen if r["rank"]) / n}


def _r5(summary: dict[str, float]) -> str:
    return f"{summary['r5']:.2f}" if summary["n"] else "–"  # a set without questions of that kind


# Modules that read the index but take no part in building it: a change to them needs no rebuild.
RANKING_ONLY: Final = ("search/lanes.py", "search/engine.py", "search/format.py")


def build_stamp(window: int) -> str:
    """A fingerprint of what builds a cached index: every `magic_context` source but the ranking-only modules,
    the replay builder (`bench/search_build.py`) and the replay window. A historian, default or replay change
    gives other compartments, so other figures."""
    import hashlib

    digest = hashlib.sha256(str(window).encode())
    digest.update((REPO / "bench" / "search_build.py").read_bytes())
    root = REPO / "magic_context"
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel not in RANKING_ONLY:
            digest.update(rel.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def ensure_db(spec: dict[str, Any], rebuild: bool) -> Path:
    """The cached index of the spec's session, built when missing or asked; a cache built by other code is reused
    (a rebuild costs minutes) with a warning, since its figures are not today's."""
    from bench.search_build import build

    path = CACHE / (Path(spec["session"]).stem + ".db")
    stamp_file = path.with_name(path.name + ".stamp")
    stamp = build_stamp(spec["window"])
    if rebuild or not path.exists():
        print(f"building {path.name} (replay at window {spec['window']})…", file=sys.stderr)
        print(build(spec["session"], spec["window"], path), file=sys.stderr)
        stamp_file.write_text(stamp)
    elif not stamp_file.exists() or stamp_file.read_text().strip() != stamp:
        print(f"warning: {path} was built by other code than this checkout's (historian, indexer or defaults); "
              "its figures are not today's: run with --rebuild", file=sys.stderr)
    return path


# --- latency at scale ------------------------------------------------------------------------------------

def scaled_db(source: Path, target_messages: int) -> Path:
    """A copy of `source` whose one session holds `target_messages` indexed messages (the real rows repeated,
    ordinals shifted), folded through its end; vectors are repeated the same way."""
    import sqlite3

    path = CACHE / f"scaled-{target_messages}.db"
    if path.exists():
        return path
    src = sqlite3.connect(source)
    dst = sqlite3.connect(path)
    src.backup(dst)
    src.close()
    pk = dst.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]
    rows = dst.execute("SELECT ordinal, role, content_hash, at_ms, text FROM message_text WHERE session_pk = ? "
                       "ORDER BY ordinal", (pk,)).fetchall()
    chunks = dst.execute("SELECT kind, ref, model_id, scope, start_ordinal, end_ordinal, text_hash, dims, vector, "
                         "created_at FROM embeddings WHERE scope = ? AND kind = 'compartment'",
                         (str(pk),)).fetchall()
    span = rows[-1][0] + 1
    copies = max(1, target_messages // len(rows))
    with dst:
        for c in range(1, copies):
            shift = c * span
            dst.executemany("INSERT INTO message_text (session_pk, ordinal, role, content_hash, at_ms, text) "
                            "VALUES (?, ?, ?, ?, ?, ?)", [(pk, o + shift, r, h, t, x) for o, r, h, t, x in rows])
            dst.executemany("INSERT INTO embeddings (kind, ref, model_id, scope, start_ordinal, end_ordinal, "
                            "text_hash, dims, vector, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [(k, str(10_000_000 * c + int(ref)), m, s, a + shift, b + shift, th, d, v, ca)
                             for k, ref, m, s, a, b, th, d, v, ca in chunks if a is not None])
    # message vectors: the real ones, re-blocked at the shifted ordinals (as `embed_messages` would store them)
    from magic_context.search.indexer import BLOCK, pack_block, unpack_block

    ords, vecs = [], []
    for dims, blob in dst.execute("SELECT dims, vector FROM embeddings WHERE kind = 'msgblock' AND scope = ?",
                                  (str(pk),)).fetchall():
        o, scale, v = unpack_block(blob, dims)
        ords += [int(x) for x in o]
        vecs += list(v.astype("float32") * scale[:, None])
    model = dst.execute("SELECT model_id FROM embeddings WHERE kind = 'msgblock' LIMIT 1").fetchone()
    if model and vecs:
        import numpy as np

        by_block: dict[int, tuple[list[int], list[Any]]] = {}
        for c in range(copies):
            for o, v in zip(ords, vecs, strict=True):
                entry = by_block.setdefault((o + c * span) // BLOCK, ([], []))
                entry[0].append(o + c * span)
                entry[1].append(v)
        with dst:
            dst.execute("DELETE FROM embeddings WHERE kind = 'msgblock' AND scope = ?", (str(pk),))
            for number, (os_, vs) in by_block.items():
                dst.execute("INSERT INTO embeddings (kind, ref, model_id, scope, start_ordinal, end_ordinal, "
                            "text_hash, dims, vector, created_at) "
                            "VALUES ('msgblock', ?, ?, ?, ?, ?, 'scaled', ?, ?, 0)",
                            (str(number), model[0], str(pk), os_[0], os_[-1], len(vs[0]),
                             pack_block(os_, np.asarray(vs))))
    # a search embeds lazily only when the vectors end before the last indexed message: they do not here
        dst.execute("INSERT INTO compartments (session_pk, sequence, start_ordinal, end_ordinal, title, created_at) "
                    "VALUES (?, 100000, ?, ?, 'scaled', 0)", (pk, span * copies - 1, span * copies - 1))
        marker = dst.execute("SELECT max(id), count(*) FROM raw_messages WHERE session_pk = ? AND superseded_at IS "
                             "NULL", (pk,)).fetchone()
        dst.execute("INSERT OR REPLACE INTO search_state (key, value, updated_at) VALUES (?, ?, 0)",
                    (f"indexed:{pk}", f"{marker[0]}:{marker[1]}:{span * copies - 1}"))
        dst.execute("INSERT OR REPLACE INTO search_state (key, value, updated_at) VALUES (?, ?, 0)",
                    (f"count:{pk}", str(len(rows) * copies)))
    dst.commit()
    dst.execute("VACUUM")
    dst.close()
    return path


LATENCY_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from bench.search_bench import _config
from magic_context.search import engine
from magic_context.store.db import open_db
conn = open_db(sys.argv[2])
pk, project = conn.execute("SELECT id, project_id FROM sessions ORDER BY id LIMIT 1").fetchone()
config = _config(sys.argv[3])
times = []
for i, q in enumerate(json.loads(sys.argv[4])):
    s = time.perf_counter()
    engine.search(conn, q, session_pks=[pk], project_id=project, limit=10, config=config, count_retrievals=False,
                  refresh_git=False)
    times.append((time.perf_counter() - (t0 if i == 0 else s)) * 1000)
print(json.dumps({"times": times, "count": conn.execute("SELECT count(*) FROM message_text").fetchone()[0]}))
"""


def sync_sidecars(db_path: Path) -> None:
    """Write the memory-mapped vector files as the background publish's embedding step would
    (`indexer.embed_session` → `vectorfile.sync`): the scaled databases get their vectors by SQL, not by it."""
    from magic_context.search import vectorfile
    from magic_context.store.db import open_db

    conn = open_db(str(db_path))
    try:
        for kind, scope, model in conn.execute("SELECT DISTINCT kind, scope, model_id FROM embeddings "
                                               "WHERE kind IN ('msgblock', 'compartment')").fetchall():
            vectorfile.sync(conn, kind, scope, model)
    finally:
        conn.close()


def latency(db_path: Path, queries: list[str], provider: str) -> dict[str, Any]:
    """Per-query ms in a fresh process; the first includes imports, opening the database and loading the model."""
    argv = [sys.executable, "-c", LATENCY_CHILD, str(REPO), str(db_path), provider, json.dumps(queries)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    times = sorted(data["times"])
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return {"messages": data["count"], "first": data["times"][0], "p50": statistics.median(times), "p95": p95,
            "n": len(times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--latency-only", action="store_true", help="skip the recall tables")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--only", help="run only the question file whose name contains this")
    parser.add_argument("--verbose", action="store_true", help="print each miss")
    parser.add_argument("--set", choices=sorted(SETS), default="tuning",
                        help="question set: tuning (bench/search) or heldout (bench/search/heldout)")
    parser.add_argument("--providers", default="off,local", help="comma-separated embedding providers to run")
    parser.add_argument("--questions", choices=("all", "original", "added"), default="all",
                        help="the questions of each file to run: all, the original ones, or those a later session "
                             "added (marked `added`; reported apart so figures stay comparable across rounds)")
    parser.add_argument("--no-semantic-floor", action="store_true",
                        help="score as before the semantic-only floor (every kind at lanes.MIN_MESSAGE_COSINE)")
    args = parser.parse_args(argv)
    if args.no_semantic_floor:
        from magic_context.search import lanes

        lanes.LOCAL_SEMANTIC_ONLY_FLOOR = dict.fromkeys(lanes.LOCAL_SEMANTIC_ONLY_FLOOR, lanes.MIN_MESSAGE_COSINE)
    os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(CACHE / "data"))
    os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(CACHE / "config"))
    CACHE.mkdir(parents=True, exist_ok=True)
    specs = [subset(json.loads(p.read_text()), args.questions) for p in sorted(SETS[args.set].glob("*.json"))
             if not args.only or args.only in p.name]
    specs = [s for s in specs if s["questions"]]  # `--questions added`: a file no session added to
    print("| session | embeddings | questions | recall@1 | recall@5 | MRR | exact r@5 | paraphrase r@5 | "
          "decision+first r@5 |")
    print("|---|---|---|---|---|---|---|---|---|")
    all_queries: list[str] = []
    first_db = None
    noise: list[str] = []
    for spec in specs:
        db_path = ensure_db(spec, args.rebuild)
        first_db = first_db or db_path
        all_queries += [q["q"] for q in spec["questions"]]
        for provider in () if args.latency_only else args.providers.split(","):
            rows = evaluate(db_path, spec, provider)["rows"]
            s, ex = summarize(rows), summarize(rows, ("exact",))
            pa, de = summarize(rows, ("paraphrase",)), summarize(rows, ("decision", "first"))
            print(f"| {Path(spec['session']).stem} | {provider} | {s['n']} | {s['r1']:.2f} | {s['r5']:.2f} | "
                  f"{s['mrr']:.2f} | {_r5(ex)} | {_r5(pa)} | {_r5(de)} |")
            tail = [r["q"] for r in rows if not r["folded"]]
            if tail:
                print(f"note: {len(tail)} question(s) of {Path(spec['session']).stem} have their answer in the live "
                      f"tail (not folded: no search can find it; counted as misses): {tail}", file=sys.stderr)
            if spec.get("offtopic"):
                o = offtopic(db_path, spec, provider)
                noise.append(f"| {Path(spec['session']).stem} | {provider} | {o['n']} | {o['mean']:.2f} | "
                             f"{o['zero']:.2f} |")
                if o["lexical"]:
                    print(f"note: FTS finds some of {Path(spec['session']).stem}'s off-topic queries (not off-topic "
                          f"for it): {o['lexical']}", file=sys.stderr)
            if args.verbose:
                for r in rows:
                    if r["rank"] != 1:
                        print(f"    rank={r['rank']} [{r['kind']}] {r['q']!r} top={r['top']}", file=sys.stderr)
    if noise:
        print()
        print("Off-topic queries (the session never mentions them; `offtopic` in each file), default limit 10:")
        print()
        print("| session | embeddings | queries | mean hits | share with no hit |")
        print("|---|---|---|---|---|")
        print("\n".join(noise))
    if not args.no_latency and first_db is not None:
        print()
        print("| indexed messages | embeddings | queries | first query ms | p50 ms | p95 ms |")
        print("|---|---|---|---|---|---|")
        for size in (10_000, 100_000):
            scaled = scaled_db(first_db, size)
            sync_sidecars(scaled)
            for provider in ("off", "local"):
                lat = latency(scaled, all_queries, provider)
                print(f"| {lat['messages']:,} | {provider} | {lat['n']} | {lat['first']:.0f} | {lat['p50']:.1f} | "
                      f"{lat['p95']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
