"""Calibrate the semantic-only floor (`lanes.LOCAL_SEMANTIC_ONLY_FLOOR`) on the tuning sessions.

    TMPDIR=/tmp/x nice -n 19 python bench/search_floor.py [--queries N]

A static model puts every text somewhere, so a query a session never touched still has nearest neighbours. This
measures how near: on the cached `bench/search_bench.py` databases of the tuning set it searches (seeded) random
queries — pseudo-words, letter strings and 2–4 random whole words of the model's own vocabulary — plus each file's
off-topic list, keeping per session only the queries FTS finds nothing for, and prints the percentiles of each
query's best cosine per vector kind: message vectors (128 dims, int8), compartment vectors (256, float32) and, as
the bench projects hold two memories each, 100 and 300 of the session's short user/assistant messages embedded as
memories are (256, float32). Then, for a few candidate floors, the hits those queries get from the whole search
(mean, share with none) and the tuning questions' semantic-only hits in the top 10 (all, and those holding the
answer). The held-out set is never read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.search_bench import CACHE, SETS, _config, _hit_text, _norm, ensure_db  # noqa: E402

CONSONANTS, VOWELS, LETTERS = "bcdfghjklmnprstvwxz", "aeiou", "abcdefghijklmnopqrstuvwxyz"


def random_queries(n: int, vocab: list[str], seed: int = 7) -> list[tuple[str, str]]:
    """(kind, query): n pseudo-words, n letter strings and 1.5 n random vocabulary words."""
    rng = random.Random(seed)

    def pseudo() -> str:
        return " ".join("".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randint(2, 4)))
                        + rng.choice(CONSONANTS) for _ in range(rng.randint(1, 3)))

    def letters() -> str:
        size = rng.randint(1, 3)
        return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 6))) for _ in range(size))

    def words() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 4)))

    return ([("pseudo", pseudo()) for _ in range(n)] + [("letters", letters()) for _ in range(n)]
            + [("words", words()) for _ in range(n * 3 // 2)])


def _vocab() -> list[str]:
    from magic_context.search import embed

    embed._local_embed(["x"])  # loads the model
    tokens = embed._local_model.tokenizer.get_vocab()
    return sorted(w[1:] for w in tokens if w.startswith("▁") and w[1:].isascii() and w[1:].isalpha()
                  and w[1:].islower() and len(w) >= 6)


def _search(conn: Any, pk: int, project: str, q: str, provider: str) -> list[Any]:
    from magic_context.search import engine

    return engine.search(conn, q, session_pks=[pk], project_id=project, limit=10, config=_config(provider),
                         count_retrievals=False, refresh_git=False).hits


def best_cosines(n: int) -> dict[str, list[float]]:
    """kind → each FTS-less query's best cosine, over the tuning sessions."""
    import numpy as np

    from magic_context.search import embed, vectorfile
    from magic_context.store.db import open_db

    embedder = embed.from_config(_config("local"))
    assert embedder is not None
    rng = random.Random(3)
    pool = random_queries(n, _vocab())
    out: dict[str, list[float]] = {"message": [], "compartment": [], "memory x100": [], "memory x300": []}
    for path in sorted(SETS["tuning"].glob("*.json")):
        spec = json.loads(path.read_text())
        conn = open_db(str(ensure_db(spec, False)))  # built (cached) as bench/search_bench.py builds it
        pk, project = conn.execute("SELECT id, project_id FROM sessions ORDER BY id LIMIT 1").fetchone()
        cut = conn.execute("SELECT max(end_ordinal) FROM compartments WHERE session_pk = ?", (pk,)).fetchone()[0]
        queries = [q for _k, q in pool + [("offtopic", q) for q in spec.get("offtopic", [])]
                   if not _search(conn, pk, project, q, "off")]
        short = [t for (t,) in conn.execute("SELECT text FROM message_text WHERE session_pk = ? AND role IN "
                                            "('user', 'assistant') AND length(text) BETWEEN 40 AND 400", (pk,))]
        vectors = embedder.embed(queries)
        messages = vectorfile.load(conn, "msgblock", str(pk), embedder.model_id, embed.MESSAGE_DIMS)
        comps = vectorfile.load(conn, "compartment", str(pk), embedder.model_id, vectors.shape[1])
        folded = messages["ref"] <= cut
        memory_like = embedder.embed(short) @ vectors.T
        for i, (vector, view) in enumerate(zip(vectors, embedder.message_view(vectors), strict=True)):
            out["message"].append(float(vectorfile.cosines(messages, view)[folded].max()))
            out["compartment"].append(float(vectorfile.cosines(comps, vector).max()))
            for size in (100, 300):
                rows = rng.sample(range(len(short)), min(size, len(short)))
                out[f"memory x{size}"].append(float(np.max(memory_like[rows, i])))
        conn.close()
    return out


