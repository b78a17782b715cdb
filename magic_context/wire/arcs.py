"""Tool arcs on canonical messages: a tool call together with its result(s).

The transform drops tool calls and their results together and must never split them: a provider
rejects a request with an unanswered call or a result without its call. An `Arc` ties a TOOL_CALL
block to the TOOL_RESULT blocks answering it, by position.

Pairing is by `tool_id`: a result pairs with the NEAREST preceding unmatched call with its id, so ids
a harness reuses (OpenCode providers hand out `call_0` in every step) pair within their own turn. A
result may sit in the same message as its call (OpenCode keeps both in one part). A result with no
unmatched call joins the nearest earlier call with its id (a duplicate answer), or else is an orphan
arc (`call is None`); a call nobody answers is an open arc (`results == ()`). Parallel calls are
simply several arcs whose calls share a message.
"""

from __future__ import annotations

from collections.abc import Iterable

from magic_context.records import Factory, record
from magic_context.wire.model import (
    ANTHROPIC,
    ASSISTANT,
    MEDIA,
    OPAQUE,
    OPENAI,
    OPENAI_RESPONSES,
    OPENCODE,
    PI,
    TEXT,
    TOOL,
    TOOL_CALL,
    TOOL_RESULT,
    USER,
    Block,
    Message,
)

Position = tuple[int, int]  # (message index, block index)


@record(frozen=True)
class Arc:
    """A tool call and the results answering it.

    tool_id   the call id (shared by call and results)
    call      position of the TOOL_CALL block, or None for an orphan result
    results   positions of the TOOL_RESULT blocks answering it, in order ((): an open call)
    tool_name the tool's name (from the call, else from a result)
    owner     id of the message holding the call (orphans: the message holding the first result)
    """

    tool_id: str | None
    call: Position | None
    results: tuple[Position, ...]
    tool_name: str | None = None
    owner: str | None = None

    @property
    def is_open(self) -> bool:
        return self.call is not None and not self.results

    @property
    def is_orphan(self) -> bool:
        return self.call is None

    @property
    def positions(self) -> tuple[Position, ...]:
        """Every block position of the arc, call first."""
        return (self.call, *self.results) if self.call is not None else self.results

    @property
    def messages(self) -> frozenset[int]:
        """Indices of the messages the arc touches."""
        return frozenset(mi for mi, _ in self.positions)


@record
class _Draft:
    tool_id: str | None
    call: Position | None
    name: str | None
    results: list[Position] = Factory(factory=list)


def find_arcs(messages: list[Message]) -> list[Arc]:
    """All arcs of a message list, ordered by their first block position."""
    drafts: list[_Draft] = []
    unmatched: dict[str | None, list[_Draft]] = {}  # id -> calls still unanswered, oldest first
    latest: dict[str | None, _Draft] = {}  # id -> nearest earlier call (for duplicate answers)
    for mi, msg in enumerate(messages):
        waiting: dict[str | None, list[Position]] = {}  # results seen before their call in this message
        for bi, block in enumerate(msg.blocks):
            if block.kind == TOOL_CALL:
                draft = _Draft(block.tool_id, (mi, bi), block.tool_name)
                drafts.append(draft)
                latest[block.tool_id] = draft
                early = waiting.pop(block.tool_id, None)
                if early:
                    draft.results.extend(early)
                else:
                    unmatched.setdefault(block.tool_id, []).append(draft)
            elif block.kind == TOOL_RESULT:
                stack = unmatched.get(block.tool_id)
                if stack:
                    stack.pop().results.append((mi, bi))
                elif _call_follows(msg.blocks, bi, block.tool_id):
                    waiting.setdefault(block.tool_id, []).append((mi, bi))
                elif block.tool_id in latest:
                    latest[block.tool_id].results.append((mi, bi))
                else:
                    drafts.append(_Draft(block.tool_id, None, block.tool_name, [(mi, bi)]))
    arcs = [_finish(d, messages) for d in drafts]
    arcs.sort(key=lambda a: a.positions[0])
    return arcs


