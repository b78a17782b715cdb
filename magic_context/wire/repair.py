"""Repair the tool pairing a harness broke, the way its provider accepts it (issue #14 item 4).

A request with an orphan tool result (no call before it) or a call nobody answered is rejected by the
provider (a 400). mc must not serve one with exit 0, and must not tag an orphan. The harnesses repair
such histories themselves before they call a provider — OpenCode answers a pending or running tool
call with `"[Tool execution was interrupted]"` — so mc does the same on the canonical messages:

* an orphan result (it answers no call of the assistant message it follows, or repeats an answer) is
  removed; a message left with nothing else is removed too;
* an unanswered call gets a synthetic error result with `INTERRUPTED`: Anthropic at the front of the
  next user message (a new one when none follows), OpenAI Chat / Responses as a tool message right
  after the call's run of answers;
* Anthropic tool_result blocks that follow text in their message are moved before it.

Pi fills missing results itself (only orphans are removed); OpenCode keeps call and result in one part
(nothing to repair). `repair` returns one line per repair, for the pass report's warnings.
"""

from __future__ import annotations

from magic_context.wire import arcs
from magic_context.wire import model as m

INTERRUPTED = "[Tool execution was interrupted]"


def repair(messages: list[m.Message], harness: str) -> list[str]:
    """Repair `messages` in place (see the module docstring); returns what was done ([] when valid)."""
    if harness == m.OPENCODE or not arcs.validate_pairing(messages, harness):
        return []
    done = _drop_orphans(messages, harness)
    if harness != m.PI:
        done += _answer_open_calls(messages, harness)
    if harness == m.ANTHROPIC:
        done += _results_first(messages)
    return done


def _results_first(messages: list[m.Message]) -> list[str]:
    """Anthropic wants a user message's tool_result blocks before its text: move them up, in order."""
    done = []
    for i, msg in enumerate(messages):
        kinds = [b.kind == m.TOOL_RESULT for b in msg.blocks]
        if any(kinds) and kinds != sorted(kinds, reverse=True):
            msg.blocks = [b for b in msg.blocks if b.kind == m.TOOL_RESULT] + \
                         [b for b in msg.blocks if b.kind != m.TOOL_RESULT]
            done.append(f"moved the tool results of message {i} before its text")
    return done


def _calls(msg: m.Message | None) -> list[str | None]:
    if msg is None or msg.role != m.ASSISTANT:
        return []
    return [b.tool_id for b in msg.blocks if b.kind == m.TOOL_CALL]


def _drop_orphans(messages: list[m.Message], harness: str) -> list[str]:
    done: list[str] = []
    open_ids: list[str | None] = []  # calls of the assistant message just before, not answered yet
    keep: list[m.Message] = []
    for msg in messages:
        if msg.role == m.ASSISTANT:
            open_ids = _calls(msg)
            keep.append(msg)
            continue
        results = [b for b in msg.blocks if b.kind == m.TOOL_RESULT]
        if results:
            kept_blocks = []
            for block in msg.blocks:
                if block.kind != m.TOOL_RESULT:
                    kept_blocks.append(block)
                elif block.tool_id in open_ids:
                    open_ids.remove(block.tool_id)  # each call is answered once
                    kept_blocks.append(block)
                else:
                    done.append(f"removed the orphan tool result {block.tool_id!s:.60} (no call before it)")
            msg.blocks = kept_blocks
            if not kept_blocks or (msg.role == m.TOOL and not any(b.kind == m.TOOL_RESULT for b in kept_blocks)):
                # the message held only orphans; a tool-role message (Pi's toolResult, OpenAI's tool) *is* its
                # result (the call id sits on the message), so whatever else it carries goes with it
                continue
        if msg.role != m.TOOL:  # OpenAI's tool messages run on; anything else ends what may be answered
            open_ids = []
        keep.append(msg)
    messages[:] = keep
    return done


def _synthetic(tool_id: str | None, name: str | None) -> m.Block:
    return m.Block(m.TOOL_RESULT, text=INTERRUPTED, original=INTERRUPTED, tool_id=tool_id, tool_name=name,
                   is_error=True, synthetic=True, key=f"mc-interrupted:{tool_id}")


def _answer_open_calls(messages: list[m.Message], harness: str) -> list[str]:
    done: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        calls = [b for b in msg.blocks if b.kind == m.TOOL_CALL] if msg.role == m.ASSISTANT else []
        if not calls:
            i += 1
            continue
        if harness == m.ANTHROPIC:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = {b.tool_id for b in nxt.blocks if b.kind == m.TOOL_RESULT} if nxt is not None else set()
            missing = [c for c in calls if c.tool_id not in answered]
            if missing:
                if nxt is None or nxt.role not in (m.USER, m.TOOL):
                    nxt = m.Message(id=f"mc-interrupted:{msg.id}", role=m.USER, ordinal=msg.ordinal,
                                    synthetic=True)
                    messages.insert(i + 1, nxt)
                lead = 0
                while lead < len(nxt.blocks) and nxt.blocks[lead].kind == m.TOOL_RESULT:
                    lead += 1
                nxt.blocks[lead:lead] = [_synthetic(c.tool_id, c.tool_name) for c in missing]
                done += [f"answered the unanswered tool call {c.tool_id!s:.60} with {INTERRUPTED}" for c in missing]
            i += 1
            continue
        j = i + 1  # OpenAI Chat / Responses: the run of tool messages right after the call
        answered_ids: list[str | None] = []
        while j < len(messages) and messages[j].role == m.TOOL:
            answered_ids += [b.tool_id for b in messages[j].blocks if b.kind == m.TOOL_RESULT]
            j += 1
        for call in calls:
            if call.tool_id in answered_ids:
                answered_ids.remove(call.tool_id)
                continue
            messages.insert(j, m.Message(id=f"mc-interrupted:{call.tool_id}", role=m.TOOL, ordinal=msg.ordinal,
                                         blocks=[_synthetic(call.tool_id, call.tool_name)], synthetic=True))
            j += 1
            done.append(f"answered the unanswered tool call {call.tool_id!s:.60} with {INTERRUPTED}")
        i = j
    return done


__all__ = ["INTERRUPTED", "repair"]