def sweep(n: int, floors: list[dict[str, float]]) -> list[str]:
    """Per candidate floor: the random queries' hits and the tuning questions' semantic-only hits."""
    from magic_context.search import lanes
    from magic_context.store.db import open_db

    pool = random_queries(n, _vocab())
    lines = []
    shipped = lanes.LOCAL_SEMANTIC_ONLY_FLOOR
    try:
        for floor in floors:
            lanes.LOCAL_SEMANTIC_ONLY_FLOOR = floor
            counts: list[int] = []
            semantic = correct = 0
            for path in sorted(SETS["tuning"].glob("*.json")):
                spec = json.loads(path.read_text())
                conn = open_db(str(ensure_db(spec, False)))
                pk, project = conn.execute("SELECT id, project_id FROM sessions ORDER BY id LIMIT 1").fetchone()
                for _kind, q in pool + [("offtopic", q) for q in spec.get("offtopic", [])]:
                    if not _search(conn, pk, project, q, "off"):
                        counts.append(len(_search(conn, pk, project, q, "local")))
                for item in spec["questions"]:
                    for hit in _search(conn, pk, project, item["q"], "local"):
                        if hit.match == "semantic":
                            semantic += 1
                            text = _norm(_hit_text(conn, hit, pk))
                            correct += all(_norm(e) in text for e in item["evidence"])
                conn.close()
            mean = sum(counts) / len(counts)
            zero = sum(1 for c in counts if c == 0) / len(counts)
            lines.append(f"| {floor['msgblock']:g} / {floor['compartment']:g} / {floor['memory']:g} | {len(counts)} | "
                         f"{mean:.2f} | {zero:.2f} | {semantic} | {correct} |")
    finally:
        lanes.LOCAL_SEMANTIC_ONLY_FLOOR = shipped
    return lines


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=80, help="pseudo-words and letter strings each (×1.5 words)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(CACHE / "data"))
    os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(CACHE / "config"))
    best = best_cosines(args.queries)
    print("| vectors | queries | p50 | p95 | p97.5 | p99 | p99.5 | max |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, values in best.items():
        p = np.percentile(values, [50, 95, 97.5, 99, 99.5])
        print(f"| {kind} | {len(values)} | " + " | ".join(f"{x:.3f}" for x in p) + f" | {max(values):.3f} |")
    print()
    print("| floor message / compartment / memory | queries | mean hits | share with none | "
          "tuning semantic-only hits in top 10 | of them holding the answer |")
    print("|---|---|---|---|---|---|")
    candidates = [{"msgblock": m, "compartment": c, "memory": r} for m, c, r in  # the first: before the floor
                  ((0.2, 0.2, 0.2), (0.3, 0.2, 0.3), (0.35, 0.2, 0.3), (0.4, 0.2, 0.3), (0.4, 0.25, 0.3),
                   (0.45, 0.2, 0.3))]
    print("\n".join(sweep(args.queries, candidates)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
