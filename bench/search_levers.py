"""Recall levers for search (issue #12), each measured on the tuning and the held-out question sets.

    nice -n 10 python bench/search_levers.py                 # after bench/search_bench.py built its databases
    nice -n 10 python bench/search_levers.py --only agreement
    nice -n 10 python bench/search_levers.py --only "now:" --exact --set tuning
    nice -n 19 python bench/search_levers.py --only "r4: " --set tuning --exact --flips   # the fourth round
    nice -n 19 python bench/search_levers.py --only "r4: current" --set heldout --questions original --flips

Each lever patches the ranking in this process (nothing is re-indexed in place: the variants that need other
vectors embed them here, and the r4 indexed-words rows edit copies of the cached databases) and prints, per question
set and embedding provider, the paraphrase recall@5 and the MRR of all the set's questions (`--exact` adds
exact-lookup recall@5; `--flips` lists each question whose rank differs from the unpatched ranking's; `--questions
original|added` runs one group of each file's questions). Every lever except the agreement rows and the `now:`,
`r3:` and `r4:` rows runs with the agreement weight at 0 — the ranking before that round — so the rows compare with
"before"; the others run on the current ranking and compare with their round's "current ranking" row. Choose on
`--set tuning`, then measure `--set heldout` once: the held-out set judges; choosing on it would make it a
second tuning set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.search_bench import CACHE, SETS, _config, ensure_db, evaluate, subset, summarize  # noqa: E402

SUMMARY_LINE = re.compile(r"^\[(\d+)(?:-(\d+))?\]\s*(.*)$")  # the historian's `[a-b] U: … → A: …` lines
_memo: dict[Any, Any] = {}
CURRENT = ("now:", "r3:", "r4:", "r5:")  # levers measured on the current ranking (agreement 0.5 kept)
# "now:" (the second round), "r3:" (the third, on the recorded-cwd databases), "r4:" (the fourth: abbreviations,
# misspellings, embedded text, message dims; README "Round four") or "r5:" (the fifth: the `dimGray` miss)


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _embedder() -> Any:
    from magic_context.search import embed

    return embed.from_config(_config("local"))


def _db_key(conn: sqlite3.Connection, *extra: Any) -> tuple[Any, ...]:
    return (conn.execute("PRAGMA database_list").fetchone()[2], *extra)


def summary_lines(conn: sqlite3.Connection, pk: int) -> tuple[list[tuple[int, int, int, str, str]], Any, Any]:
    """(compartment id, start, end, text, title) per summary line, an in-memory FTS5 index of them, their vectors."""
    key = _db_key(conn, pk, "lines")
    if key not in _memo:
        from magic_context.store import search_index as idx

        lines = []
        for c in idx.compartments(conn, pk):
            for raw in (c["content"] or "").splitlines():
                m = SUMMARY_LINE.match(raw.strip())
                if m:
                    lines.append((c["id"], int(m.group(1)), int(m.group(2) or m.group(1)), m.group(3), c["title"]))
        mem = sqlite3.connect(":memory:")
        mem.execute("CREATE VIRTUAL TABLE s USING fts5(body, tokenize='porter unicode61')")
        mem.executemany("INSERT INTO s(rowid, body) VALUES (?, ?)",
                        [(i, f"{s[4]} {s[3]}") for i, s in enumerate(lines)])
        _memo[key] = (lines, mem, _embedder().embed([s[3] for s in lines]))
    return _memo[key]


def line_hits(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
    """Summary lines scored as the compartment lane scores compartments (0.7 cosine + 0.3 FTS, 0.8 alone)."""
    import numpy as np

    from magic_context.search import lanes

    lines, mem, vectors = summary_lines(conn, pk)

    def fetch(expr: str, n: int) -> list[dict[str, int]]:
        return [{"id": r[0]} for r in mem.execute("SELECT rowid FROM s WHERE s MATCH ? ORDER BY bm25(s) LIMIT ?",
                                                  (expr, n)).fetchall()]

    fused = lanes._rrf(lanes._fts_lists(q, fetch, 3 * limit), lambda r: r["id"])
    ranked = sorted(fused, key=lambda i: (-fused[i], lines[i][1]))
    fts = dict(zip(ranked, lanes.decay(len(ranked)), strict=True))
    sem: dict[int, float] = {}
    if q.vector is not None:
        scores = vectors @ q.vector
        sem = {int(i): max(0.0, min(1.0, float(scores[i]))) for i in np.argsort(-scores)[:50]}
    hits = []
    for i in set(fts) | set(sem):
        cid, a, b, body, title = lines[i]
        f, s = fts.get(i), sem.get(i)
        if b > cutoff or (f is None and s is not None and s < lanes.MIN_MESSAGE_COSINE):
            continue
        score = lanes.SEMANTIC_WEIGHT * s + lanes.FTS_WEIGHT * f if f is not None and s is not None else \
            lanes.SINGLE_SOURCE_PENALTY * (s if s is not None else f or 0.0)
        hits.append(lanes.Hit("compartment", f"{cid}:{a}", score, "hybrid", body, pk, a, b, title=title))
    hits.sort(key=lambda h: (-h.score, h.ordinal_start or 0))
    return hits


def lines_as_hits(beside: bool) -> Callable[..., Any]:
    from magic_context.search import lanes

    original = lanes.compartments

    def compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
        base = original(conn, pk, q, cutoff, limit) if beside else []
        merged = sorted(base + line_hits(conn, pk, q, cutoff, limit), key=lambda h: (-h.score, h.ordinal_start or 0))
        return merged[: 3 * limit]
    return compartments


def best_line_scores() -> Callable[..., Any]:
    """A compartment scored by its best summary line (its own range kept)."""
    from magic_context.search import lanes
    from magic_context.store import search_index as idx

    original = lanes.compartments

    def compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
        best: dict[int, float] = {}
        for h in line_hits(conn, pk, q, cutoff, 50):
            cid = int(str(h.id).split(":")[0])
            best[cid] = max(best.get(cid, 0.0), h.score)
        base = {h.id: h for h in original(conn, pk, q, cutoff, 50)}
        rows = {c["id"]: c for c in idx.compartments(conn, pk, [c for c in best if c not in base])}
        out = []
        for cid, score in best.items():
            hit = base.get(cid)
            if hit is None:
                r = rows[cid]
                if r["end_ordinal"] > cutoff:
                    continue
                hit = lanes.Hit("compartment", cid, 0.0, "fts", r["content"] or r["title"], pk, r["start_ordinal"],
                                r["end_ordinal"], title=r["title"])
            hit.score = score
            out.append(hit)
        return sorted(out, key=lambda h: (-h.score, h.ordinal_start or 0))[: 3 * limit]
    return compartments


def compartments_by_rank_fusion() -> Callable[..., Any]:
    from magic_context.search import lanes

    original = lanes.compartments

    def compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
        hits = original(conn, pk, q, cutoff, limit)
        if q.vector is None:
            return hits
        sem = lanes._semantic_compartments(conn, pk, q, cutoff)
        srank = {c: r for r, c in enumerate(sorted(sem, key=lambda c: -sem[c][0]))}
        frank = {h.id: r for r, h in enumerate(h for h in hits if h.match != "semantic")}
        return sorted(hits, key=lambda h: -(1 / (60 + srank[h.id]) if h.id in srank else 0)
                      - (1 / (60 + frank[h.id]) if h.id in frank else 0))
    return compartments


def compartment_plus_message_cosines(top: int = 3, weight: float = 0.5) -> Callable[..., Any]:
    import numpy as np

    from magic_context.search import lanes, vectorfile

    original = lanes._semantic_compartments

    def semantic(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int) -> dict[int, Any]:
        out = original(conn, pk, q, cutoff)
        matrix = vectorfile.load(conn, "msgblock", str(pk), q.model_id or "", q.message_vector.shape[0])
        cos, ref = vectorfile.cosines(matrix, q.message_vector), matrix["ref"]
        for cid, (s, a, b, snippet) in list(out.items()):
            inside = cos[(ref >= a) & (ref <= b)]
            t = float(np.sort(inside)[-top:].mean()) if len(inside) else s
            out[cid] = (max(0.0, min(1.0, (1 - weight) * s + weight * t)), a, b, snippet)
        return out
    return semantic


def windowed_message_cosines(width: int) -> Callable[..., Any]:
    import numpy as np

    from magic_context.search import lanes, vectorfile

    def semantic(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, n: int) -> list[tuple[int, float]]:
        matrix = vectorfile.load(conn, "msgblock", str(pk), q.model_id or "", q.message_vector.shape[0])
        if len(matrix) == 0:
            return []
        vecs = np.asarray(matrix["vec"], np.float32) * np.asarray(matrix["scale"], np.float32)[:, None]
        csum = np.vstack([np.zeros((1, vecs.shape[1]), np.float32), np.cumsum(vecs, axis=0)])
        at = np.arange(len(vecs))
        window = csum[np.clip(at + width + 1, 0, len(vecs))] - csum[np.clip(at - width, 0, len(vecs))]
        window /= np.maximum(np.linalg.norm(window, axis=1, keepdims=True), 1e-9)
        scores, own, ords = window @ q.message_vector, vectorfile.cosines(matrix, q.message_vector), matrix["ref"]
        keep = np.flatnonzero((ords <= cutoff) & (own >= lanes.MIN_MESSAGE_COSINE))
        top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
        return [(int(ords[i]), float(scores[i])) for i in top]
    return semantic


def message_vectors_from(variant: str) -> Callable[..., Any]:
    """Message cosines from other text: `inputs` (prose + tool inputs), `prose`, or `chunkN` (N-character
    pieces with 50 characters of overlap, a message scoring as its best piece)."""
    import numpy as np

    from magic_context.history.runner import _decode
    from magic_context.search import lanes
    from magic_context.search import text as st
    from magic_context.store import raw
    from magic_context.store import search_index as idx

    def vectors(conn: sqlite3.Connection, pk: int) -> tuple[Any, Any, Any]:
        key = _db_key(conn, pk, variant)
        if key not in _memo:
            live = raw.live_index(conn, pk)
            stored = raw.read_range(conn, pk, live[0][0], live[-1][0])
            messages = _decode(idx.session_field(conn, pk, "harness"), stored)
            ords, texts = [], []
            for m in messages:
                t = st.message_text(m, output_head=0) if variant == "inputs" else \
                    st.message_text(m, tools=False) if variant == "prose" else st.message_text(m)
                if t:
                    ords.append(m.ordinal)
                    texts.append(t[:1500])
            owner = None
            if variant.startswith("chunk"):
                size = int(variant[5:])
                pieces = [(i, t[max(0, j - 50): j + size]) for i, t in enumerate(texts) for j in range(0, len(t), size)]
                owner, texts = np.array([p[0] for p in pieces]), [p[1] for p in pieces]
            _memo[key] = (np.array(ords), _embedder().embed_messages(texts), owner)
        return _memo[key]

    def semantic(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, n: int) -> list[tuple[int, float]]:
        ords, vecs, owner = vectors(conn, pk)
        scores = vecs @ q.message_vector
        if owner is not None:
            best = np.full(len(ords), -1.0)
            np.maximum.at(best, owner, scores)
            scores = best
        keep = np.flatnonzero((ords <= cutoff) & (scores >= lanes.MIN_MESSAGE_COSINE))
        top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
        return [(int(ords[i]), float(scores[i])) for i in top]
    return semantic


def content_word_query_vector() -> Callable[..., Any]:
    from magic_context.search import engine
    from magic_context.search import text as st

    original = engine._embed_query

    def embed_query(conn: sqlite3.Connection, config: Any, text: str, warnings: list[str], **kw: Any) -> Any:
        return original(conn, config, " ".join(st.content_words(text)) or text, warnings, **kw)
    return embed_query


def feedback_search(fused: bool, docs: int = 2, terms: int = 6) -> Callable[..., Any]:
    """Pseudo-relevance feedback: search again with the query plus the top `terms` words (tf × compartment idf)
    of the first `docs` hits; the second ranking alone, or RRF-fused (k=10, weight 0.7) with the first."""
    from magic_context.search import engine
    from magic_context.search import text as st

    original = engine.search
    word = re.compile(r"[a-z][a-z0-9_]{3,}")

    def search(conn: sqlite3.Connection, query: str, **kw: Any) -> Any:
        first = original(conn, query, **kw)
        if st.probes(query):
            return first
        comps = [r[0] or "" for r in conn.execute("SELECT content FROM compartments WHERE session_pk = ?",
                                                   (kw["session_pks"][0],))]
        df: Counter[str] = Counter()
        for c in comps:
            df.update(set(word.findall(c.lower())))
        tf = Counter(w for h in first.hits[:docs] for w in word.findall(h.snippet.lower()) if w not in st.STOPWORDS)
        asked = set(st.content_words(query))
        scored = sorted(((n * math.log(1 + len(comps) / (1 + df[w])), w) for w, n in tf.items()
                         if w not in asked and df[w] < len(comps) / 2), reverse=True)
        extra = [w for _s, w in scored[:terms]]
        if not extra:
            return first
        second = original(conn, f"{query} {' '.join(extra)}", **kw)
        if not fused:
            return second
        score: dict[Any, float] = {}
        by_key: dict[Any, Any] = {}
        for weight, result in ((1.0, first), (0.7, second)):
            for rank, h in enumerate(result.hits):
                key = (h.source, h.ordinal_start, h.ordinal_end, str(h.id))
                by_key.setdefault(key, h)
                score[key] = score.get(key, 0.0) + weight / (10 + rank)
        first.hits = [by_key[k] for k in sorted(score, key=lambda k: -score[k])][: kw.get("limit", 10)]
        return first
    return search


def widened_message_ranges(most: int = 40) -> Callable[..., Any]:
    from magic_context.search import engine

    original = engine.search

    def search(conn: sqlite3.Connection, query: str, **kw: Any) -> Any:
        result = original(conn, query, **kw)
        lines = summary_lines(conn, kw["session_pks"][0])[0]
        for h in result.hits:
            if h.source == "message" and h.ordinal is not None:
                for _cid, a, b, *_rest in lines:
                    if a <= h.ordinal <= b and b - a <= most:
                        start = a if h.ordinal_start is None else min(h.ordinal_start, a)
                        h.ordinal_start, h.ordinal_end = start, b if h.ordinal_end is None else max(h.ordinal_end, b)
                        break
        return result
    return search


def weighted_compartment_match(title: float) -> Callable[..., Any]:
    """Compartment FTS with the title column weighted `title` against the content's 1 in BM25."""
    from magic_context.store import search_index as idx

    def match(conn: sqlite3.Connection, pk: int, expression: str, cutoff: int, limit: int) -> list[Any]:
        return idx._rows(conn, "SELECT c.id, c.start_ordinal, c.end_ordinal, c.title, c.content, "
                               "coalesce(c.end_time, c.created_at) AS at_ms FROM compartment_fts f JOIN compartments c "
                               "ON c.id = f.rowid WHERE compartment_fts MATCH ? AND c.session_pk = ? AND c.end_ordinal "
                               f"<= ? ORDER BY bm25(compartment_fts, {float(title)}, 1.0), c.start_ordinal LIMIT ?",
                         (expression, pk, cutoff, limit))
    return match


