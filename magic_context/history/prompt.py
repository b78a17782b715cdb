"""The historian producer prompt: a system prompt stating the output format (reference §4.2, in our own
words), the user prompt around the chunk, and the one repair prompt. Stdlib only.

The user prompt carries `<session_references>` (this session's last ≤ 6 compartments by title, the newest
also condensed, so the new ones continue the story instead of repeating it), `<project_memory>` (stored
facts, so known facts are not emitted again) and `<new_messages>` (the chunk text from `chunk.build_chunk`).
The system prompt asks for `<meta>` only when the answer stops before the chunk's end, and for each compartment's
title, importance, episode type, p2 and p3 only: p1's record and p4's anchors are written by code (`tiers`).
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
You are the historian of a long session between a person and an AI coding agent. Condense a slice of its
raw history into compartments the agent will read instead of the raw messages: what was asked, done and
decided, and why.

Input: "[N] U: text" is message N, typed by the person; "[N-M] A: part / part" are the agent's messages
N..M (prose and tool calls); "TC: tool(arg)" a tool call, "✗ …" a failure, "→ …" a short result;
"commits: …" the commits made there.

Answer with this XML only:
<output>
<compartments>
<compartment start="FIRST" end="LAST" title="names the work" episode_type="feature" importance="50">
<p2>what was asked, done and decided, and why; key files and commits; the outcome</p2>
<p3>one or two sentences: outcome and key decision</p3>
</compartment>
</compartments>
<facts>
<PROJECT_RULES>
* a rule the person stated plainly, one per line
</PROJECT_RULES>
</facts>
</output>

Rules:
- Compartments are contiguous and in order, from the first message of <new_messages> to its last; each
  is one coherent piece of work (task, fix, decision), usually several requests long.
- Never end one between a tool call and its result. If the slice ends mid-way through a piece of work,
  you may stop before it and add <meta><unprocessed_from>N</unprocessed_from></meta>, N the first message
  left out (it is read again later); otherwise omit <meta>.
- Code adds each compartment's detailed record (every request verbatim, files, commands, errors, commits)
  and its anchors from the messages themselves: write no p1 or p4; p2 says what the record cannot
  (intent, decisions, reasons, what worked), p3 a subset of p2.
- episode_type: comma-separated from bug, feature, release, refactor, infra, design, investigation, docs.
- importance 1-100 (how slowly it fades): 85+ lasting invariants, 60-84 months, 30-59 weeks, 10-29 days,
  1-9 noise; edits, commits and decisions above browsing and chatter.
- facts: durable project knowledge stated or settled here, under PROJECT_RULES, ARCHITECTURE, CONSTRAINTS,
  CONFIG_VALUES or NAMING, not already in <project_memory>; omit <facts> when none.
- Escape &, < and > as &amp; &lt; &gt;. Omit empty sections.
"""


def _get(row: Any, name: str, default: Any = None) -> Any:
    try:
        value = row[name]
    except (KeyError, IndexError, TypeError):
        value = getattr(row, name, None)
    return default if value is None else value


def render_references(compartments: Iterable[Any]) -> str:
    """The last `MAX_REFERENCES` compartments (rows with start/end ordinals, title, p2/p3): each by its range and
    title, the newest also with its condensed text (p2, else p3) — where the new slice picks up. The older ones'
    text is what the agent's own head already carries; a title says what they covered, enough not to repeat them."""
    rows = list(compartments)[-MAX_REFERENCES:]
    lines = []
    for i, row in enumerate(rows, start=1 - len(rows)):
        lines.append(f"## {_get(row, 'start_ordinal')}-{_get(row, 'end_ordinal')} · {_get(row, 'title', '')}")
        body = (_get(row, "p2") or _get(row, "p3") or _get(row, "content", "")) if i == 0 else ""
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
