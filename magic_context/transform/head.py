"""m[0] / m[1]: the two synthetic user messages at the head of the conversation.

m[0] is the frozen baseline (project docs, user profile, decayed `<session-history>`, project
memory); m[1] the volatile delta since m[0] was materialized (new compartments at P1, new
memories) or a fixed placeholder. A defer pass replays both from stored text; a SOFT (busting)
pass re-renders m[1] only; a HARD fold re-renders m[0] and resets m[1].
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
    from typing import Final

DOC_FILES: Final = ("ARCHITECTURE.md", "STRUCTURE.md")
MAX_DOC_BYTES: Final = 64 * 1024
M0_ID: Final = "msg_0000000000mc_m0"
M1_ID: Final = "msg_0000000000mc_m1"
M1_BACKSTOP_SHARE: Final = 0.20


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


def _memories(conn: sqlite3.Connection, project_id: str, after_id: int = 0) -> list[dict]:
    rows = conn.execute(
        "SELECT id, category, content, status, importance, last_seen_at FROM memories "
        "WHERE project_id = ? AND status IN ('active', 'permanent') AND id > ? ORDER BY id",
        (project_id, after_id),
    ).fetchall()
    return [dict(zip(("id", "category", "content", "status", "importance", "last_seen_at"), r, strict=True))
            for r in rows]


def render_m0(conn: sqlite3.Connection, ctx: HeadContext) -> tuple[str, dict[str, int]]:
    """The baseline text and the watermarks it covers."""
    from magic_context.history import render  # busting passes only: defer passes replay stored text

    sections = []
    if ctx.include_docs:
        sections.append(_docs(ctx.project_dir))
    compartments = _compartments(conn, ctx.session_pk) if ctx.include_history else []
    if ctx.include_history:
        sections.append(render.render_session_history(compartments, ctx.history_budget, ctx.temporal,
                                                      estimate=ctx.estimate))
    memories = _memories(conn, ctx.project_id) if ctx.include_memory else []
    if memories:
        sections.append(render.render_project_memory(memories, ctx.memory_budget, estimate=ctx.estimate))
    watermarks = {
        "max_sequence": max((int(c["sequence"]) for c in compartments), default=-1),
        "max_memory_id": max((int(x["id"]) for x in memories), default=0),
    }
    return "\n\n".join(s for s in sections if s).strip(), watermarks


def render_m1(conn: sqlite3.Connection, ctx: HeadContext, watermarks: dict[str, int]) -> str:
    """The delta since m[0]: new compartments (always P1) and new memories, or the placeholder."""
    from magic_context.history import render

    after = watermarks.get("max_sequence", -1)
    compartments = _compartments(conn, ctx.session_pk, after) if ctx.include_history else []
    memories = _memories(conn, ctx.project_id, watermarks.get("max_memory_id", 0)) if ctx.include_memory else []
    return render.render_m1(compartments, memories, temporal=ctx.temporal, memory_budget_tokens=ctx.memory_budget,
                            estimate=ctx.estimate)


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


__all__ = ["M0_ID", "M1_ID", "HeadContext", "m1_too_large", "messages", "render_m0", "render_m1"]