def range_bm25(weight: float, *, prose_only: bool = True, k1: float = 1.2, b: float = 0.75) -> Callable[..., Any]:
    """The compartment candidates re-ranked by RRF of their own rank and a BM25 over their range's messages taken
    as one document (term frequency = messages of the range holding the query's content word, length = messages in
    the range): a paraphrase's words scattered over several messages of one episode add up, which neither a single
    message nor the summary sees. `weight` is the range ranking's RRF weight against the compartment lane's 1."""
    from magic_context.search import lanes
    from magic_context.search import text as st
    from magic_context.store import search_index as idx

    original = lanes.compartments

    def compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
        hits = original(conn, pk, q, cutoff, limit)
        words = st.content_words(q.text)
        if len(hits) < 2 or not words or st.probes(q.text):
            return hits
        role = " AND role != 'tool'" if prose_only else ""
        total = conn.execute(f"SELECT count(*) FROM message_text WHERE session_pk = ? AND ordinal <= ?{role}",
                             (pk, cutoff)).fetchone()[0] or 1
        spans = [(h.ordinal_start or 0, h.ordinal_end or 0) for h in hits]
        lengths = [conn.execute(f"SELECT count(*) FROM message_text WHERE session_pk = ? AND ordinal BETWEEN ? AND ?"
                                f"{role}", (pk, a, z)).fetchone()[0] for a, z in spans]
        avg = max(1.0, sum(lengths) / len(lengths))
        score = [0.0] * len(hits)
        for w in words:
            found = [r["ordinal"] for r in idx.match_messages(conn, pk, st.phrase(w), cutoff, 100_000,
                                                              prose_only=prose_only)]
            if not found or len(found) > total // 2:
                continue
            idf = math.log(1 + (total - len(found) + 0.5) / (len(found) + 0.5))
            for i, (a, z) in enumerate(spans):
                tf = sum(1 for o in found if a <= o <= z)
                if tf:
                    score[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / avg))
        by_range = sorted(range(len(hits)), key=lambda i: -score[i])
        fused = {i: 1 / (lanes.RRF_K + i) for i in range(len(hits))}
        for rank, i in enumerate(by_range):
            if score[i] > 0:
                fused[i] += weight / (lanes.RRF_K + rank)
        return [hits[i] for i in sorted(fused, key=lambda i: (-fused[i], i))]
    return compartments