def _call_follows(blocks: list[Block], index: int, tool_id: str | None) -> bool:
    return any(b.kind == TOOL_CALL and b.tool_id == tool_id for b in blocks[index + 1:])


def _finish(draft: _Draft, messages: list[Message]) -> Arc:
    name = draft.name
    if name is None:
        name = next((messages[mi].blocks[bi].tool_name for mi, bi in draft.results
                     if messages[mi].blocks[bi].tool_name), None)
    first = draft.call if draft.call is not None else draft.results[0]
    return Arc(draft.tool_id, draft.call, tuple(draft.results), name, messages[first[0]].id)


def arcs_touching(arcs: Iterable[Arc], message_index: int) -> list[Arc]:
    """The arcs with a call or result in the given message (drop them all to drop that message)."""
    return [a for a in arcs if message_index in a.messages]


@record
class Removal:
    """What `remove_arcs` took out."""

    arcs: list[Arc]
    blocks: int
    messages: list[Message]


def remove_arcs(messages: list[Message], targets: Iterable[Arc | str], *,
                arcs: list[Arc] | None = None) -> Removal:
    """Remove whole arcs IN PLACE: their call and result blocks, then messages this left empty.

    `targets` are Arcs (from `find_arcs` on this very list) or tool ids; a tool id removes every arc
    with that id. A touched message is removed when nothing but reasoning or blank text remains,
    except a user message holding text, which always stays. Raises ValueError for a stale Arc.
    """
    given = list(targets)
    wanted = [t for t in given if isinstance(t, Arc)]
    ids = {t for t in given if isinstance(t, str)}
    if ids:
        all_arcs = arcs if arcs is not None else find_arcs(messages)
        wanted += [a for a in all_arcs if a.tool_id in ids]
    doomed: dict[int, set[int]] = {}
    chosen: list[Arc] = []
    seen: set[Arc] = set()
    for arc in wanted:
        if arc in seen:
            continue
        seen.add(arc)
        chosen.append(arc)
        for mi, bi in arc.positions:
            block = messages[mi].blocks[bi] if mi < len(messages) and bi < len(messages[mi].blocks) else None
            if block is None or block.kind not in (TOOL_CALL, TOOL_RESULT) or block.tool_id != arc.tool_id:
                raise ValueError(f"stale arc {arc.tool_id!r}: no matching tool block at {(mi, bi)}")
            doomed.setdefault(mi, set()).add(bi)
    removed_blocks = 0
    dropped: set[int] = set()
    for mi, block_indices in doomed.items():
        msg = messages[mi]
        had_text = any(b.kind == TEXT for b in msg.blocks)
        msg.blocks = [b for bi, b in enumerate(msg.blocks) if bi not in block_indices]
        removed_blocks += len(block_indices)
        if not _has_substance(msg.blocks) and not (msg.role == USER and had_text):
            dropped.add(mi)
    gone = [messages[mi] for mi in sorted(dropped)]
    if dropped:
        messages[:] = [m for mi, m in enumerate(messages) if mi not in dropped]
    return Removal(chosen, removed_blocks, gone)


def _has_substance(blocks: list[Block]) -> bool:
    """Whether a message still says something once tool blocks are gone (reasoning alone does not)."""
    return any(b.kind in (TOOL_CALL, TOOL_RESULT, MEDIA, OPAQUE) or (b.kind == TEXT and b.text.strip())
               for b in blocks)


def validate_pairing(messages: list[Message], harness: str) -> list[str]:
    """Pairing violations the harness's provider would reject, as readable lines ([] when valid).

    anthropic  every tool_use is answered in the NEXT message (a user/tool message), results answer a
               tool_use of the message just before, and tool_result blocks come before text
    openai     every call is answered by tool messages before the next non-tool message, and each tool
               result answers a call of the assistant message that run of tool messages follows
    openai-responses  as openai: a reply's function_call items are answered by function_call_output items
               right after it (the reply is one assistant message)
    pi         tool results follow their assistant as for openai; an unanswered call is allowed (Pi drops
               aborted/errored turns and fills missing results itself before calling the provider)
    opencode   call and result live in one part: a result must be in its call's message
    """
    if harness == ANTHROPIC:
        return _check_anthropic(messages)
    if harness in (OPENAI, OPENAI_RESPONSES, PI):
        return _check_tool_runs(messages, require_answers=harness != PI)
    if harness == OPENCODE:
        return _check_opencode(messages)
    raise ValueError(f"unknown harness {harness!r}")


