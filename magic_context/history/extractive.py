"""The extractive historian: deterministic compartments from the raw history's structure, no model at all.

It is the offline default and the last fallback of every chain, so it has to be useful on its own.
From the chunk's digests (`chunk.Digest`):

* episodes are cut at the prompts a person typed, then merged up to `TARGET_TOKENS` of true raw
  history per compartment (an episode above 2.5 × the target is split at a point that keeps tool arcs
  whole);
* per compartment: a title (the request's gist); p1 episode by episode — the person's words verbatim
  (clipped when long), files read and edited, commands run (failures marked), commits, errors, and the
  assistant's closing words; p2 condensed; p3 one or two sentences; p4 anchors only (commits, paths);
* importance from what happened (commits and edits above browsing; a stated rule raises it), and an
  episode_type from the activity;
* facts only where a person states a rule plainly ("always …", "never …", "don't …", "use X for Y",
  "X must never …").

Sentence-level wording (a request's gist, closing words, stated rules) lives in `wording`.

Design: it emits the SAME `<output>` XML an LLM historian emits, so parsing, validation and publishing
are shared. `ExtractiveProvider` satisfies the `llm` Provider protocol but is built around the
structured chunk by a factory (`runner` passes `lambda: ExtractiveProvider(chunk)` to `build_chain`)
instead of re-parsing the prompt text; it ignores `system` and `prompt`, so a repair request yields
the same answer. Stdlib only.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from magic_context.history import boundary, wording
from magic_context.history.chunk import Chunk, Digest, clip, one_line
from magic_context.llm.base import Completion
from magic_context.wire import model as m

NAME = "extractive"
MODEL = "extractive-v1"
TARGET_TOKENS = 8_000
SPLIT_FACTOR = 2.5
UNKNOWN_TOKENS = 60
PROMPT_CHARS = 300
CONCLUSION_CHARS = 260
MAX_COMMANDS = 6
MAX_ERRORS = 3

_INSPECT_COMMAND = re.compile(r"^(?:grep|rg|find|ls|cat|head|tail|wc|sed -n|awk|tree|file|stat|which|git "
                              r"(?:status|diff|log|show))\b")
_TRIVIAL_COMMAND = re.compile(r"^(?:sleep|date|pwd|echo|true|clear|whoami)\b")
_DOC_EXT = (".md", ".mdx", ".rst", ".txt", ".adoc")
_INFRA_HINT = re.compile(r"(?i)(?:\bnpm (?:install|ci)\b|\bpip install\b|\bdocker|makefile|\.github/|\bworkflows?\b|"
                         r"tsconfig|package\.json|pyproject|\.ya?ml\b|dockerfile)")
_RELEASE_HINT = re.compile(r"(?i)\b(?:release|publish|version:|npm version|git tag|changelog|bump)\b")
_BUG_HINT = re.compile(r"(?i)\b(?:fix|bug|crash|broken|error|wrong|explod\w*|fail\w*|doesn'?t work|not working|"
                       r"issue|regression|fucked|artifacts?)\b")
_REFACTOR_HINT = re.compile(r"(?i)\b(?:refactor|rename|port|move|clean ?up|remove|simplify|extract|migrate)\b")
_DESIGN_HINT = re.compile(r"(?i)(?:how (?:can|should|do) we|should we|do we need|design|tokens?\b|approach|"
                          r"what if|could we)")


@dataclass(slots=True)
class Draft:
    """One compartment before rendering."""

    start: int
    end: int
    title: str
    p1: str
    p2: str
    p3: str
    p4: str
    importance: int
    episode_type: str


def _size(d: Digest) -> int:
    return d.tokens if d.tokens > 0 else UNKNOWN_TOKENS


def episodes(digests: Sequence[Digest]) -> list[list[Digest]]:
    """Digests cut before every prompt that asks for something ("continue", "ok", `/cmd` stay with the
    episode before them); a leading run without a prompt is its own episode."""
    out: list[list[Digest]] = []
    for d in digests:
        if not out or (d.prompt and not wording.trivial(d.text)):
            out.append([d])
        else:
            out[-1].append(d)
    return out


def _split(episode: list[Digest], limit: int, unsafe: frozenset[int]) -> list[list[Digest]]:
    parts: list[list[Digest]] = [[]]
    used = 0
    for d in episode:
        current = parts[-1]
        if current and used >= limit and d.role == m.ASSISTANT and current[-1].ordinal not in unsafe:
            parts.append([])
            used = 0
        parts[-1].append(d)
        used += _size(d)
    return [p for p in parts if p]


def group(digests: Sequence[Digest], spans: Sequence[boundary.Span], target: int = TARGET_TOKENS,
          ) -> list[list[list[Digest]]]:
    """Episodes merged into compartments of about `target` raw tokens (each compartment: its episodes)."""
    unsafe = boundary.unsafe_cuts(spans)
    pieces: list[list[Digest]] = []
    for episode in episodes(digests):
        if sum(_size(d) for d in episode) > SPLIT_FACTOR * target:
            pieces.extend(_split(episode, target, unsafe))
        else:
            pieces.append(episode)
    groups: list[list[list[Digest]]] = []
    used = 0
    for piece in pieces:
        size = sum(_size(d) for d in piece)
        if groups and (used >= target or (used + size > 1.5 * target and used >= target / 2)):
            groups.append([])
            used = 0
        if not groups:
            groups.append([])
        groups[-1].append(piece)
        used += size
    return groups


def _conclusion(episode: Sequence[Digest]) -> str:
    """The assistant's closing words: its last substantial text that is not an announced next step."""
    texts = [t for t in (wording.tidy(d.text) for d in episode if d.role == m.ASSISTANT and d.text) if t]
    if not texts:
        return ""
    best = next((t for t in reversed(texts) if len(t) >= 30 and not t.endswith(":")),
                next((t for t in reversed(texts) if len(t) >= 30), texts[-1]))
    return clip(best, CONCLUSION_CHARS)