def identifier_with_rest() -> Callable[[ExitStack], None]:
    """An identifier many messages name as a filter: for each literal probe of a query that has other content words,
    one more probe list — the probe's matches holding one of those words (`"fs.watch" AND ("theme" OR …)`), ranked
    by BM25 of that expression and weighted by its own match count like every probe. Patched in as extra probes
    whose FTS expression `lanes.st.phrase` passes through unquoted."""
    from types import SimpleNamespace

    from magic_context.records import replace
    from magic_context.search import lanes
    from magic_context.search import text as st

    mark = "\x00expr:"
    messages = lanes.messages

    def phrase(value: str) -> str:
        return value[len(mark):] if value.startswith(mark) else st.phrase(value)

    def patched_messages(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int, **kw: Any) -> Any:
        inside = {w for p in q.probes for w in st.content_words(p)}
        rest = [w for w in st.content_words(q.text) if w not in inside]
        if rest and q.probes:
            q = replace(q, probes=[*q.probes, *(f"{mark}{st.phrase(p)} AND ({st.any_words(rest)})" for p in q.probes)])
        return messages(conn, pk, q, cutoff, limit, **kw)

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(lanes, "messages", patched_messages))
        stack.enter_context(patched(lanes, "st", SimpleNamespace(**{**vars(st), "phrase": phrase})))
    return apply


def user_lane(weight: float) -> Callable[[ExitStack], None]:
    """The person's own messages ranked alone (the loose ORed query over user rows only) as one more RRF list of the
    message lane, at `weight`; skipped for autonomous harnesses (`scheduler.autonomous`), whose only user turn is
    the task. Patched in through `lanes._fts_lists`, which the message lane calls once with `loose_kw`."""
    from magic_context.search import lanes
    from magic_context.store import search_index as idx
    from magic_context.transform.scheduler import autonomous

    ctx: dict[str, Any] = {}
    messages, fts_lists = lanes.messages, lanes._fts_lists

    def patched_messages(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int, **kw: Any) -> Any:
        ctx.update(conn=conn, pk=pk, cutoff=cutoff, n=3 * limit)
        try:
            return messages(conn, pk, q, cutoff, limit, **kw)
        finally:
            ctx.clear()

    def patched_lists(q: Any, fetch: Callable[..., Any], limit: int, *, loose_kw: bool = False) -> Any:
        lists = fts_lists(q, fetch, limit, loose_kw=loose_kw)
        if not (loose_kw and ctx and q.loose) or autonomous(str(idx.session_field(ctx["conn"], ctx["pk"], "harness"))):
            return lists
        users = idx._rows(ctx["conn"], "SELECT t.id, t.ordinal, t.role, t.at_ms, t.text FROM message_fts f "
                                       "JOIN message_text t ON t.id = f.rowid WHERE message_fts MATCH ? "
                                       "AND t.session_pk = ? AND t.ordinal <= ? AND t.role = 'user' "
                                       "ORDER BY bm25(message_fts), t.ordinal LIMIT ?",
                          (q.loose, ctx["pk"], ctx["cutoff"], ctx["n"]))
        return [*lists, (weight, users)]

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(lanes, "messages", patched_messages))
        stack.enter_context(patched(lanes, "_fts_lists", patched_lists))
    return apply


def turn_forward(forward: int) -> Callable[[ExitStack], None]:
    """A compartment hit whose range ends mid-turn also reaches on to the message before the next user message when
    that one is at most `forward` messages on (never past the cutoff): the other half of a fold-split turn, after
    `lanes.TURN_REACH` reached back for the first half."""
    from magic_context.search import lanes
    from magic_context.store import search_index as idx

    original = lanes.compartments

    def compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, limit: int) -> list[Any]:
        hits = original(conn, pk, q, cutoff, limit)
        for h in hits:
            b = h.ordinal_end or 0
            following = idx._one(conn, "SELECT min(ordinal) FROM message_text WHERE session_pk = ? AND role = 'user' "
                                       "AND ordinal > ? AND ordinal <= ?", (pk, b, min(cutoff, b + forward) + 1))
            if following is not None:
                h.ordinal_end = int(following) - 1
        return hits
    return lambda stack: stack.enter_context(patched(lanes, "compartments", compartments))


# --- third round (README "Levers of this round") ----------------------------------------------------------------


def contained_messages_last() -> Callable[[ExitStack], None]:
    """A message hit inside the range of a better-ranked compartment hit of its session moves behind the others."""
    from magic_context.search import engine

    dedupe = engine._dedupe

    def patched_dedupe(hits: list[Any]) -> list[Any]:
        kept, later, shown = [], [], []
        for h in dedupe(hits):
            if h.source == "message" and any(c.session_pk == h.session_pk and c.ordinal_start <= h.ordinal
                                             <= c.ordinal_end for c in shown):
                later.append(h)
                continue
            if h.source == "compartment":
                shown.append(h)
            kept.append(h)
        return kept + later
    return lambda stack: stack.enter_context(patched(engine, "_dedupe", patched_dedupe))