def _ids(msg: Message, kind: str) -> list[str | None]:
    return [b.tool_id for b in msg.blocks if b.kind == kind]


def _check_anthropic(messages: list[Message]) -> list[str]:
    problems: list[str] = []
    for i, msg in enumerate(messages):
        calls = _ids(msg, TOOL_CALL)
        if msg.role == ASSISTANT and calls:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if nxt is None:
                problems += [f"message {i}: tool_use {c} is unanswered: no message follows" for c in calls]
            elif nxt.role not in (USER, TOOL):
                problems += [f"message {i}: tool_use {c} is unanswered: message {i + 1} is {nxt.role}" for c in calls]
            else:
                answered = set(_ids(nxt, TOOL_RESULT))
                problems += [f"message {i}: tool_use {c} has no tool_result in message {i + 1}"
                             for c in calls if c not in answered]
        results = _ids(msg, TOOL_RESULT)
        if not results:
            continue
        if msg.role == ASSISTANT:
            problems.append(f"message {i}: an assistant message carries tool_result blocks")
            continue
        prev = messages[i - 1] if i > 0 else None
        allowed = set(_ids(prev, TOOL_CALL)) if prev is not None and prev.role == ASSISTANT else set()
        seen: set[str | None] = set()
        for r in results:
            if r not in allowed:
                problems.append(f"message {i}: tool_result {r} answers no tool_use of message {i - 1}")
            elif r in seen:
                problems.append(f"message {i}: tool_result {r} appears twice")
            seen.add(r)
        after_other = False
        for b in msg.blocks:
            if b.kind == TOOL_RESULT and after_other:
                problems.append(f"message {i}: tool_result {b.tool_id} comes after text or media")
                break
            after_other = after_other or b.kind in (TEXT, MEDIA, OPAQUE)
    return problems


def _check_tool_runs(messages: list[Message], *, require_answers: bool) -> list[str]:
    problems: list[str] = []
    owner: int | None = None  # index of the assistant the current run of tool messages follows
    pending: dict[str | None, int] = {}  # call id -> count still unanswered in the current run
    for i, msg in enumerate(messages):
        if msg.role == TOOL:
            allowed = pending if owner is not None else {}
            for r in _ids(msg, TOOL_RESULT):
                if allowed.get(r):
                    allowed[r] -= 1
                else:
                    where = f"message {owner}" if owner is not None else "the preceding assistant message"
                    problems.append(f"message {i}: tool result {r} answers no open call of {where}")
            continue
        if require_answers:
            problems += [f"message {owner}: tool call {c} is not answered before message {i}"
                         for c, n in pending.items() for _ in range(n)]
        problems += [f"message {i}: a {msg.role} message carries tool result {r}" for r in _ids(msg, TOOL_RESULT)]
        owner, pending = None, {}
        if msg.role == ASSISTANT:
            owner = i
            for c in _ids(msg, TOOL_CALL):
                pending[c] = pending.get(c, 0) + 1
    if require_answers:
        problems += [f"message {owner}: tool call {c} is unanswered at the end"
                     for c, n in pending.items() for _ in range(n)]
    return problems


def _check_opencode(messages: list[Message]) -> list[str]:
    problems: list[str] = []
    for i, msg in enumerate(messages):
        calls = set(_ids(msg, TOOL_CALL))
        problems += [f"message {i}: tool result {r} has no call in its own message"
                     for r in _ids(msg, TOOL_RESULT) if r not in calls]
    return problems


__all__ = ["Arc", "Position", "Removal", "arcs_touching", "find_arcs", "remove_arcs", "validate_pairing"]
