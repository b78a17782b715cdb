"""m[0] / m[1]: the two synthetic user messages at the head of the conversation.

m[0] is the frozen baseline (project docs, user profile, decayed `<session-history>` — opening with the
session's first request once its compartment has decayed past P2 — project memory); m[1] the volatile
delta since m[0] was materialized (memory updates, new compartments at P1, new memories) or a fixed
placeholder. Both report the memory ids they show; the pass stores them (`visible_memory_ids`) so search
can hide what the agent already sees. A defer pass replays both from stored text; a SOFT (busting) pass
re-renders m[1] only; a HARD fold re-renders m[0] and resets m[1].
"""

from __future__ import annotations

import os
import sqlite3

from magic_context import paths
from magic_context.records import record
from magic_context.store import compartments as compartment_store
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final

DOC_FILES: Final = ("ARCHITECTURE.md", "STRUCTURE.md")
MAX_DOC_BYTES: Final = 64 * 1024
M0_ID: Final = "msg_0000000000mc_m0"
M1_ID: Final = "msg_0000000000mc_m1"
M1_BACKSTOP_SHARE: Final = 0.20
PROJECT_MEMORY: Final = "project-memory"
MAX_FORCED_MEMORIES: Final = 10  # restored or replacement memories shown in m[1] beyond its budget
VISIBLE_MEMORY_KEY: Final = "visible_memory_ids"  # = store.memories.VISIBLE_STATE_KEY (a test checks)


@record
class HeadContext:
    """What rendering the head needs for one session."""

    session_pk: int
    project_id: str
    project_dir: str
    history_budget: int
    memory_budget: int
    temporal: bool
    include_history: bool
    include_memory: bool
    include_docs: bool
    estimate: Callable[[str], int]  # the history renderer's estimate (`history.render.estimate_tokens`)
    now_ms: int = 0  # the pass's time: m[0]'s materialization time when it is rendered
    harness: str = ""  # the session's wire format, to decode its first request ("": no quote)


def _docs(project_dir: str) -> str:
    root = paths.project_root_dir(project_dir)
    files = []
    for name in DOC_FILES:
        try:
            with open(os.path.join(root, name), "rb") as fh:
                data = fh.read(MAX_DOC_BYTES)
        except OSError:
            continue
        files.append(f'<file name="{name}">\n{data.decode("utf-8", "replace").strip()}\n</file>')
    return "<project-docs>\n" + "\n".join(files) + "\n</project-docs>" if files else ""


def _compartments(conn: sqlite3.Connection, session_pk: int, after_sequence: int = -1) -> list[sqlite3.Row]:
    return compartment_store.for_head(conn, session_pk, after_sequence)


def _first_request(conn: sqlite3.Connection, ctx: HeadContext, compartments: list[sqlite3.Row],
                   ) -> Callable[[], Any] | None:
    """What reads the session's first request from the raw store, for the renderer to call only when the
    history could hide it (None without folded history or a known wire format)."""
    if not compartments or not ctx.harness:
        return None
    from magic_context.history import first_request

    through = max(int(c["end_ordinal"]) for c in compartments)
    return lambda: first_request.read(conn, ctx.session_pk, ctx.harness, through)


def render_m0(conn: sqlite3.Connection, ctx: HeadContext) -> tuple[str, dict[str, Any]]:
    """The baseline text and the watermarks it covers (compartment sequence, memory id, mutation cursor,
    and `memory_ids`: the memories it shows)."""
    from magic_context.history import render  # busting passes only: defer passes replay stored text

    sections = []
    if ctx.include_docs:
        sections.append(_docs(ctx.project_dir))
    compartments = _compartments(conn, ctx.session_pk) if ctx.include_history else []
    if ctx.include_history:
        sections.append(render.render_session_history(compartments, ctx.history_budget, ctx.temporal,
                                                      estimate=ctx.estimate,
                                                      first_request=_first_request(conn, ctx, compartments)))
    watermarks: dict[str, Any] = {"max_sequence": max((int(c["sequence"]) for c in compartments), default=-1),
                                  "max_memory_id": 0}
    if ctx.include_memory:
        from magic_context.store import memories as memory_store

        memories = memory_store.eligible(conn, ctx.project_id, ctx.now_ms)
        shown = render.select_memories(memories, ctx.memory_budget, estimate=ctx.estimate,
                                       overhead=f"<{PROJECT_MEMORY}>\n</{PROJECT_MEMORY}>")
        sections.append(render.render_memory_block(shown, PROJECT_MEMORY))
        watermarks.update(max_memory_id=max((int(x["id"]) for x in memories), default=0),
                          memory_ids=sorted(int(x["id"]) for x in shown),
                          memory_cursor=memory_store.mutation_cursor(conn, ctx.project_id))
    return "\n\n".join(s for s in sections if s).strip(), watermarks