def message_slot(position: int = 4, limit: int = 5) -> Callable[[ExitStack], None]:
    """With no message hit in the top `limit`, the best message hit outside the shown compartments' ranges takes
    place `position + 1`."""
    from magic_context.search import engine

    dedupe = engine._dedupe

    def patched_dedupe(hits: list[Any]) -> list[Any]:
        hits = dedupe(hits)
        if any(h.source == "message" for h in hits[:limit]):
            return hits
        shown = [c for c in hits[:position] if c.source == "compartment"]
        for h in hits[limit:]:
            if h.source == "message" and not any(c.ordinal_start <= h.ordinal <= c.ordinal_end for c in shown):
                return [*hits[:position], h, *(x for x in hits[position:] if x is not h)]
        return hits
    return lambda stack: stack.enter_context(patched(engine, "_dedupe", patched_dedupe))


def role_words_dropped() -> Callable[[ExitStack], None]:
    """"user", "person" and "assistant" count as stopwords of the loose query (they describe who spoke, which the
    summaries write as `U:`/`A:`)."""
    from magic_context.search import text as st

    return lambda stack: stack.enter_context(patched(st, "STOPWORDS", st.STOPWORDS | {"user", "person", "assistant"}))


def person_first_matches() -> Callable[[ExitStack], None]:
    """An identifier's matches ranked with the person's own messages first: the message lane's strict and literal-probe
    lists (every expression but the loose ORed one) re-ordered user rows first, BM25 order kept within each group."""
    from magic_context.search import lanes
    from magic_context.store import search_index as idx

    match = idx.match_messages

    def patched_match(conn: sqlite3.Connection, pk: int, expression: str, cutoff: int, limit: int,
                      *, prose_only: bool = False) -> list[Any]:
        rows = match(conn, pk, expression, cutoff, limit, prose_only=prose_only)
        return rows if " OR " in expression else sorted(rows, key=lambda r: r["role"] != "user")
    return lambda stack: stack.enter_context(patched(lanes.idx, "match_messages", patched_match))


def coordination_first() -> Callable[[ExitStack], None]:
    """The compartment lane's loose (ORed) list ordered by how many of the query's words each compartment matches,
    then by BM25 (coordination-level matching)."""
    from magic_context.search import lanes
    from magic_context.store import search_index as idx

    match = idx.match_compartments

    def patched_match(conn: sqlite3.Connection, pk: int, expression: str, cutoff: int, limit: int) -> list[Any]:
        rows = match(conn, pk, expression, cutoff, limit)
        if " OR " not in expression or not rows:
            return rows
        ids = [r["id"] for r in rows]
        count = dict.fromkeys(ids, 0)
        marks = ",".join("?" * len(ids))
        for word in expression.split(" OR "):
            for (rowid,) in conn.execute(f"SELECT rowid FROM compartment_fts WHERE compartment_fts MATCH ? AND rowid "
                                         f"IN ({marks})", [word.strip(), *ids]):
                count[rowid] += 1
        return sorted(rows, key=lambda r: -count[r["id"]])  # stable: BM25 order within a count
    return lambda stack: stack.enter_context(patched(lanes.idx, "match_compartments", patched_match))


def hubness_corrected(beta: float) -> Callable[[ExitStack], None]:
    """A compartment's cosine minus `beta` × its mean cosine to the session's other compartments (a hub — a summary
    near every query — loses its head start)."""
    import numpy as np

    from magic_context.search import lanes, vectorfile

    def semantic(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int) -> dict[int, tuple[float, int, int, str]]:
        matrix = vectorfile.load(conn, "compartment", str(pk), q.model_id or "", q.vector.shape[0])
        if len(matrix) == 0:
            return {}
        keep = np.flatnonzero((matrix["end"] >= 0) & (matrix["end"] <= cutoff))
        vectors = np.asarray(matrix["vec"], dtype=np.float32)[keep]
        hub = np.zeros(len(matrix), dtype=np.float32)
        if len(keep) > 1:
            sims = vectors @ vectors.T
            hub[keep] = (sims.sum(1) - np.diag(sims)) / (len(keep) - 1)
        scores = vectorfile.cosines(matrix, q.vector) - beta * hub
        top = keep[np.argsort(-scores[keep], kind="stable")[:lanes.SEMANTIC_CANDIDATES]]
        return {int(matrix["ref"][i]): (max(0.0, min(1.0, float(scores[i]))), int(matrix["start"][i]),
                                        int(matrix["end"][i]), "") for i in top}
    return lambda stack: stack.enter_context(patched(lanes, "_semantic_compartments", semantic))


# --- fourth round (README "Round four", abbreviations, misspellings, embedded text, message dims) -----------------


def abbreviation_query(direction: str = "both") -> Callable[[ExitStack], None]:
    """The loose (ORed) query also carries each content word's other spellings from `bench/search_abbrev.py`:
    `both` (background → bg, bg → background), `to_short` (full words gain their abbreviations) or `to_long`."""
    from bench import search_abbrev as abbrev
    from magic_context.search import text as st

    original = st.content_words

    def content_words(query: str) -> list[str]:
        words = original(query)
        out = list(words)
        for w in words:
            for other in abbrev.counterparts(w):
                short = other in abbrev.ABBREVIATIONS and w not in abbrev.ABBREVIATIONS
                if (direction == "both" or (direction == "to_short") == short) and other not in out:
                    out.append(other)
        return out[:st.MAX_QUERY_TERMS]
    return lambda stack: stack.enter_context(patched(st, "content_words", content_words))


_IDENT = re.compile(r"[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*")


def embedded_text(variant: str, text: str) -> str:
    """`text` as a variant embeds it: `same`; `split` (identifiers as their words: toolBgColor → tool bg color);
    `expand` (the full words of its abbreviations appended once each); `split+expand` (identifiers split and each
    abbreviation replaced by its full word); `no-paths` (path-like tokens dropped)."""
    from bench import search_abbrev as abbrev

    if variant == "same":
        return text
    if variant == "expand":
        extra = abbrev.expansions(text)
        return f"{text}\n{' '.join(extra)}" if extra else text
    if variant == "no-paths":
        return " ".join(t for t in text.split(" ") if "/" not in t)
    if variant.startswith("user"):  # `userN`: the person's quoted words (`U: "…"`) repeated N more times
        said = " ".join(re.findall(r'U: "(.*?)"(?: →|$)', text, flags=re.MULTILINE))
        return text + f"\n{said}" * int(variant[4:] or 1) if said else text

    def one(match: re.Match[str]) -> str:
        parts = abbrev.identifier_parts(match.group(0))
        if variant == "split+expand":
            if len(parts) == 1 and parts[0] not in abbrev.ABBREVIATIONS:
                return match.group(0)
            parts = [abbrev.ABBREVIATIONS.get(p, p) for p in parts]
        return " ".join(parts) if len(parts) > 1 or variant == "split+expand" else match.group(0)
    return _IDENT.sub(one, text)


