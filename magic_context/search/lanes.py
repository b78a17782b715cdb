"""Per-source scoring (§3.3): each lane returns its hits best first, scored on its own 0–1 scale.

FTS ranks (BM25 order) become scores — the BM25 values themselves are never compared across lanes.
Beyond the original, a lane whose AND query finds fewer hits than wanted also runs the query's content
words ORed, at lower weight: a paraphrase rarely shares every word with its answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final

from magic_context.records import Factory, record, replace
from magic_context.search import text as st
from magic_context.store import search_index as idx

SEMANTIC_WEIGHT: Final = 0.7
FTS_WEIGHT: Final = 0.3
SINGLE_SOURCE_PENALTY: Final = 0.8
RRF_K: Final = 60
LOOSE_WEIGHT: Final = 0.5  # the ORed content-word query, against 1.0 for the full AND query
SEMANTIC_CANDIDATES: Final = 50


@record
class Hit:
    """One search result. `source` is memory, message, compartment, git_commit or note."""

    source: str
    id: int | str
    score: float
    match: str
    snippet: str
    session_pk: int | None = None
    ordinal_start: int | None = None
    ordinal_end: int | None = None
    ordinal: int | None = None
    role: str | None = None
    title: str | None = None
    category: str | None = None
    sha: str | None = None
    status: str | None = None
    at_ms: int | None = None
    extra: dict[str, Any] = Factory(factory=dict)


@record
class Query:
    text: str
    probes: list[str]
    strict: str  # every token, ANDed
    loose: str  # content words, ORed ("" when none)
    vector: Any = None  # unit query vector or None
    model_id: str | None = None
    message_vector: Any = None  # the query vector as message vectors are stored (see Embedder.message_view)
    since_ms: int | None = None
    until_ms: int | None = None
    min_similarity: float | None = None  # `embedding.min_similarity`: the semantic-only floor of every lane when set

    def in_dates(self, at_ms: int | None) -> bool:
        if at_ms is None:
            return self.since_ms is None and self.until_ms is None
        return (self.since_ms is None or at_ms >= self.since_ms) and (self.until_ms is None or at_ms < self.until_ms)


def decay(n: int) -> list[float]:
    """Linear decay by rank: 1 − rank/n."""
    return [1 - r / n for r in range(n)]


def _fts_lists(q: Query, fetch: Callable[..., list[Any]], limit: int, *, loose_kw: bool = False,
               ) -> list[tuple[float, list[Any]]]:
    """(weight, rows) per FTS expression: the full query, then the loose one when the full one falls short.
    With `loose_kw`, `fetch` is told which one it runs (`loose=True|False`)."""
    lists: list[tuple[float, list[Any]]] = []
    extra: dict[str, bool] = {"loose": False} if loose_kw else {}
    if q.strict:
        lists.append((1.0, fetch(q.strict, limit, **extra)))
    if q.loose and q.loose != q.strict and (not lists or len(lists[0][1]) < limit):
        lists.append((LOOSE_WEIGHT, fetch(q.loose, limit, **({"loose": True} if loose_kw else {}))))
    return lists


def _rrf(lists: Sequence[tuple[float, list[Any]]], key: Callable[[Any], Any]) -> dict[Any, float]:
    fused: dict[Any, float] = {}
    for weight, rows in lists:
        for rank, row in enumerate(rows):
            fused[key(row)] = fused.get(key(row), 0.0) + weight / (RRF_K + rank)
    return fused


def messages(conn: sqlite3.Connection, session_pk: int, q: Query, cutoff: int, limit: int, *,
             compartment_hits: Sequence[Hit] = ()) -> list[Hit]:
    """Folded messages (ordinal ≤ cutoff): full query + loose query + literal probes + message vectors, and the
    compartment lane's hits, RRF-fused (k=60), then linear decay (§3.3). A message hit's range is its ordinal ± 3;
    a compartment hit keeps its compartment's range.

    The original fuses 512-token compartment-chunk vectors with message hits; with a static model one vector
    per message finds paraphrases better (bench/search_bench.py), so the cosine ranking of messages is one
    more RRF list here, and the compartment summaries (which quote the user's words) another. A compartment
    also gains half the fused score of the best message inside its range (among the top `AGREEMENT_TOP`):
    when the summary and the messages it covers agree, that range is the likelier answer.
    """
    from magic_context.search.indexer import indexed_count

    if cutoff < 0:
        return []
    fetch_n = 3 * limit

    def fetch(expr: str, n: int, loose: bool = False) -> list[Any]:
        # the loose (ORed) query matches prose only: tool outputs are long word bags that match any paraphrase
        return idx.match_messages(conn, session_pk, expr, cutoff, n, prose_only=LOOSE_PROSE_ONLY and loose)

    total = max(1, indexed_count(conn, session_pk)) if q.probes or q.loose else 1
    lists = _fts_lists(replace(q, loose=_selective(conn, q, total)), fetch, fetch_n, loose_kw=True)
    rows: dict[int, Any] = {r["ordinal"]: r for _w, rs in lists for r in rs}
    best_probe = 0.0
    if q.probes:
        for probe in q.probes:
            found = fetch(st.phrase(probe), max(fetch_n, 200))
            weight = 1 / (1 + 100 * len(found) / total)
            best_probe = max(best_probe, weight)
            lists.append((weight, found[:fetch_n]))
            rows.update({r["ordinal"]: r for r in found[:fetch_n]})
    lexical = set(rows)
    semantic: dict[int, float] = {}
    if q.message_vector is not None and q.model_id:
        ranked = _semantic_messages(conn, session_pk, q, cutoff, fetch_n)
        missing = [o for o, _c in ranked if o not in rows]
        if missing:
            for row in idx.message_rows_at(conn, session_pk, missing):
                rows[row["ordinal"]] = row
        lists.append((SEMANTIC_RRF_WEIGHT, [rows[o] for o, _c in ranked if o in rows]))
        semantic = dict(ranked)
    fused = _rrf(lists, lambda r: r["ordinal"])
    for ordinal, row in rows.items():
        low = row["text"].lower()
        if q.probes and any(p.lower() in low for p in q.probes):
            fused[ordinal] += best_probe / RRF_K
    items: dict[Any, float] = {("m", o): v for o, v in fused.items() if q.in_dates(rows[o]["at_ms"])}
    by_id = {h.id: h for h in compartment_hits}
    best = sorted((k[1] for k in items), key=lambda o: -items[("m", o)])[:AGREEMENT_TOP]
    for rank, hit in enumerate(compartment_hits):
        a = hit.extra.get("compartment_start", hit.ordinal_start or 0)  # the messages it summarizes, not the
        b = hit.extra.get("compartment_end", hit.ordinal_end or -1)  # turn its range reaches back to (TURN_REACH)
        inside = [items[("m", o)] for o in best if a <= o <= b]
        items[("c", hit.id)] = COMPARTMENT_RRF_WEIGHT / (RRF_K + rank) + AGREEMENT_WEIGHT * max(inside, default=0.0)
    order = sorted(items, key=lambda k: (-items[k], k[1] if k[0] == "m" else by_id[k[1]].ordinal_start))[:fetch_n]
    floor = semantic_only_floor(q.model_id, "msgblock", q.min_similarity)
    out: list[Hit] = []
    for key, score in zip(order, decay(len(order)), strict=True):
        if key[0] == "c":
            hit = by_id[key[1]]
            hit.score = score
            out.append(hit)
            continue
        o = key[1]
        if o not in lexical and semantic.get(o, 1.0) < floor:
            continue  # found by its vector alone, and no nearer than noise: dropped after ranking (scores kept)
        out.append(Hit("message", f"{session_pk}:{o}", score, _match(o in lexical, o in semantic), rows[o]["text"],
                       session_pk, max(0, o - 3), min(cutoff, o + 3), o, rows[o]["role"], at_ms=rows[o]["at_ms"],
                       extra=_cosine(semantic.get(o))))
    return out


SEMANTIC_RRF_WEIGHT: Final = 0.5  # tuned on bench/search (1.0 let a static model's noise outrank FTS)
COMPARTMENT_RRF_WEIGHT: Final = 1.0
# A compartment's share of its best message's fused score. Chosen on the tuning questions (MRR 0.78 → 0.81 with
# local embeddings; 1.0 and 2.0 scored lower) and judged on bench/search/heldout: paraphrase recall@5 0.74 → 0.75,
# MRR 0.49 → 0.55 (local), 0.42 → 0.43 (FTS only), exact lookups unchanged.
AGREEMENT_WEIGHT: Final = 0.5
AGREEMENT_TOP: Final = 30  # best fused messages a compartment may draw on
LOOSE_PROSE_ONLY: Final = True
# Messages a shown compartment hit's range may reach back to the user message of a turn a fold split (`reach_back`,
# after ranking: the agreement above counts only the compartment's own messages). Measured on the cached bench
# databases (bench/search_levers.py "now: compartment hit"): every tuning rank unchanged (16 the same); held-out
# paraphrase recall@5 0.58 -> 0.60 FTS-only, 0.67 -> 0.68 local (pi_before's request at 25, its answer folded apart).
TURN_REACH: Final = 8
MIN_MESSAGE_COSINE: Final = 0.2  # below this a static model's cosine is noise (bench/search_bench.py)
# The least cosine a hit found by its vector alone (match = semantic: no FTS or literal-probe support) needs to be
# shown, per vector kind, for the local model (wordllama: message vectors are its first 128 dims as int8, compartments
# and memories all 256 as float32). A static model puts every text somewhere: with only the candidates' 0.2, a query
# the session never touched ("xqzv blorfindel") filled the page with its nearest messages (the off-topic queries of
# bench/search_bench.py: 1.7 / 4.1 / 4.5 hits on average on the three tuning sessions). Calibrated on the tuning
# sessions by bench/search_floor.py (689 queries FTS finds nothing for: random vocabulary words, letter strings,
# pseudo-words, the off-topic lists): messages at 0.4, the 99th percentile of such a query's best message cosine
# (0.395); compartments keep 0.2 (the 97.5th; 0.25 dropped 2 of the 14 answer-holding semantic-only hits of the
# tuning questions' top 10); memories at 0.3, the 99th percentile among 100–300 of the sessions' short messages
# embedded as memories are (the bench projects hold 2 memories each). Those queries' mean hits 4.16 -> 0.08; no tuning
# question's first correct hit is semantic-only, so recall and MRR did not move (held-out: the same). Other providers'
# cosines live on other scales (an e5 model's all fall in 0.75–0.9): they keep `MIN_MESSAGE_COSINE`, uncalibrated,
# unless the user sets `embedding.min_similarity` — one number for every lane, since such a model's message,
# compartment and memory vectors are one vector space (the local model's differ only because messages use a
# 128-dim int8 view of it). Set below `MIN_MESSAGE_COSINE`, it lowers the message lane's candidate cut too.
LOCAL_SEMANTIC_ONLY_FLOOR: Final = {"msgblock": 0.4, "compartment": 0.2, "memory": 0.3}
FLOOR_LANES: Final = {"message": "msgblock", "compartment": "compartment", "memory": "memory"}


def semantic_only_floor(model_id: str | None, kind: str, configured: float | None = None) -> float:
    """The least cosine a semantic-only hit of this vector kind needs under `model_id`: `configured`
    (`embedding.min_similarity`) when set, else the provider's default (see the constants above)."""
    if configured is not None:
        return configured
    from magic_context.search import embed

    if model_id is not None and model_id == embed.model_id("local", embed.LOCAL_MODEL):
        return LOCAL_SEMANTIC_ONLY_FLOOR[kind]
    return MIN_MESSAGE_COSINE


def effective_floors(provider: str, configured: float | None) -> dict[str, float] | None:
    """lane → the semantic-only floor search applies under this provider (None when embeddings are off): what
    `mc status` and `mc doctor` show."""
    if provider == "off":
        return None
    from magic_context.search import embed

    model = embed.model_id("local", embed.LOCAL_MODEL) if provider == "local" else None
    return {lane: semantic_only_floor(model, kind, configured) for lane, kind in FLOOR_LANES.items()}


def floors_text(floors: dict[str, float], source: str) -> str:
    """One line for people: 'semantic-only hits need cosine >= 0.4 message, 0.2 compartment, 0.3 memory (default)'."""
    values = set(floors.values())
    shown = f"{values.pop():g}" if len(values) == 1 else ", ".join(f"{v:g} {lane}" for lane, v in floors.items())
    return f"semantic-only hits need cosine >= {shown} ({source})"


def _cosine(value: float | None) -> dict[str, Any]:
    """A hit's query cosine for `--json` (hits the vectors found): what to look at to choose `min_similarity`."""
    return {} if value is None else {"cosine": round(value, 4)}


LOOSE_DF_FLOOR: Final = 1000


def _selective(conn: sqlite3.Connection, q: Query, total: int) -> str:
    """The loose query without words found in more than max(1000, 2% of the session's rows) rows of the index:
    BM25 must score every row an ORed word matches, and a word that common ranks nothing (measured: it keeps
    p95 at 100k messages within budget, and never triggers below 50k rows)."""
    words = st.content_words(q.text)
    if not words:
        return ""
    cap = max(LOOSE_DF_FLOOR, total // 50)
    kept = [w for w in words if idx.term_count(conn, st.phrase(w), cap) < cap]
    return st.any_words(kept)


def _match(lexical: bool, semantic: bool) -> str:
    return "hybrid" if lexical and semantic else "semantic" if semantic else "fts"


def _semantic_messages(conn: sqlite3.Connection, session_pk: int, q: Query, cutoff: int, n: int,
                       ) -> list[tuple[int, float]]:
    """(ordinal, cosine) of the `n` folded messages nearest the query, best first (one matrix product over the
    session's memory-mapped message vectors, see search/vectorfile.py); none below `MIN_MESSAGE_COSINE`, or below
    `embedding.min_similarity` when that is lower (never at 0 or less: compartments and memories clamp to 0 and
    drop a 0 score, so no lane shows a hit whose vector is unrelated or opposite)."""
    import numpy as np

    from magic_context.search import vectorfile

    matrix = vectorfile.load(conn, "msgblock", str(session_pk), q.model_id or "", q.message_vector.shape[0])
    if len(matrix) == 0:
        return []
    ordinals = matrix["ref"]
    scores = vectorfile.cosines(matrix, q.message_vector)
    least = MIN_MESSAGE_COSINE if q.min_similarity is None else min(MIN_MESSAGE_COSINE, q.min_similarity)
    keep = np.flatnonzero((ordinals <= cutoff) & (scores >= least) & (scores > 0))  # > 0: as the other lanes
    top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
    return [(int(ordinals[i]), float(scores[i])) for i in top]


def compartments(conn: sqlite3.Connection, session_pk: int, q: Query, cutoff: int, limit: int) -> list[Hit]:
    """Compartment summaries by FTS (title, content), plus compartment vectors when a query vector exists."""
    if cutoff < 0:
        return []
    lists = _fts_lists(q, lambda e, n: idx.match_compartments(conn, session_pk, e, cutoff, n), 3 * limit)
    fused = _rrf(lists, lambda r: r["id"])
    rows = {r["id"]: r for _w, rs in lists for r in rs}
    ranked = sorted(fused, key=lambda i: (-fused[i], rows[i]["start_ordinal"]))
    fts = dict(zip(ranked, decay(len(ranked)), strict=True))
    sem: dict[int, tuple[float, int, int, str]] = {}
    if q.vector is not None and q.model_id:
        sem = _semantic_compartments(conn, session_pk, q, cutoff)
    missing = [i for i in sem if i not in rows]
    for found in idx.compartments(conn, session_pk, missing):
        rows[found["id"]] = found
    hits: list[Hit] = []
    floor = semantic_only_floor(q.model_id, "compartment", q.min_similarity)
    for cid in set(fts) | set(sem):
        row = rows.get(cid)
        if row is None or row["end_ordinal"] > cutoff or not q.in_dates(row["at_ms"]):
            continue
        f, s = fts.get(cid), sem.get(cid)
        if f is not None and s is not None:
            score, match = SEMANTIC_WEIGHT * s[0] + FTS_WEIGHT * f, "hybrid"
        elif s is not None:
            if s[0] < floor:  # semantic only and this weak: noise
                continue
            score, match = SINGLE_SOURCE_PENALTY * s[0], "semantic"
        else:
            score, match = SINGLE_SOURCE_PENALTY * (f or 0.0), "fts"
        if score <= 0:
            continue
        start, end = (s[1], s[2]) if s is not None else (row["start_ordinal"], row["end_ordinal"])
        snippet = s[3] if s is not None and s[3] else row["content"] or row["title"]
        hits.append(Hit("compartment", int(cid), score, match, snippet, session_pk, start, end, title=row["title"],
                        at_ms=row["at_ms"], extra={"compartment_start": row["start_ordinal"],
                                                   "compartment_end": row["end_ordinal"],
                                                   **_cosine(s[0] if s is not None else None)}))
    hits.sort(key=lambda h: (-h.score, h.ordinal_start or 0))
    return hits[: 3 * limit]


def reach_back(conn: sqlite3.Connection, hits: Sequence[Hit]) -> None:
    """Widen each compartment hit's range back to the user message its first message answers, when a fold split
    that turn within `TURN_REACH` messages (`compartment_start`/`compartment_end` keep the compartment's own range):
    the summary that ranks for a request's answer then shows the request too. Run on the hits shown (one indexed
    read each), after ranking."""
    for hit in hits:
        if hit.source == "compartment" and hit.session_pk is not None and hit.ordinal_start is not None:
            prompt = idx.prompt_before(conn, hit.session_pk, hit.ordinal_start, TURN_REACH)
            if prompt is not None:
                hit.ordinal_start = int(prompt)


def _semantic_compartments(conn: sqlite3.Connection, session_pk: int, q: Query, cutoff: int,
                           ) -> dict[int, tuple[float, int, int, str]]:
    """compartment id → (clamped cosine, start, end, "") for the compartments nearest the query (top 50)."""
    import numpy as np

    from magic_context.search import vectorfile

    matrix = vectorfile.load(conn, "compartment", str(session_pk), q.model_id or "", q.vector.shape[0])
    if len(matrix) == 0:
        return {}
    keep = np.flatnonzero((matrix["end"] >= 0) & (matrix["end"] <= cutoff))
    scores = vectorfile.cosines(matrix, q.vector)
    top = keep[np.argsort(-scores[keep], kind="stable")[:SEMANTIC_CANDIDATES]]
    return {int(matrix["ref"][i]): (max(0.0, min(1.0, float(scores[i]))), int(matrix["start"][i]),
                                    int(matrix["end"][i]), "") for i in top}


def memories(conn: sqlite3.Connection, project_id: str, q: Query, limit: int, *, now_ms: int, hidden: set[int],
             ) -> list[Hit]:
    """Active, unexpired memories of the project: FTS rank 1/(r+1) and cosine, 0.7/0.3/0.8 (§3.3); hidden dropped."""
    lists = _fts_lists(q, lambda e, n: idx.match_memories(conn, project_id, e, now_ms, n), SEMANTIC_CANDIDATES)
    fused = _rrf(lists, lambda r: r["id"])
    rows = {r["id"]: r for _w, rs in lists for r in rs}
    ranked = sorted(fused, key=lambda i: -fused[i])
    fts = {mid: 1 / (rank + 1) for rank, mid in enumerate(ranked)}
    sem: dict[int, float] = {}
    if q.vector is not None and q.model_id:
        from magic_context.search.embed import cosine, unpack_many

        vec_rows = [r for r in idx.vectors(conn, "memory", project_id, q.model_id) if r["dims"] == q.vector.shape[0]]
        if vec_rows:
            scores = cosine(q.vector, unpack_many([r["vector"] for r in vec_rows], q.vector.shape[0]))
            sem = {int(r["ref"]): max(0.0, min(1.0, float(s))) for r, s in zip(vec_rows, scores, strict=True)}
    missing = [i for i in sem if i not in rows]
    for row in idx.memories(conn, project_id, now_ms, missing):
        rows[row["id"]] = row
    hits: list[Hit] = []
    floor = semantic_only_floor(q.model_id, "memory", q.min_similarity)
    for mid, row in rows.items():
        if mid in hidden or not q.in_dates(row["updated_at"]):
            continue
        f, s = fts.get(mid), sem.get(mid)
        if f is not None and s is not None:
            score, match = SEMANTIC_WEIGHT * s + FTS_WEIGHT * f, "hybrid"
        elif s is not None:
            if s < floor:  # semantic only and this weak: noise
                continue
            score, match = SINGLE_SOURCE_PENALTY * s, "semantic"
        else:
            score, match = SINGLE_SOURCE_PENALTY * (f or 0.0), "fts"
        if score > 0:
            hits.append(Hit("memory", int(mid), score, match, row["content"], category=row["category"],
                            at_ms=row["updated_at"], extra=_cosine(s)))
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits[: max(3 * limit, 10)]


def commits(conn: sqlite3.Connection, project_id: str, q: Query, limit: int) -> list[Hit]:
    """Indexed HEAD commits: FTS rank 1/(r+1) × 0.8, else a LIKE fallback on the whole query (newest first)."""
    n = max(3 * limit, 30)
    lists = _fts_lists(q, lambda e, k: idx.match_commits(conn, project_id, e, k), n)
    fused = _rrf(lists, lambda r: r["id"])
    rows = {r["id"]: r for _w, rs in lists for r in rs}
    if not rows:
        rows = {r["id"]: r for r in idx.like_commits(conn, project_id, q.text, n)}
        fused = {i: 1.0 / (1 + rank) for rank, i in enumerate(rows)}
    ranked = sorted(fused, key=lambda i: (-fused[i], -rows[i]["committed_at"]))
    hits = [Hit("git_commit", rows[i]["sha"], SINGLE_SOURCE_PENALTY / (rank + 1), "fts", rows[i]["message"],
                sha=rows[i]["sha"], at_ms=rows[i]["committed_at"]) for rank, i in enumerate(ranked)]
    return [h for h in hits if q.in_dates(h.at_ms)][:n]


def notes(conn: sqlite3.Connection, session_pk: int | None, project_id: str | None, q: Query, limit: int,
          ) -> list[Hit]:
    """Keyword match (§3.3): 2 if the whole query is a substring, + the share of tokens matched, + 0.5 when all of
    several tokens match; then linear decay by rank (newest first on ties)."""
    query_low = q.text.lower().strip()
    tokens = st.note_tokens(q.text)
    scored: list[tuple[float, Any]] = []
    for row in idx.notes(conn, session_pk, project_id):
        low = row["content"].lower()
        found = {t for t in st.note_tokens(low)}
        raw = 2.0 if query_low and query_low in low else 0.0
        if tokens:
            share = sum(1 for t in tokens if t in found or t in low) / len(tokens)
            raw += share
            if share == 1 and len(tokens) > 1:
                raw += 0.5
        if raw > 0 and q.in_dates(row["created_at"]):
            scored.append((raw, row))
    scored.sort(key=lambda x: (-x[0], -x[1]["created_at"], x[1]["id"]))
    scored = scored[: max(3 * limit, 10)]
    return [Hit("note", int(row["id"]), s, "fts", row["content"], session_pk=row["session_pk"], status=row["status"],
                at_ms=row["created_at"], extra={"type": row["type"], "anchor_ordinal": _anchor(row)})
            for (_raw, row), s in zip(scored, decay(len(scored)), strict=True)]


def _anchor(row: Any) -> int | None:
    """A note's `@msg` ordinal (column `anchor_ordinal`, added by the memory work's migration), if any."""
    return row["anchor_ordinal"] if "anchor_ordinal" in row.keys() else None  # noqa: SIM118 - Row `in` tests values


__all__ = ["Hit", "Query", "commits", "compartments", "decay", "effective_floors", "floors_text", "memories",
           "messages", "notes", "reach_back", "semantic_only_floor"]