def _short_command(command: str) -> str:
    """A command without its output plumbing (`2>&1`, `| head`, `| tail`, `| grep`)."""
    command = re.sub(r"\s*2>&1", "", command)
    command = re.sub(r"\s*\|\s*(?:head|tail|grep|wc|less|cat)\b.*$", "", command)
    return one_line(command, 70)


@dataclass(slots=True)
class _Work:
    """What a stretch of digests did."""

    reads: list[str]
    edits: Counter[str]
    commands: list[str]
    errors: list[str]
    commits: list[str]
    searches: int
    notes: list[str]

    @classmethod
    def of(cls, digests: Sequence[Digest]) -> _Work:
        reads: list[str] = []
        edits: Counter[str] = Counter()
        commands: list[str] = []
        errors: list[str] = []
        commits: list[str] = []
        searches = 0
        notes: list[str] = []
        for d in digests:
            commits += [c for c in d.commits if c not in commits]
            if d.note:
                notes.append(d.note)
            for use in d.tools:
                if use.action in ("edit", "write") and use.path:
                    edits[use.path] += 1
                elif use.action == "read" and use.path:
                    if use.path not in reads:
                        reads.append(use.path)
                elif use.action == "search":
                    searches += 1
                if use.command and not _TRIVIAL_COMMAND.match(use.command) \
                        and (use.error or not _INSPECT_COMMAND.match(use.command)):
                    line = f"`{_short_command(use.command)}`" + (f" ✗ {use.outcome}" if use.error else "")
                    if line not in commands:
                        commands.append(line)
                elif use.command and _INSPECT_COMMAND.match(use.command):
                    searches += 1
                elif use.error:
                    errors.append(f"{use.name}({one_line(use.key_arg, 50)}) ✗ {use.outcome}")
        reads = [p for p in reads if p not in edits]
        return cls(reads, edits, commands, errors, commits, searches, notes)

    def score(self) -> int:
        """How much happened: edits and commits weigh most, then commands and reads."""
        return 3 * sum(self.edits.values()) + 5 * len(self.commits) + len(self.commands) + len(self.reads)

    def sentence(self) -> str:
        parts = []
        if self.reads:
            parts.append("read " + ", ".join(self.reads))
        if self.edits:
            parts.append("edited " + ", ".join(f"{p} ×{n}" if n > 1 else p for p, n in self.edits.items()))
        if self.commands:
            more = len(self.commands) - MAX_COMMANDS
            parts.append("ran " + ", ".join(self.commands[:MAX_COMMANDS]) + (f" (+{more} more)" if more > 0 else ""))
        if self.searches and not parts:
            parts.append(f"{self.searches} lookup{'s' if self.searches > 1 else ''} (grep/find/ls)")
        if self.errors:
            parts.append("errors: " + "; ".join(self.errors[:MAX_ERRORS]))
        if self.commits:
            parts.append("commits " + " ".join(self.commits))
        return "; ".join(parts)