def reembedded(variant: str, kinds: tuple[str, ...] = ("compartment", "msgblock"), query: bool = True,
               ) -> Callable[[ExitStack], None]:
    """Compartment and/or message vectors embedded here from `embedded_text(variant, …)` of what the indexer embeds
    (a compartment's title and content; a message's indexed text, first 1 500 characters, 128 dims); with `query`,
    the query is embedded from its variant too. `same` re-embeds the stored text (the control row)."""
    import numpy as np

    from magic_context.search import engine, lanes
    from magic_context.search.indexer import MESSAGE_TEXT_CHARS
    from magic_context.store import search_index as idx

    def comp_vectors(conn: sqlite3.Connection, pk: int) -> tuple[list[Any], Any]:
        key = _db_key(conn, pk, "comp", variant)
        if key not in _memo:
            comps = idx.compartments(conn, pk)
            _memo[key] = (comps, _embedder().embed([embedded_text(variant, f"{c['title']}\n{c['content']}")
                                                    for c in comps]))
        return _memo[key]

    def msg_vectors(conn: sqlite3.Connection, pk: int) -> tuple[Any, Any]:
        from magic_context.search import embed

        key = _db_key(conn, pk, "msg", variant, embed.MESSAGE_DIMS)
        if key not in _memo:
            rows = idx.message_texts(conn, pk)
            vecs = _embedder().embed_messages([embedded_text(variant, r[2][:MESSAGE_TEXT_CHARS]) for r in rows])
            _memo[key] = (np.array([r[0] for r in rows]), vecs)
        return _memo[key]

    def semantic_compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int) -> dict[int, Any]:
        comps, vecs = comp_vectors(conn, pk)
        scores = vecs @ q.vector
        keep = [i for i, c in enumerate(comps) if 0 <= c["end_ordinal"] <= cutoff]
        top = sorted(keep, key=lambda i: -scores[i])[:lanes.SEMANTIC_CANDIDATES]
        return {int(comps[i]["id"]): (max(0.0, min(1.0, float(scores[i]))), int(comps[i]["start_ordinal"]),
                                      int(comps[i]["end_ordinal"]), "") for i in top}

    def semantic_messages(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, n: int) -> list[tuple[int, float]]:
        ords, vecs = msg_vectors(conn, pk)
        scores = vecs @ q.message_vector
        keep = np.flatnonzero((ords <= cutoff) & (scores >= lanes.MIN_MESSAGE_COSINE))
        top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
        return [(int(ords[i]), float(scores[i])) for i in top]

    original = engine._embed_query

    def embed_query(conn: sqlite3.Connection, config: Any, text: str, warnings: list[str], **kw: Any) -> Any:
        return original(conn, config, embedded_text(variant, text), warnings, **kw)

    def apply(stack: ExitStack) -> None:
        if "compartment" in kinds:
            stack.enter_context(patched(lanes, "_semantic_compartments", semantic_compartments))
        if "msgblock" in kinds:
            stack.enter_context(patched(lanes, "_semantic_messages", semantic_messages))
        if query:
            stack.enter_context(patched(engine, "_embed_query", embed_query))
    return apply


def indexed_expansions(where: tuple[str, ...], paths: bool) -> Callable[[ExitStack], None]:
    """The full words of each row's abbreviations (`abbrev.expansions`) appended to what FTS indexes — compartments'
    content and/or messages' indexed text — on copies of the cached databases (the FTS triggers re-index them;
    vectors unchanged). `paths=False` skips words inside paths (`src` of `packages/tui/src/…`)."""

    from bench import search_abbrev as abbrev

    this = sys.modules[__name__]
    original = this.ensure_db

    def edited(spec: dict[str, Any], rebuild: bool) -> Path:
        source = original(spec, rebuild)
        target = CACHE / f"r4-fts-{'-'.join(where)}-{'paths' if paths else 'nopaths'}" / source.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            src, dst = sqlite3.connect(source), sqlite3.connect(target.with_suffix(".tmp"))
            src.backup(dst)
            src.close()
            with dst:
                if "compartment" in where:
                    for cid, title, content in dst.execute("SELECT id, title, content FROM compartments").fetchall():
                        extra = abbrev.expansions(f"{title}\n{content}", paths=paths)
                        if extra:
                            dst.execute("UPDATE compartments SET content = ? WHERE id = ?",
                                        (f"{content}\n{' '.join(extra)}", cid))
                if "message" in where:
                    for rid, text in dst.execute("SELECT id, text FROM message_text").fetchall():
                        extra = abbrev.expansions(text, paths=paths)
                        if extra:
                            dst.execute("UPDATE message_text SET text = ? WHERE id = ?", (f"{text} / {' '.join(extra)}",
                                                                                         rid))
            dst.close()
            target.with_suffix(".tmp").rename(target)
        return target
    return lambda stack: stack.enter_context(patched(this, "ensure_db", edited))


def _edits1(word: str, ops: str = "all") -> set[str]:
    """Strings one edit from `word`: `swap` (adjacent transpositions), `swap+del` (and single deletions) or `all`
    (and substitutions and insertions of a-z, 0-9)."""
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    if ops != "swap":
        out |= {a + b[1:] for a, b in splits if b}
    if ops == "all":
        out |= {a + c + b[1:] for a, b in splits if b for c in letters}
        out |= {a + c + b for a, b in splits for c in letters}
    out.discard(word)
    return out


def typo_variants(max_df: int = 3, min_len: int = 5, ops: str = "all") -> Callable[[ExitStack], None]:
    """The loose (ORed) query also carries the session's misspellings of its words: strings one edit (`ops`, see
    `_edits1`) from a query word of `min_len`+ letters that the message index holds (porter-stemmed like the word) in
    1 to `max_df` rows, fewer than the word itself — people type fast ("context suage", "tool exectuion"), and a typo
    is rare where the word it misspells is not. Each candidate is one FTS lookup (`search_index.term_count`)."""
    from magic_context.search import engine
    from magic_context.search import text as st
    from magic_context.store import search_index as idx

    original, search = st.content_words, engine.search
    current: list[tuple[sqlite3.Connection, int]] = []

    def rows(conn: sqlite3.Connection, pk: int, term: str, cap: int) -> int:
        return idx.term_count(conn, st.phrase(term), cap)  # the whole index, as the loose query's df cap counts

    def content_words(query: str) -> list[str]:
        words = original(query)
        if not current or not words:
            return words
        conn, pk = current[-1]
        out = list(words)
        for w in words:
            if len(w) < min_len or not w.isalpha():
                continue
            own = rows(conn, pk, w, 10_000)
            for t in sorted(_edits1(w, ops)):
                n = rows(conn, pk, t, max_df + 1)
                if 0 < n <= max_df and n < own and t not in out:
                    out.append(t)
        if os.environ.get("LEVER_DEBUG") and len(out) > len(words):
            print(f"  typo variants of {query!r}: {out[len(words):]}", file=sys.stderr)
        return out[:st.MAX_QUERY_TERMS]

    def patched_search(conn: sqlite3.Connection, query: str, **kw: Any) -> Any:
        current.append((conn, kw["session_pks"][0]))
        try:
            return search(conn, query, **kw)
        finally:
            current.pop()

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(st, "content_words", content_words))
        stack.enter_context(patched(engine, "search", patched_search))
    return apply