def render_m1(conn: sqlite3.Connection, ctx: HeadContext, watermarks: dict[str, Any]) -> tuple[str, list[int]]:
    """The delta since m[0] — `<memory-updates>` for baseline memories changed since, new compartments
    (always P1), new memories — or the placeholder; plus the ids of the memories m[0] and m[1] now show.

    Eligibility is judged at m[0]'s frozen materialization time, so the same rows give the same bytes.
    """
    from magic_context.history import render

    after = watermarks.get("max_sequence", -1)
    compartments = _compartments(conn, ctx.session_pk, after) if ctx.include_history else []
    updates: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []
    visible: set[int] = set()
    if ctx.include_memory:
        updates, shown, visible = _memory_delta(conn, ctx, watermarks)
    text = render.render_m1(compartments, shown, memory_updates=updates, temporal=ctx.temporal,
                            memory_budget_tokens=float("inf"), estimate=ctx.estimate)
    return text, sorted(visible)


def _memory_delta(conn: sqlite3.Connection, ctx: HeadContext, watermarks: dict[str, Any],
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[int]]:
    """(update records for `render_memory_updates`, memories for `<new-memories>`, ids visible after m[1])."""
    from magic_context.history import render
    from magic_context.store import memories as memory_store

    now = int(watermarks.get("materialized_at", ctx.now_ms))
    max_id = int(watermarks.get("max_memory_id", 0))
    baseline = {int(i) for i in watermarks.get("memory_ids") or ()}
    new = memory_store.eligible(conn, ctx.project_id, now, after_id=max_id)
    chosen = render.select_memories(new, ctx.memory_budget * render.M1_TRIM_RATIO, estimate=ctx.estimate)
    last_kind: dict[int, tuple[str, int | None]] = {}
    if "memory_cursor" in watermarks:  # a baseline from before the mutation log knows no cursor
        for memory_id, kind, by in memory_store.mutations_after(conn, ctx.project_id, int(watermarks["memory_cursor"])):
            last_kind.pop(memory_id, None)
            last_kind[memory_id] = (kind, by)
    touched = sorted(last_kind)
    # A replacement may carry no mutation of its own (a merge that keeps one source's text): look it up too.
    replacements = {by for _, by in last_kind.values() if by is not None}
    live = {int(r["id"]): r for r in memory_store.eligible(conn, ctx.project_id, now,
                                                            ids=sorted(replacements.union(touched)))}
    chosen_ids = {int(r["id"]) for r in chosen}
    # A replacement or restored memory the baseline never showed is forced into <new-memories>.
    forced_ids = [i for i in touched
                  if last_kind[i][0] == "restore" and i not in baseline and i not in chosen_ids and i in live]
    forced_ids += [by for kind, by in last_kind.values()
                   if kind == "superseded" and by in live and by not in baseline and by not in chosen_ids]
    forced = [live[i] for i in dict.fromkeys(forced_ids)][:MAX_FORCED_MEMORIES]
    shown = chosen + forced
    shown_ids = {int(r["id"]) for r in shown}
    updates: list[dict[str, Any]] = []
    removed: set[int] = set()
    for memory_id in touched:
        if memory_id not in baseline:
            continue
        kind, by = last_kind[memory_id]
        row = live.get(memory_id)
        if row is not None:
            updates.append({"kind": "update", "id": memory_id, "category": row["category"], "content": row["content"]})
            continue
        removed.add(memory_id)
        if kind == "superseded" and by is not None:
            updates.append({"kind": "superseded", "id": memory_id, "by": by,
                            "by_visible": by in shown_ids or (by in baseline and (by not in last_kind or by in live))})
        else:
            updates.append({"kind": "archive", "id": memory_id})
    return updates, shown, (baseline - removed) | shown_ids


def m1_too_large(m1_text: str, ctx: HeadContext) -> bool:
    """Pressure backstop: m[1] above ~20% of the history budget asks for a HARD fold on a busting pass."""
    from magic_context.history import render

    return m1_text != render.M1_PLACEHOLDER and ctx.estimate(m1_text) > M1_BACKSTOP_SHARE * ctx.history_budget


def messages(m0_text: str, m1_text: str, created_at: int | None) -> list[m.Message]:
    """The two synthetic user messages (m[1] is never empty: a cache breakpoint sits on it)."""
    out = []
    for msg_id, text in ((M0_ID, m0_text), (M1_ID, m1_text)):
        if not text:
            continue
        block = m.Block(m.TEXT, text=text, key="p0", synthetic=True)
        out.append(m.Message(msg_id, m.USER, [block], created_at=created_at, synthetic=True))
    return out


__all__ = ["M0_ID", "M1_ID", "VISIBLE_MEMORY_KEY", "HeadContext", "m1_too_large", "messages", "render_m0", "render_m1"]