def _episode_line(episode: Sequence[Digest]) -> str:
    head = episode[0]
    pieces = []
    if head.prompt:
        pieces.append(f'U: "{clip(" ".join(wording.strip_images(head.text).split()), PROMPT_CHARS)}"')
    work = _Work.of(episode).sentence()
    notes = [n for d in episode for n in ([d.note] if d.note else [])]
    if notes:
        pieces.append("user ran " + ", ".join(notes[:3]))
    if work:
        pieces.append(work[:1].upper() + work[1:])
    conclusion = _conclusion(episode)
    if conclusion:
        pieces.append(f'A: "{conclusion}"')
    return f"[{head.ordinal}-{episode[-1].ordinal}] " + " → ".join(pieces) if pieces else ""


def _types(prompts: str, work: _Work) -> str:
    kinds = []
    if work.commits and _RELEASE_HINT.search(prompts + " " + " ".join(work.commands)):
        kinds.append("release")
    if _BUG_HINT.search(prompts) or (work.errors and work.edits):
        kinds.append("bug")
    if work.edits and all(p.lower().endswith(_DOC_EXT) for p in work.edits):
        kinds.append("docs")
    elif work.edits:
        kinds.append("refactor" if _REFACTOR_HINT.search(prompts) else "feature")
    if _DESIGN_HINT.search(prompts):
        kinds.append("design")
    if _INFRA_HINT.search(" ".join(work.commands) + " " + " ".join(work.edits)):
        kinds.append("infra")
    if not work.edits and not work.commits:
        kinds.append("investigation")
    return ",".join(list(dict.fromkeys(kinds))[:3]) or "investigation"


def _importance(work: _Work, rules: int, substantive: bool) -> int:
    if not work.edits and not work.commits:
        score = 22 if (work.reads or work.commands or work.searches) else (12 if not substantive else 18)
    else:
        score = 35 + min(25, 4 * len(work.edits)) + (20 if work.commits else 0)
    score += 12 * min(rules, 2)
    return max(5, min(90, score))


def _title(episodes_: Sequence[list[Digest]], digests: Sequence[Digest], work: _Work) -> tuple[str | None, str]:
    """(the first request that led to work, the title). The title is that request's gist; when a later
    request led to at least twice as much work, both gists joined by an arrow."""
    asks = [(_Work.of(ep).score(), ep[0].text) for ep in episodes_ if ep[0].prompt and not wording.trivial(ep[0].text)]
    if asks:
        first_score, first = next(((sc, t) for sc, t in asks if sc > 0), asks[0])
        best_score, best = max(asks, key=lambda a: a[0])
        if best != first and best_score >= 2 * max(1, first_score):
            return first, clip(f"{wording.gist(first, 50)} → {wording.gist(best, 50)}", 100)
        return first, wording.gist(first)
    top = [p for p, _ in work.edits.most_common(2)]
    if top:
        return None, "Continued: edits to " + ", ".join(p.rsplit("/", 1)[-1] for p in top)
    text = next((d.text for d in digests if d.role == m.ASSISTANT and d.text), "")
    return None, wording.gist(wording.tidy(text)) if text else "Tool activity"


def _follow_ups(episodes_: Sequence[list[Digest]], first: str, count: int) -> str:
    """` (+N follow-ups: a; b; c)` naming the three follow-ups that led to the most work."""
    if count <= 0:
        return ""
    asks = [(i, _Work.of(ep).score(), ep[0].text) for i, ep in enumerate(episodes_)
            if ep[0].prompt and ep[0].text != first and not wording.trivial(ep[0].text)]
    named = sorted(sorted(asks, key=lambda a: -a[1])[:3])
    names = "; ".join(wording.gist(text, 50) for _, _, text in named)
    return f" (+{count} follow-up{'s' if count > 1 else ''}" + (f": {names})" if names else ")")