def sif_pooled(a: float = 1e-3) -> Callable[[ExitStack], None]:
    """Compartment, message and query vectors pooled with smooth inverse frequency weights (Arora et al. 2017):
    each token's vector weighted a / (a + p(token)), p its frequency among the session's indexed message and summary
    tokens, instead of wordllama's plain average — a static model's average is pulled towards frequent tokens
    (punctuation, `the`, path pieces) that every text shares."""
    import numpy as np

    from magic_context.search import embed, lanes
    from magic_context.search.indexer import MESSAGE_TEXT_CHARS
    from magic_context.store import search_index as idx

    def model() -> Any:
        embed._local_embed(["warm up"])
        return embed._local_model

    def pooled(texts: list[str], weights: Any) -> Any:
        m = model()
        out = np.zeros((len(texts), m.embedding.shape[1]), dtype=np.float32)
        for i, enc in enumerate(m.tokenizer.encode_batch([t or " " for t in texts], add_special_tokens=False)):
            ids = np.array([t for t, k in zip(enc.ids, enc.attention_mask, strict=True) if k], dtype=np.int64)
            if len(ids):
                w = weights[ids]
                out[i] = (w[:, None] * m.embedding[ids]).sum(0) / max(float(w.sum()), 1e-9)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    def session(conn: sqlite3.Connection, pk: int) -> tuple[Any, list[Any], Any, Any, Any]:
        key = _db_key(conn, pk, "sif", a)
        if key not in _memo:
            m = model()
            comps = idx.compartments(conn, pk)
            rows = idx.message_texts(conn, pk)
            comp_texts = [f"{c['title']}\n{c['content']}" for c in comps]
            msg_texts = [r[2][:MESSAGE_TEXT_CHARS] for r in rows]
            counts = np.zeros(m.embedding.shape[0], dtype=np.float64)
            for enc in m.tokenizer.encode_batch(comp_texts + msg_texts, add_special_tokens=False):
                np.add.at(counts, np.array(enc.ids, dtype=np.int64), 1.0)
            weights = (a / (a + counts / max(counts.sum(), 1.0))).astype(np.float32)
            msg = pooled(msg_texts, weights)[:, :embed.MESSAGE_DIMS]
            msg /= np.maximum(np.linalg.norm(msg, axis=1, keepdims=True), 1e-9)
            _memo[key] = (weights, comps, pooled(comp_texts, weights), np.array([r[0] for r in rows]), msg)
        return _memo[key]

    def semantic_compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int) -> dict[int, Any]:
        weights, comps, vecs, _o, _m = session(conn, pk)
        scores = vecs @ pooled([q.text], weights)[0]
        keep = [i for i, c in enumerate(comps) if 0 <= c["end_ordinal"] <= cutoff]
        top = sorted(keep, key=lambda i: -scores[i])[:lanes.SEMANTIC_CANDIDATES]
        return {int(comps[i]["id"]): (max(0.0, min(1.0, float(scores[i]))), int(comps[i]["start_ordinal"]),
                                      int(comps[i]["end_ordinal"]), "") for i in top}

    def semantic_messages(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, n: int) -> list[tuple[int, float]]:
        weights, _c, _v, ords, vecs = session(conn, pk)
        qv = pooled([q.text], weights)[0][:embed.MESSAGE_DIMS]
        scores = vecs @ (qv / max(float(np.linalg.norm(qv)), 1e-9))
        keep = np.flatnonzero((ords <= cutoff) & (scores >= lanes.MIN_MESSAGE_COSINE))
        top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
        return [(int(ords[i]), float(scores[i])) for i in top]

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(lanes, "_semantic_compartments", semantic_compartments))
        stack.enter_context(patched(lanes, "_semantic_messages", semantic_messages))
    return apply


def diversified(weight: float, head: int = 15) -> Callable[[ExitStack], None]:
    """Maximal marginal relevance over the first `head` merged hits: each next place goes to the hit maximizing its
    score (relative to the best) minus `weight` × its largest word overlap (Jaccard of content words, snippet and
    title) with a hit already placed — near-duplicate summaries of one topic give way to another topic's."""
    from magic_context.search import engine
    from magic_context.search import text as st

    dedupe = engine._dedupe

    def words(h: Any) -> set[str]:
        return set(st.content_words(f"{h.title or ''} {h.snippet or ''}"[:4000]))

    def patched_dedupe(hits: list[Any]) -> list[Any]:
        hits = dedupe(hits)
        top, rest = hits[:head], hits[head:]
        if len(top) < 3:
            return hits
        best = max(h.score for h in top) or 1.0
        bags = [words(h) for h in top]
        placed: list[int] = []
        left = list(range(len(top)))
        while left:
            def gain(i: int) -> float:
                overlap = max((len(bags[i] & bags[j]) / max(1, len(bags[i] | bags[j])) for j in placed), default=0.0)
                return top[i].score / best - weight * overlap
            pick = max(left, key=lambda i: (gain(i), -i))
            placed.append(pick)
            left.remove(pick)
        return [top[i] for i in placed] + rest
    return lambda stack: stack.enter_context(patched(engine, "_dedupe", patched_dedupe))


_QUOTE = re.compile(r'\b[UA]: "(.*?)"(?= →|$)', re.MULTILINE)


def prose_compartment_match(which: str = "loose") -> Callable[[ExitStack], None]:
    """The compartment lane's loose (ORed) query — or every query, `which="all"` — matched against each summary's
    prose only (its title and the `U: "…"` / `A: "…"` quotes; no file lists, commands or commits, whose words every
    compartment shares), through an in-memory FTS5 index of the same tokenizer."""
    from magic_context.store import search_index as idx

    match = idx.match_compartments

    def prose_index(conn: sqlite3.Connection, pk: int) -> sqlite3.Connection:
        key = _db_key(conn, pk, "prose")
        if key not in _memo:
            mem = sqlite3.connect(":memory:")
            mem.execute("CREATE VIRTUAL TABLE p USING fts5(title, prose, tokenize='porter unicode61')")
            mem.executemany("INSERT INTO p(rowid, title, prose) VALUES (?, ?, ?)",
                            [(c["id"], c["title"], " ".join(_QUOTE.findall(c["content"] or "")))
                             for c in idx.compartments(conn, pk)])
            _memo[key] = mem
        return _memo[key]

    def patched_match(conn: sqlite3.Connection, pk: int, expression: str, cutoff: int, limit: int) -> list[Any]:
        if which == "loose" and " OR " not in expression:
            return match(conn, pk, expression, cutoff, limit)
        try:
            ids = [r[0] for r in prose_index(conn, pk).execute(
                "SELECT rowid FROM p WHERE p MATCH ? ORDER BY bm25(p), rowid", (expression,)).fetchall()]
        except sqlite3.OperationalError:
            return []
        rows = {r["id"]: r for r in idx.compartments(conn, pk, ids) if r["end_ordinal"] <= cutoff}
        return [rows[i] for i in ids if i in rows][:limit]
    return lambda stack: stack.enter_context(patched(idx, "match_compartments", patched_match))


def centered(kinds: tuple[str, ...], components: int = 0) -> Callable[[ExitStack], None]:
    """Vectors and the query centred on the session's mean vector of that kind (and, with `components`, the top
    principal directions removed: "all-but-the-top", Mu & Viswanath 2018), then renormalized — static-model averages
    share a common direction that makes every text look alike."""
    import numpy as np

    from magic_context.search import lanes, vectorfile

    def post(conn: sqlite3.Connection, kind: str, pk: int, model: str, dims: int) -> tuple[Any, Any, Any]:
        key = _db_key(conn, pk, "centred", kind, components, dims)
        if key not in _memo:
            matrix = vectorfile.load(conn, kind, str(pk), model, dims)
            vecs = np.asarray(matrix["vec"], dtype=np.float32)
            if kind == "msgblock":
                vecs = vecs * np.asarray(matrix["scale"], dtype=np.float32)[:, None]
            mean = vecs.mean(0)
            basis = np.zeros((0, dims), dtype=np.float32)
            if components:
                basis = np.linalg.svd(vecs - mean, full_matrices=False)[2][:components]
            _memo[key] = (matrix, mean, basis, _project(vecs, mean, basis))
        return _memo[key]

    def _project(v: Any, mean: Any, basis: Any) -> Any:
        out = v - mean
        if len(basis):
            out = out - (out @ basis.T) @ basis
        return out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-9)

    def semantic_compartments(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int) -> dict[int, Any]:
        matrix, mean, basis, vecs = post(conn, "compartment", pk, q.model_id, q.vector.shape[0])
        if len(matrix) == 0:
            return {}
        keep = np.flatnonzero((matrix["end"] >= 0) & (matrix["end"] <= cutoff))
        scores = vecs @ _project(q.vector, mean, basis)
        top = keep[np.argsort(-scores[keep], kind="stable")[:lanes.SEMANTIC_CANDIDATES]]
        return {int(matrix["ref"][i]): (max(0.0, min(1.0, float(scores[i]))), int(matrix["start"][i]),
                                        int(matrix["end"][i]), "") for i in top}

    def semantic_messages(conn: sqlite3.Connection, pk: int, q: Any, cutoff: int, n: int) -> list[tuple[int, float]]:
        matrix, mean, basis, vecs = post(conn, "msgblock", pk, q.model_id, q.message_vector.shape[0])
        if len(matrix) == 0:
            return []
        ords = matrix["ref"]
        scores = vecs @ _project(q.message_vector, mean, basis)
        keep = np.flatnonzero((ords <= cutoff) & (scores >= lanes.MIN_MESSAGE_COSINE))
        top = keep[np.argsort(-scores[keep], kind="stable")[:n]]
        return [(int(ords[i]), float(scores[i])) for i in top]

    def apply(stack: ExitStack) -> None:
        if "compartment" in kinds:
            stack.enter_context(patched(lanes, "_semantic_compartments", semantic_compartments))
        if "msgblock" in kinds:
            stack.enter_context(patched(lanes, "_semantic_messages", semantic_messages))
    return apply


