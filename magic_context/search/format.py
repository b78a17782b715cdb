"""The agent's result text (§3.6, byte for byte), capped at 4096 tokens ([later] format.ts)."""

from __future__ import annotations

from typing import Final

from magic_context.results import Result, Status
from magic_context.search import text as st
from magic_context.search.engine import SearchResult
from magic_context.search.lanes import Hit
from magic_context.search.scope import Scope

MAX_TOKENS: Final = 4096
FIELD_BYTES: Final = 1024
EXPAND_HINT: Final = ("Use ctx_expand(start, end) with the range from any message result above to read the full "
                      "conversation context.")
NOTE_HINT: Final = ("Use ctx_expand(start=N-10, end=N) around any note @msg anchor above to read the surrounding "
                    "conversation context.")


def _field(value: object) -> str:
    raw = str(value).encode("utf-8", "replace")
    return str(value) if len(raw) <= FIELD_BYTES else raw[:FIELD_BYTES].decode("utf-8", "ignore")


def block(i: int, h: Hit, now_ms: int, session_pk: int | None = None) -> str:
    score = f"score={h.score:.2f}"
    if h.source == "memory":
        head = f"[{i}] [memory] {score} id={h.id} category={_field(h.category)} match={h.match}"
        body = st.preview(h.snippet)
    elif h.source == "git_commit":
        head = f"[{i}] [git_commit] {score} sha={(h.sha or '')[:7]} {st.age(h.at_ms, now_ms)} match={h.match}"
        body = st.preview(h.snippet)
    elif h.source == "note":
        head = f"[{i}] [note] {score} id=#{h.id} status={h.status} {st.age(h.at_ms, now_ms)}"
        anchor = h.extra.get("anchor_ordinal")
        if anchor is not None and h.session_pk == session_pk:
            head += f" @msg {anchor}"
        body = st.preview(h.snippet)
    elif h.source == "compartment":
        head = (f"[{i}] [message] {score} compartment_id={h.id} range={h.ordinal_start}-{h.ordinal_end} "
                f"match={h.match} title={_field(h.title)}")
        body = f"Snippet: {st.preview(h.snippet)}" if h.snippet else st.preview(h.title or "")
    else:
        head = f"[{i}] [message] {score} ordinal={h.ordinal} range={h.ordinal_start}-{h.ordinal_end} role={h.role}"
        body = st.preview(h.snippet)
    return f"{head}\n{body}"


def report(result: SearchResult, where: Scope, session_ids: dict[int, str]) -> Result:
    """`mc search`'s result: the hits as dicts, each hit with a range also naming its session's id (what
    `mc expand --session` takes); warnings (e.g. the vector lane was skipped) make it a `warn`."""
    hits = result.as_dicts()
    for item in hits:
        if item.get("session_pk") in session_ids:
            item["session_id"] = session_ids[item["session_pk"]]
    return Result("search", {"query": result.query, "sources": result.sources, "session_id": where.session_id,
                             "project_id": where.project_id, "results": hits, "warnings": result.warnings},
                  Status.WARN if result.warnings else Status.OK)


def render(result: SearchResult, now_ms: int, session_pk: int | None = None) -> str:
    """The `ctx_search` reply for `result`."""
    from magic_context.tokens import estimate

    if not result.hits:
        return (f'No results found for "{result.query}" across notes, memories, primers, git commits, or message '
                "history.")
    blocks = [block(i, h, now_ms, session_pk) for i, h in enumerate(result.hits, 1)]
    header = f'Found {len(result.hits)} result(s) for "{_field(result.query)}":'
    tails = []
    if any(h.source in ("message", "compartment") for h in result.hits):
        tails.append(EXPAND_HINT)
    if any(h.source == "note" and h.session_pk == session_pk and h.extra.get("anchor_ordinal") is not None
           for h in result.hits):
        tails.append(NOTE_HINT)
    kept = list(blocks)
    omitted = 0
    while kept and estimate("\n\n".join([header, *kept, *tails])) > MAX_TOKENS:
        kept.pop()
        omitted += 1
    if omitted:
        tails.append(f"({omitted} result(s) omitted to fit the output budget — refine the query or lower the limit)")
    return "\n\n".join([header, *kept, *tails])


__all__ = ["EXPAND_HINT", "NOTE_HINT", "block", "render", "report"]
