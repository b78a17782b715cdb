"""The deferred-notes nudge (reference §2.3): a one-line count, never note text, after a trigger.

A trigger (the historian published: `history.publish` sets `note_trigger_at`; or this pass's new
messages show a commit or a todo list with every item done: `detect`) is first seen on a
pass, which records the newest user message; the nudge goes out on a later pass whose newest message
is a *new* user message (the one current at trigger time is already cached), at most once per
`COOLDOWN_MS`, and only when there are active notes or ready smart notes. It is appended to that
message and replayed from its anchor like the ctx_reduce nudges. A pass without a pending trigger
pays one dict lookup; a pass with new messages scans only those. Stdlib only.
"""

from __future__ import annotations

import sqlite3

from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

    from magic_context.transform.state import SessionState
    from magic_context.transform.tagger import Site

TRIGGER_KEY: Final = "note_trigger_at"
STATE_KEY: Final = "note_nudge"
COOLDOWN_MS: Final = 15 * 60_000
TODOS_DONE: Final = frozenset({"completed", "cancelled"})  # a todo list whose items are all here is complete


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def text(deferred: int, ready: int) -> str:
    """The nudge appended to the newest user message ("" when there is nothing to read)."""
    parts = [p for p in (_plural(deferred, "deferred note") if deferred else "",
                         _plural(ready, "ready smart note") if ready else "") if p]
    if not parts:
        return ""
    return (f'\n\n<instruction name="deferred_notes">You have {" and ".join(parts)}. '
            "Review with ctx_note read — some may be actionable now.</instruction>")


def detect(sites: list[Site]) -> str:
    """The §2.3 trigger this pass's new messages carry: "commit" (a commit hash beside a commit verb or in
    `git commit` output, in any new text, tool output or command), "todos" (a todo-tool call whose list has
    every item completed or cancelled, at least one completed), or ""."""
    from magic_context.history.commits import extract_commits
    from magic_context.transform.tags import KIND_TOOL

    for site in sites:
        if not site.tag.new:
            continue
        args = site.call[1].input if site.call is not None else None
        if site.tag.kind == KIND_TOOL and "todo" in (site.tag.tool_name or "").lower() and _todos_done(site, args):
            return "todos"
        command = args.get("command") if isinstance(args, dict) else None
        if extract_commits(site.text, 1) or (isinstance(command, str) and extract_commits(command, 1)):
            return "commit"
    return ""


def _todos_done(site: Site, args: object) -> bool:
    from magic_context.transform.heuristics import TODO_TOOLS, base_name

    if base_name(site.tag.tool_name) not in TODO_TOOLS:
        return False
    todos = args.get("todos") if isinstance(args, dict) else None
    if not isinstance(todos, list) or not todos:
        return False
    statuses = [item.get("status") for item in todos if isinstance(item, dict)]
    return len(statuses) == len(todos) and all(s in TODOS_DONE for s in statuses) and "completed" in statuses


def pending(state: SessionState) -> bool:
    trigger = state.get(TRIGGER_KEY)
    return bool(trigger) and trigger != (state.get(STATE_KEY) or {}).get("handled")


def step(conn: sqlite3.Connection, state: SessionState, kept: list[m.Message], *, session_pk: int,
         project_id: str | None, now_ms: int) -> str:
    """Advance a pending trigger; the nudge text to fire on the newest message now, or ""."""
    from magic_context.store import notes as note_store

    trigger = state.get(TRIGGER_KEY)
    nudge: dict[str, Any] = dict(state.get(STATE_KEY) or {})
    newest = next((msg for msg in reversed(kept) if not msg.synthetic), None)
    user_id = newest.id if newest is not None and newest.role == m.USER else None
    if nudge.get("trigger") != trigger:  # first sight: the current user message is already cache-frozen
        nudge.update(trigger=trigger, user=user_id)
        state.set(STATE_KEY, nudge)
        return ""
    if user_id is None or user_id == nudge.get("user"):
        return ""
    if now_ms - int(nudge.get("delivered_at", -COOLDOWN_MS)) < COOLDOWN_MS:
        return ""
    counts = note_store.counts(conn, session_pk, project_id)
    nudge["handled"] = trigger
    out = text(counts["active"], counts["ready"])
    if out:
        nudge["delivered_at"] = now_ms
    state.set(STATE_KEY, nudge)
    return out


__all__ = ["COOLDOWN_MS", "STATE_KEY", "TODOS_DONE", "TRIGGER_KEY", "detect", "pending", "step", "text"]