def message_dims(dims: int) -> Callable[[ExitStack], None]:
    """Message vectors (and the query's message view) at the first `dims` Matryoshka dimensions of the local model
    (128 shipped; the bundled weights stop at 256), embedded here from the indexed text, float32."""
    from magic_context.search import embed

    inner = reembedded("same", ("msgblock",), query=False)

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(embed, "MESSAGE_DIMS", dims))
        inner(stack)
    return apply


def place_cap(cap: int) -> Callable[[ExitStack], None]:
    """At most `cap` hits per place in the merged ranking (a place: a compartment, with the messages inside its range;
    any other hit is its own place); the hits over the cap move behind the rest in their order. An identifier that
    many messages of one episode mention then leaves room for its other episodes (README "Round five")."""
    from magic_context.search import engine

    dedupe, search = engine._dedupe, engine.search
    state: dict[str, Any] = {}

    def remembering_search(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> Any:
        state["conn"] = conn
        return search(conn, *args, **kwargs)

    def capped(hits: list[Any]) -> list[Any]:
        hits = dedupe(hits)
        ranges: dict[Any, list[Any]] = {}

        def place(h: Any) -> tuple[Any, ...]:
            if h.source == "compartment":
                return ("c", h.session_pk, h.id)
            if h.source != "message":
                return (h.source, h.id)
            sql = "SELECT id, start_ordinal, end_ordinal FROM compartments WHERE session_pk = ?"
            rows = ranges.setdefault(h.session_pk, state["conn"].execute(sql, (h.session_pk,)).fetchall())
            return ("c", h.session_pk, next((r[0] for r in rows if r[1] <= h.ordinal <= r[2]), None))

        count: Counter[tuple[Any, ...]] = Counter()
        kept, over = [], []
        for h in hits:
            key = place(h)
            (kept if count[key] < cap else over).append(h)
            count[key] += 1
        return kept + over

    def apply(stack: ExitStack) -> None:
        stack.enter_context(patched(engine, "search", remembering_search))
        stack.enter_context(patched(engine, "_dedupe", capped))
    return apply


def levers() -> list[tuple[str, tuple[str, ...], Callable[[ExitStack], None]]]:
    """(name, providers, apply) — `apply` enters its patches on the stack."""
    from magic_context.search import engine, lanes

    def set_(**values: Any) -> Callable[[ExitStack], None]:
        def apply(stack: ExitStack) -> None:
            for k, v in values.items():
                stack.enter_context(patched(lanes, k, v))
        return apply

    def with_(obj: Any, name: str, make: Callable[[], Any]) -> Callable[[ExitStack], None]:
        return lambda stack: stack.enter_context(patched(obj, name, make()))

    both, local = ("off", "local"), ("local",)
    out: list[tuple[str, tuple[str, ...], Callable[[ExitStack], None]]] = [
        ("agreement 0.5 (kept)", both, set_()),
        ("agreement 1.0", both, set_(AGREEMENT_WEIGHT=1.0)),
        ("agreement 2.0", both, set_(AGREEMENT_WEIGHT=2.0)),
        ("before: no agreement", both, set_(AGREEMENT_WEIGHT=0.0)),
        ("compartment RRF weight 0.5", both, set_(COMPARTMENT_RRF_WEIGHT=0.5)),
        ("compartment RRF weight 2.0", both, set_(COMPARTMENT_RRF_WEIGHT=2.0)),
        ("semantic RRF weight 1.0", local, set_(SEMANTIC_RRF_WEIGHT=1.0)),
        ("RRF k 20", local, set_(RRF_K=20)),
        ("RRF k 10", local, set_(RRF_K=10)),
        ("loose-query weight 0.75", both, set_(LOOSE_WEIGHT=0.75)),
        ("loose-query weight 1.0", both, set_(LOOSE_WEIGHT=1.0)),
        ("query vector from content words", local, with_(engine, "_embed_query", content_word_query_vector)),
        ("compartments by RRF of FTS and cosine ranks", local,
         with_(lanes, "compartments", compartments_by_rank_fusion)),
        ("summary lines as hits, instead of compartments", both,
         with_(lanes, "compartments", lambda: lines_as_hits(False))),
        ("summary lines as hits, beside compartments", both, with_(lanes, "compartments", lambda: lines_as_hits(True))),
        ("compartment scored by its best summary line", both, with_(lanes, "compartments", best_line_scores)),
        ("compartment cosine + its top-3 message cosines", local,
         with_(lanes, "_semantic_compartments", compartment_plus_message_cosines)),
    ]
    out += [(f"message cosines over a ±{w} window", local,
             with_(lanes, "_semantic_messages", partial(windowed_message_cosines, w))) for w in (1, 2, 3)]
    out += [("feedback search, fused", local, with_(engine, "search", lambda: feedback_search(True))),
            ("feedback search, alone", local, with_(engine, "search", lambda: feedback_search(False)))]
    out += [(f"message vectors from {v}", local,
             with_(lanes, "_semantic_messages", partial(message_vectors_from, v)))
            for v in ("inputs", "prose", "chunk300", "chunk600")]
    out += [("message hit range widened to its summary line", both, with_(engine, "search", widened_message_ranges))]
    out += [("now: current ranking", both, set_()),
            ("now: an identifier's matches holding the query's other words as one more probe list", both,
             identifier_with_rest())]
    out += [(f"now: range BM25 re-rank {w}", both, with_(lanes, "compartments", partial(range_bm25, w)))
            for w in (0.5, 1.0)]
    out += [(f"now: the user's messages ranked alone (loose query), RRF weight {w}", both, user_lane(w))
            for w in (0.25, 0.5)]
    out += [("now: compartment hit keeps its own range (TURN_REACH 0, the ranking before)", both,
             set_(TURN_REACH=0)),
            ("now: compartment hit reaches back to its turn's user message within 16", both, set_(TURN_REACH=16)),
            ("now: compartment hit also reaches on to the next user message within 8", both, turn_forward(8))]
    out += [("now: range BM25 re-rank 0.5, tool rows too", both,
             with_(lanes, "compartments", partial(range_bm25, 0.5, prose_only=False))),
            ("now: range BM25 re-rank 0.5, b=0", both, with_(lanes, "compartments", partial(range_bm25, 0.5, b=0.0))),
            ("now: range BM25 re-rank 0.25", both, with_(lanes, "compartments", partial(range_bm25, 0.25)))]
    out += [("r3: current ranking", both, set_()),
            ("r3: a message inside a better compartment hit moves behind", both, contained_messages_last()),
            ("r3: a message slot at 5th", both, message_slot()),
            ("r3: role words dropped from the loose query", both, role_words_dropped()),
            ("r3: an identifier's matches, the person's first", both, person_first_matches()),
            ("r3: compartments by coordination level, then BM25", both, coordination_first()),
            ("r3: compartment cosines hubness-corrected 0.5", local, hubness_corrected(0.5))]
    out += [("r5: current ranking", both, set_())]
    out += [(f"r5: at most {c} hit(s) per compartment", both, place_cap(c)) for c in (1, 2)]
    out += [("r4: current ranking", both, set_()),
            ("r4: abbreviations in the loose query, both ways", both, abbreviation_query("both")),
            ("r4: abbreviations in the loose query, full word to abbreviation", both, abbreviation_query("to_short")),
            ("r4: abbreviations in the loose query, abbreviation to full word", both, abbreviation_query("to_long"))]
    out += [(f"r4: vectors re-embedded ({kinds}) from the {v} text", local,
             reembedded(v, (("compartment",) if kinds == "compartments" else ("msgblock",) if kinds == "messages"
                            else ("compartment", "msgblock"))))
            for v in ("same", "split", "expand", "split+expand", "no-paths")
            for kinds in ("compartments", "messages", "both")]
    out += [(f"r4: vectors re-embedded (compartments) from the {v} text", local, reembedded(v, ("compartment",),
                                                                                              query=False))
            for v in ("user1", "user2")]
    out += [(f"r4: message vectors at {d} dims", local, message_dims(d)) for d in (128, 256, 64)]
    out += [(f"r4: vectors pooled with smooth inverse frequency weights, a = {a:g}", local, sif_pooled(a))
            for a in (1e-3, 1e-4, 1e-2)]
    out += [(f"r4: compartment score {sw:g} × cosine + {1 - sw:g} × FTS (0.7 shipped)", local,
             set_(SEMANTIC_WEIGHT=sw, FTS_WEIGHT=round(1 - sw, 2))) for sw in (0.5, 0.6, 0.8, 0.9)]
    out += [(f"r4: single-source compartment penalty {p:g} (0.8 shipped)", local, set_(SINGLE_SOURCE_PENALTY=p))
            for p in (0.6, 0.7, 0.9, 1.0)]
    out += [(f"r4: diversified top (maximal marginal relevance, word overlap weight {w:g})", both, diversified(w))
            for w in (0.1, 0.2, 0.4)]
    out += [(f"r4: {label} vectors centred on the session's mean{f', top {c} directions removed' if c else ''}",
             local, centered(kinds, c))
            for label, kinds in (("compartment", ("compartment",)), ("message", ("msgblock",)),
                                 ("compartment and message", ("compartment", "msgblock"))) for c in (0, 1, 2)]
    out += [("r4: compartments' loose query matched against their prose only", both, prose_compartment_match()),
            ("r4: compartments' every query matched against their prose only", both, prose_compartment_match("all"))]
    out += [(f"r4: the session's misspellings ({ops}) of the query's words in the loose query (rows ≤ {d})", both,
             typo_variants(d, ops=ops)) for ops in ("all", "swap+del", "swap") for d in (3, 1)]
    out += [(f"r4: abbreviations' full words indexed ({'+'.join(w)}{'' if p else ', not in paths'})", both,
             indexed_expansions(w, p)) for w in (("compartment",), ("message",), ("compartment", "message"))
            for p in (True, False)]
    from magic_context.store import search_index

    out += [(f"compartment title weight {w} in BM25", both,
             with_(search_index, "match_compartments", partial(weighted_compartment_match, w))) for w in (2.0, 0.5)]
    return out


def measure(providers: tuple[str, ...], sets: tuple[str, ...] = tuple(SETS), *, questions: str = "all",
            ranks: dict[tuple[str, str, str, str], int | None] | None = None,
            ) -> dict[tuple[str, str], dict[str, float]]:
    """(set, provider) → paraphrase recall@5, MRR and exact-lookup recall@5 over all the set's sessions (`questions`:
    all, original or added, as `search_bench.py --questions`); `ranks` collects each question's rank."""
    totals: dict[tuple[str, str], list[float]] = {}
    for name, folder in SETS.items():
        if name not in sets:
            continue
        for path in sorted(folder.glob("*.json")):
            spec = subset(json.loads(path.read_text()), questions)
            if not spec["questions"]:
                continue
            db = ensure_db(spec, False)
            for provider in providers:
                rows = evaluate(db, spec, provider)["rows"]
                if ranks is not None:
                    ranks.update({(name, path.stem, provider, r["q"]): r["rank"] for r in rows})
                pa, every, ex = summarize(rows, ("paraphrase",)), summarize(rows), summarize(rows, ("exact",))
                t = totals.setdefault((name, provider), [0.0] * 6)
                t[0] += pa["r5"] * pa["n"]
                t[1] += pa["n"]
                t[2] += every["mrr"] * every["n"]
                t[3] += every["n"]
                t[4] += ex["r5"] * ex["n"]
                t[5] += ex["n"]
    return {k: {"pa": v[0] / max(1, v[1]), "mrr": v[2] / max(1, v[3]), "ex": v[4] / max(1, v[5])}
            for k, v in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only the levers whose name contains this")
    parser.add_argument("--set", choices=[*SETS, "both"], default="both",
                        help="question set(s) to measure: judge on heldout only once a lever is chosen on tuning")
    parser.add_argument("--exact", action="store_true", help="also print exact-lookup recall@5 in each cell")
    parser.add_argument("--questions", choices=("all", "original", "added"), default="all",
                        help="the questions of each file (as search_bench.py --questions); earlier rounds used all")
    parser.add_argument("--flips", action="store_true",
                        help="after each row, list the questions whose rank differs from the unpatched ranking's")
    args = parser.parse_args(argv)
    os.environ.setdefault("MAGIC_CONTEXT_STORAGE_DIR", str(CACHE / "data"))
    os.environ.setdefault("MAGIC_CONTEXT_CONFIG_DIR", str(CACHE / "config"))
    from magic_context.search import lanes

    sets = tuple(SETS) if args.set == "both" else (args.set,)
    base: dict[tuple[str, str, str, str], int | None] = {}
    if args.flips:
        measure(("off", "local"), sets, questions=args.questions, ranks=base)
    print("| lever | tuning off | tuning local | held-out off | held-out local |")
    print("|---|---|---|---|---|")
    for name, providers, apply in levers():
        if args.only and args.only not in name:
            continue
        ranks: dict[tuple[str, str, str, str], int | None] = {}
        with ExitStack() as stack:
            if not name.startswith(("agreement", "before", *CURRENT)):
                stack.enter_context(patched(lanes, "AGREEMENT_WEIGHT", 0.0))
            apply(stack)
            got = measure(providers, sets, questions=args.questions, ranks=ranks)
        cells = [(f"{got[(s, p)]['pa']:.2f} / {got[(s, p)]['mrr']:.2f}"
                  + (f" / {got[(s, p)]['ex']:.2f}" if args.exact else "")) if (s, p) in got else "–"
                 for s in ("tuning", "heldout") for p in ("off", "local")]
        print(f"| {name} | {' | '.join(cells)} |", flush=True)
        for key, rank in ranks.items():
            if args.flips and base.get(key) != rank:
                print(f"    {key[0]} {key[1]} {key[2]}: {base.get(key) or 'out'} → {rank or 'out'}  {key[3]!r}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
