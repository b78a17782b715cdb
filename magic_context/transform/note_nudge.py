"""The deferred-notes nudge (reference §2.3): a one-line count, never note text, after a trigger.

A trigger (the historian published: `history.publish` sets `note_trigger_at`; or this pass's new
messages show a commit or a todo list with every item done: `detect`) is first seen on a pass. The
nudge goes out on the first pass whose newest message is a *new* user message — one the person sent,
not a tool result (Anthropic's tool results are user-role messages) — which no provider has cached: on
the pass that first sees the trigger, a user message mc first stored on that very pass after the
trigger (`fresh`); later, any user message other than the one recorded as sent without it. At most
once per `COOLDOWN_MS`, only when there are active notes or ready smart notes, and not while the agent
has already read them (`read_since_change`). It is appended to that message and replayed from its
anchor like the ctx_reduce nudges. A pass without a pending trigger pays one dict lookup; a pass with
new messages scans only those. Stdlib only.
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


NOTE_TOOL: Final = "ctx_note"
SHOWN: Final = ("active", "ready")  # the statuses the nudge counts, and so the notes a read must have seen


def is_note_tool(name: str | None) -> bool:
    """`ctx_note` under any harness's naming: bare (a plugin tool), or MCP-prefixed — Claude Code's
    `mcp__<server>__ctx_note`, OpenCode's `<server>_ctx_note`, a dotted or dashed `<server>.ctx_note`."""
    low = (name or "").lower()
    return low == NOTE_TOOL or (low.endswith(NOTE_TOOL) and low[-len(NOTE_TOOL) - 1] in "_.-/:")


def is_read(args: object) -> bool:
    """A ctx_note call that reads (§7.3): action "read", or no action and no content (the default)."""
    if not isinstance(args, dict):
        return not args  # no arguments at all: the default action, read
    action = args.get("action")
    if isinstance(action, str) and action.strip():
        return action.strip().lower() == "read"
    content = args.get("content")
    return not (isinstance(content, str) and content.strip())


def visible_read(sites: list[Site], messages: list[m.Message]) -> int | None:
    """Ordinal of the message holding the newest ctx_note read whose output is served whole this pass
    (answered without an error, not dropped, not folded into a compartment), or None."""
    from magic_context.transform.tags import KIND_TOOL

    for site in reversed(sites):
        tag = site.tag
        if tag.kind == KIND_TOOL and not tag.dropped and site.call is not None \
                and any(not block.is_error for _, block in site.results) \
                and is_note_tool(tag.tool_name or site.call[1].tool_name) and is_read(site.call[1].input):
            return messages[site.call[0]].ordinal
    return None


def read_since_change(conn: sqlite3.Connection, sites: list[Site], messages: list[m.Message], *, session_pk: int,
                      project_id: str | None) -> bool:
    """§2.3's last condition: the agent ran ctx_note read after the latest note change and still sees that read.

    "After" compares two times the database holds, both on the pass clock (`now_ms`): the read is when mc
    first stored the message holding the call (`raw.first_seen`: the pass that first carried it, right after
    the tool ran), the change is the newest `updated_at` of the notes the nudge counts (add, the dreamer
    marking one ready; a dismissal leaves nothing new to read). The read must be strictly later. A change in
    the moment between the tool running and the next pass counts as read; a message mc saw in flight before
    the call was added counts as older than the call, which only ever lets the nudge out.
    """
    ordinal = visible_read(sites, messages)
    if ordinal is None:
        return False
    from magic_context.store import notes as note_store
    from magic_context.store import raw as raw_store

    seen = raw_store.first_seen(conn, session_pk, ordinal)
    changed = note_store.latest_change(conn, session_pk, project_id, SHOWN)
    return seen is not None and (changed is None or seen > changed)


def pending(state: SessionState) -> bool:
    trigger = state.get(TRIGGER_KEY)
    return bool(trigger) and trigger != (state.get(STATE_KEY) or {}).get("handled")


def fresh(conn: sqlite3.Connection, session_pk: int, ordinal: int, *, trigger: int, now_ms: int) -> bool:
    """Whether the message at `ordinal` may carry the nudge on the pass that first sees a trigger stamped `trigger`:
    mc first stored it (`raw.first_seen`, pass clock) on this pass (`now_ms`) and after the trigger.

    After, strictly: a trigger `detect` finds is stamped with its own pass's clock, and an inline historian
    publishes with the clock of the pass that ran it, so that pass's user message, already being sent without the
    nudge, counts as current at trigger time. This pass: a background historian stamps its publish with the time
    its run started, so a message stored after that stamp by a pass the run overlapped was sent without the
    nudge too (the trigger was not visible yet); it is cached now.
    """
    from magic_context.store import raw as raw_store

    seen = raw_store.first_seen(conn, session_pk, ordinal)
    return seen is not None and trigger < seen and seen >= now_ms


def _user_turn(kept: list[m.Message]) -> m.Message | None:
    """The newest message when it is one the person sent (a user message carrying no tool result), else None."""
    newest = next((msg for msg in reversed(kept) if not msg.synthetic), None)
    if newest is None or newest.role != m.USER or any(b.kind == m.TOOL_RESULT for b in newest.blocks):
        return None
    return newest


def step(conn: sqlite3.Connection, state: SessionState, kept: list[m.Message], *, sites: list[Site],
         messages: list[m.Message], session_pk: int, project_id: str | None, now_ms: int) -> str:
    """Advance a pending trigger; the nudge text to fire on the newest message now, or "".

    `sites` are this pass's tags over `messages` (the served history before drops), with their drop decisions.
    The user message each pass sends without the nudge is recorded (`user`) so that a later pass re-sending it
    (a retry) never appends to it. While the agent still sees a read newer than every note change the trigger
    stays pending: the nudge goes out on a later new user message once that read was dropped or folded away, or
    a note changed after it.
    """
    from magic_context.store import notes as note_store

    trigger = state.get(TRIGGER_KEY)
    nudge: dict[str, Any] = dict(state.get(STATE_KEY) or {})
    newest = _user_turn(kept)
    user_id = newest.id if newest is not None else None
    if nudge.get("trigger") != trigger:  # first sight: the newest user message may already be cached
        nudge.update(trigger=trigger, user=user_id)
        state.set(STATE_KEY, nudge)
        if newest is None or not fresh(conn, session_pk, newest.ordinal, trigger=int(trigger), now_ms=now_ms):
            return ""
    elif user_id is None or user_id == nudge.get("user"):
        return ""
    nudge["user"] = user_id  # sent now, with the nudge or (held back below) without it
    if now_ms - int(nudge.get("delivered_at", -COOLDOWN_MS)) < COOLDOWN_MS:
        state.set(STATE_KEY, nudge)
        return ""
    counts = note_store.counts(conn, session_pk, project_id)
    out = text(counts["active"], counts["ready"])
    if out and read_since_change(conn, sites, messages, session_pk=session_pk, project_id=project_id):
        state.set(STATE_KEY, nudge)
        return ""  # already read: stays pending (not handled)
    nudge["handled"] = trigger
    if out:
        nudge["delivered_at"] = now_ms
    state.set(STATE_KEY, nudge)
    return out


__all__ = ["COOLDOWN_MS", "NOTE_TOOL", "SHOWN", "STATE_KEY", "TODOS_DONE", "TRIGGER_KEY", "detect", "fresh",
           "is_note_tool", "is_read", "pending", "read_since_change", "step", "text", "visible_read"]
