"""The historian producer prompt: a system prompt stating the output format (reference §4.2, in our own
words), the user prompt around the chunk, and the one repair prompt. Stdlib only.

The user prompt carries `<session_references>` (this session's last ≤ 6 compartments, so the new ones
continue the story instead of repeating it), `<project_memory>` (stored facts, so known facts are not
emitted again) and `<new_messages>` (the chunk text from `chunk.build_chunk`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from magic_context.history.chunk import Chunk, clip
from magic_context.history.parse import FACT_CATEGORIES
from magic_context.llm.chain import default_repair_prompt

MAX_REFERENCES = 6
REFERENCE_CHARS = 600
MEMORY_CHARS = 300
MAX_MEMORIES = 80

SYSTEM_PROMPT = """\
You are the historian of a long session between a person and an AI coding agent. The agent's context
window cannot hold the whole session, so you condense a slice of its raw history into compartments: a
compact, faithful record the agent will read later instead of the raw messages. Write for that agent:
it must be able to continue the work knowing what was asked, what was done, what was decided and why.

Input lines:
  [N] U: text            message N, typed by the person
  [N-M] A: part / part   messages N..M by the agent; parts are its prose and its tool calls
  TC: tool(key arg)      a tool call; "✗ …" marks a failure, "→ …" a short result
  commits: abc1234 …     commits made in that block

Answer with one XML document and nothing else:

<output>
<compartments>
<compartment start="FIRST" end="LAST" title="short title" episode_type="feature" importance="50">
<p1>most detailed: the person's requests verbatim where short, files read and edited, commands and
their outcome, commits, errors and how they were resolved, decisions with their reasons</p1>
<p2>condensed: the request, the canonical files and commits, the outcome</p2>
<p3>one or two sentences: the outcome and the key decision</p3>
<p4>anchors only: commit hashes and the most important names, or empty as <p4/></p4>
</compartment>
</compartments>
<facts>
<PROJECT_RULES>
* a rule the person stated plainly, one per line
</PROJECT_RULES>
</facts>
<meta>
<messages_processed>FIRST-LAST</messages_processed>
<unprocessed_from>N</unprocessed_from>
</meta>
</output>

Rules:
- Compartments are ordered, contiguous and non-overlapping. The first starts at the first message of
  <new_messages>; each next one starts right after the previous one ends. Every message number belongs
  to exactly one compartment, or lies at or after <unprocessed_from>.
- Cover the whole slice and set <unprocessed_from> to LAST + 1. If the slice ends in the middle of a
  piece of work, you may stop earlier: end the last compartment before it and set <unprocessed_from> to
  the first message you left out; it will be read again with more context.
- Never end a compartment between a tool call and its result.
- A compartment is one coherent piece of work (a task, a fix, a decision), usually several requests
  long. Titles name the work, not the person's mood.
- All four tiers are required, in this order. p1 ⊇ p2 ⊇ p3 ⊇ p4 in content.
- episode_type: one or more of bug, feature, release, refactor, infra, design, investigation, docs,
  comma-separated.
- importance (1-100) sets how slowly the compartment fades: 85-100 lasting invariants, 60-84 matters
  for months, 30-59 for weeks, 10-29 for days, 1-9 noise. Edits, commits and decisions rank above
  browsing and chatter.
- facts: only durable project knowledge stated or settled in this slice, in the categories
  PROJECT_RULES, ARCHITECTURE, CONSTRAINTS, CONFIG_VALUES, NAMING. Skip anything already in
  <project_memory>. Omit <facts> when there are none.
- Escape &, < and > in text as &amp; &lt; &gt;. Omit empty sections.
"""


def _get(row: Any, name: str, default: Any = None) -> Any:
    try:
        value = row[name]
    except (KeyError, IndexError, TypeError):
        value = getattr(row, name, None)
    return default if value is None else value


def render_references(compartments: Iterable[Any]) -> str:
    """The last `MAX_REFERENCES` compartments (rows with start/end ordinals, title, p2/p3), densest text kept short."""
    rows = list(compartments)[-MAX_REFERENCES:]
    lines = []
    for row in rows:
        body = _get(row, "p2") or _get(row, "p3") or _get(row, "content", "")
        lines.append(f"## {_get(row, 'start_ordinal')}-{_get(row, 'end_ordinal')} · {_get(row, 'title', '')}")
        if body:
            lines.append(clip(" ".join(str(body).split()), REFERENCE_CHARS))
    return "\n".join(lines)


def render_memory(memories: Iterable[Any]) -> str:
    """Project memories grouped by category as `* content` lines (at most `MAX_MEMORIES`)."""
    by_category: dict[str, list[str]] = {}
    for row in list(memories)[:MAX_MEMORIES]:
        category = str(_get(row, "category", "PROJECT_RULES"))
        by_category.setdefault(category, []).append(clip(" ".join(str(_get(row, "content", "")).split()),
                                                         MEMORY_CHARS))
    order = [c for c in FACT_CATEGORIES if c in by_category] + sorted(set(by_category) - set(FACT_CATEGORIES))
    out = []
    for category in order:
        out += [f"<{category}>", *(f"* {item}" for item in by_category[category]), f"</{category}>"]
    return "\n".join(out)


def build_prompt(chunk: Chunk, references: Iterable[Any] = (), memories: Iterable[Any] = ()) -> str:
    """The producer's user prompt for `chunk`."""
    parts = []
    refs = render_references(references)
    if refs:
        parts.append(f"<session_references>\n{refs}\n</session_references>")
    memory = render_memory(memories)
    if memory:
        parts.append(f"<project_memory>\n{memory}\n</project_memory>")
    parts.append(f'<new_messages first="{chunk.start}" last="{chunk.end}">\n{chunk.text}\n</new_messages>')
    parts.append(f"Write the compartments for messages {chunk.start}-{chunk.end}. The first compartment starts "
                 f"at {chunk.start}. Answer with the <output> document only.")
    return "\n\n".join(parts)


def repair_prompt(prompt: str, error: str, previous: str) -> str:
    """The one repair request: the original prompt, the validator's error, the previous answer."""
    return default_repair_prompt(prompt, error, previous)


__all__ = ["MAX_REFERENCES", "SYSTEM_PROMPT", "build_prompt", "render_memory", "render_references", "repair_prompt"]
