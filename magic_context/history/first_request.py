"""The session's first request, which `<session-history>` quotes once the compartment holding it has decayed.

A long session's first request is often its whole task (a mini-swe-agent run has no other), yet the decay
curve demotes the oldest compartment first: at P3 it shows the request's gist as a title, at P4 only paths,
at P5 nothing. `render.decay_render` then opens the history with a bounded quote of it.

It is read from the raw store, and only by `transform.head.render_m0`, which runs on passes that rebuild
m[0] (a HARD fold: the prefix is busting anyway); a defer pass replays m[0]'s stored text and reads nothing.
The raw store holds it even after the harness compacted its own head away, and it is decoded by the same
codec that stored it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from magic_context.history import chunk
from magic_context.history.render import FirstRequest
from magic_context.lazyre import lazy
from magic_context.store import raw as raw_store
from magic_context.wire import model as m

SCAN_ROWS = 8  # user rows looked at: a session's first request is among its first few
SOURCE_CHARS = 4000  # kept of the request: more than a quote shows (300 tokens ≈ 1 050 characters)
_HEAD_OPENINGS = ("<session-history", "<project-docs>", "<project-memory>")  # mc's own m[0], should a harness store it
# Context a harness sends as a user message before the request: Codex's `<environment_context>…</environment_context>`
# (any message that is one element whole) and its AGENTS.md (`# AGENTS.md instructions for DIR`).
_ONE_ELEMENT = lazy(r"^<([\w-]+)>[\s\S]*</\1>$")
_INJECTED_OPENINGS = ("# AGENTS.md instructions",)
_SLASH_COMMAND = lazy(r"^/[\w:.-]+(?:\s+\S+)?\s*$")  # `/mode`, `/model sonnet`: a harness command, not a request


def request_text(msg: m.Message) -> str:
    """The typed text of a user message, cleaned (system reminders, tag prefixes, blank lines and the spaces
    around each line removed); "" when it is not a request a person typed: a bare slash command, context the
    harness injects as a user message, or mc's own head."""
    if not chunk.is_prompt(msg):
        return ""
    parts = [chunk.clean_text(b.text.replace("\r\n", "\n")) for b in msg.blocks
             if b.kind == m.TEXT and b.text and not b.synthetic and not (b.meta and "command" in b.meta)]
    text = "\n".join(line.strip() for part in parts for line in part.splitlines() if line.strip())
    if text.startswith(_HEAD_OPENINGS + _INJECTED_OPENINGS) or _SLASH_COMMAND.match(text) or _ONE_ELEMENT.match(text):
        return ""
    return text[:SOURCE_CHARS]


def pick(messages: Iterable[m.Message]) -> FirstRequest | None:
    """The first message (ordinals set) with request text, or None."""
    for msg in messages:
        text = request_text(msg)
        if text and msg.ordinal is not None:
            return FirstRequest(msg.ordinal, text)
    return None


def read(conn: sqlite3.Connection, session_pk: int, harness: str, through: int) -> FirstRequest | None:
    """The session's first request at or below ordinal `through` (the last folded message), from its first
    `SCAN_ROWS` user messages; None when there is none (no typed text, or nothing folded yet)."""
    from magic_context.transform.protocol import CODECS

    if through < 0 or harness not in CODECS:
        return None
    codec = CODECS[harness]
    stored = raw_store.first_of_role(conn, session_pk, m.USER, through, SCAN_ROWS)
    decoded = []
    for row in stored:
        messages = codec.decode([row.raw])
        if len(messages) != 1:  # a row the codec splits or drops is not one typed request
            continue
        msg = messages[0]
        msg.ordinal, msg.id = row.ordinal, row.message_id
        decoded.append(msg)
    return pick(decoded)


__all__ = ["SCAN_ROWS", "SOURCE_CHARS", "pick", "read", "request_text"]