def summarize(episodes_: Sequence[list[Digest]], rules: int = 0) -> Draft:
    """One compartment from its episodes."""
    digests = [d for ep in episodes_ for d in ep]
    prompts = [d.text for d in digests if d.prompt]
    work = _Work.of(digests)
    first_ask, title = _title(episodes_, digests, work)
    top = [p for p, _ in work.edits.most_common(3)]
    lines = [line for line in (_episode_line(ep) for ep in episodes_) if line]
    p1 = "\n".join(lines) or title
    conclusion = next((c for c in (_conclusion(ep) for ep in reversed(episodes_)) if c), "")
    p2_parts = []
    if first_ask:
        p2_parts.append(f'U: "{clip(" ".join(wording.strip_images(first_ask).split()), 160)}"'
                        + _follow_ups(episodes_, first_ask, len(prompts) - 1))
    if work.edits:
        p2_parts.append("Edited " + ", ".join(list(work.edits)[:8]) + (" …" if len(work.edits) > 8 else ""))
    elif work.reads:
        p2_parts.append("Read " + ", ".join(work.reads[:6]) + (" …" if len(work.reads) > 6 else ""))
    if work.commits:
        p2_parts.append("Commits " + " ".join(work.commits))
    if conclusion:
        p2_parts.append("Outcome: " + wording.first_sentence(conclusion))
    p2 = ". ".join(p2_parts) or p1
    outcome = (f"edited {len(work.edits)} file{'s' if len(work.edits) != 1 else ''} ("
               + ", ".join(p.rsplit("/", 1)[-1] for p in top) + ")") if work.edits else \
        ("investigated " + ", ".join(p.rsplit("/", 1)[-1] for p in work.reads[:3]) if work.reads else "discussion")
    p3 = f"{title}: {outcome}" + (f"; committed {' '.join(work.commits)}" if work.commits else "") + "."
    last = _conclusion(episodes_[-1]) if len(episodes_) > 1 else ""
    if last:
        p3 += f" Ended: {wording.first_sentence(last, 140)}"
    p4 = " · ".join([*work.commits, *top]) if (work.commits or top) else ""
    return Draft(digests[0].ordinal, digests[-1].ordinal, title, p1, p2, p3, p4,
                 _importance(work, rules, bool(prompts)), _types(" ".join(prompts), work))


def _escape(text: str, attr: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if attr else text


def render_output(drafts: Sequence[Draft], facts: Sequence[tuple[str, str]], start: int, end: int) -> str:
    """The historian `<output>` document for `drafts` covering `start..end`."""
    out = ["<output>", "<compartments>"]
    for d in drafts:
        out.append(f'<compartment start="{d.start}" end="{d.end}" title="{_escape(d.title, True)}" '
                   f'episode_type="{d.episode_type}" importance="{d.importance}">')
        out += [f"<p{n}>{_escape(text)}</p{n}>" for n, text in enumerate((d.p1, d.p2, d.p3, d.p4), 1)]
        out.append("</compartment>")
    out.append("</compartments>")
    if facts:
        out.append("<facts>")
        for category in dict.fromkeys(c for c, _ in facts):
            out += [f"<{category}>", *(f"* {_escape(t)}" for c, t in facts if c == category), f"</{category}>"]
        out.append("</facts>")
    out += ["<meta>", f"<messages_processed>{start}-{end}</messages_processed>",
            f"<unprocessed_from>{end + 1}</unprocessed_from>", "</meta>", "</output>"]
    return "\n".join(out)


def extractive_output(chunk: Chunk, spans: Sequence[boundary.Span] | None = None, target: int = TARGET_TOKENS) -> str:
    """The extractive historian's answer for `chunk` (deterministic)."""
    if chunk.empty:
        return render_output([], [], chunk.start, chunk.end)
    spans = chunk.arcs if spans is None else spans
    drafts, facts = [], []
    for episodes_ in group(chunk.digests, spans, target):
        rules = [r for ep in episodes_ for d in ep if d.prompt for r in wording.find_rules(d.text)]
        facts += [("PROJECT_RULES", r) for r in rules if ("PROJECT_RULES", r) not in facts]
        drafts.append(summarize(episodes_, len(rules)))
    return render_output(drafts, facts, chunk.start, chunk.end)


class ExtractiveProvider:
    """A `Provider` that answers from the chunk it was built for (see the module docstring)."""

    name = NAME
    model = MODEL

    def __init__(self, chunk: Chunk, *, target: int = TARGET_TOKENS) -> None:
        self.chunk = chunk
        self.target = target

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        started = time.monotonic()
        text = extractive_output(self.chunk, target=self.target)
        return Completion(text=text, provider=NAME, model=MODEL, usage=None,
                          ms=round((time.monotonic() - started) * 1000))


__all__ = [
    "MODEL",
    "NAME",
    "TARGET_TOKENS",
    "Draft",
    "ExtractiveProvider",
    "episodes",
    "extractive_output",
    "group",
    "render_output",
    "summarize",
]
