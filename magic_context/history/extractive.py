"""The extractive historian: deterministic compartments from the raw history's structure, no model at all.

It is the offline default and the last fallback of every chain, so it has to be useful on its own and
must answer validly for any chunk. From the chunk's digests (`chunk.Digest`):

* episodes are cut at the prompts a person typed; a long autonomous run (few or no prompts) is cut into
  steps at natural boundaries; both are merged into compartments of about `TARGET_TOKENS` of rendered
  chunk text (`episodes`);
* per compartment: a title (the request's gist, else the agent's own words, else what was done — never
  empty); p1 piece by piece — the person's words verbatim (clipped when long), files read and edited (a
  shell `sed -i`, `cat >` or `tee` on a project file counts as an edit),
  commands run (failures marked), commits, errors, and the assistant's closing words; p2 condensed; p3
  one or two sentences; p4 anchors only (commits, paths);
* importance from what happened (commits and edits above browsing; a stated rule raises it), and an
  episode_type from the activity;
* facts only where a person states a rule plainly ("always …", "never …", "don't …", "use X for Y",
  "X must never …").

Compartments tile the chunk by construction (first starts at the chunk start, each starts after the
previous one, the last ends at the chunk end). `ExtractiveProvider` still validates its own answer and,
should it fail (or raise), answers with `coarse_output` — the chunk's own lines grouped into
compartments, valid by construction — and records why in `degraded`, so a run always makes progress.

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

from magic_context.history import boundary, files, wording
from magic_context.history.chunk import Chunk, ChunkLine, Digest, clip, one_line
from magic_context.history.episodes import episodes, group
from magic_context.history.validate import validate_historian_output
from magic_context.llm.base import Completion
from magic_context.records import record
from magic_context.wire import model as m

NAME = "extractive"
MODEL = "extractive-v1"
TARGET_TOKENS = 1_500
PROMPT_CHARS = 300
CONCLUSION_CHARS = 260
FINDING_WORDS = 4
MAX_COMMANDS = 6
MAX_ERRORS = 3
COARSE_LINE_CHARS = 400
TITLE_TEXTS = 6
P1_FILE_CHARS = 200
P2_FILE_CHARS = 160
P3_FILE_CHARS = 90
P4_FILE_CHARS = 140
"""Character budgets of each tier's file list (two-part paths, `files.listing`): ~50, 40, 25 and 35 tokens."""

_INSPECT_COMMAND = re.compile(r"^(?:grep|rg|find|ls|cat|head|tail|wc|sed -n|awk|tree|file|stat|which|git "
                              r"(?:status|diff|log|show))\b")
_TRIVIAL_COMMAND = re.compile(r"^(?:sleep|date|pwd|echo|true|clear|whoami)\b")
_DOC_EXT = (".md", ".mdx", ".rst", ".txt", ".adoc")
_FILE = r"([\w.-]*[./][\w./-]*)(?=$|[\s;&|])"
_SHELL_WRITE = re.compile(r"(?:^|[;&|]\s*)(?:sed\s+-i\S*\s+(?:''\s+)?(?:'[^']*'|\"[^\"]*\"|[^\s'\"]+)\s+" + _FILE
                          + r"|cat\s+(?:<<-?\s*['\"]?\w+['\"]?\s+)?>\s*" + _FILE + r"|tee\s+" + _FILE + ")")
_INFRA_HINT = re.compile(r"(?i)(?:\bnpm (?:install|ci)\b|\bpip install\b|\bdocker|makefile|\.github/|\bworkflows?\b|"
                         r"tsconfig|package\.json|pyproject|\.ya?ml\b|dockerfile)")
_RELEASE_HINT = re.compile(r"(?i)\b(?:release|publish|version:|npm version|git tag|changelog|bump)\b")
_BUG_HINT = re.compile(r"(?i)\b(?:fix|bug|crash|broken|error|wrong|explod\w*|fail\w*|doesn'?t work|not working|"
                       r"issue|regression|fucked|artifacts?)\b")
_REFACTOR_HINT = re.compile(r"(?i)\b(?:refactor|rename|port|move|clean ?up|remove|simplify|extract|migrate)\b")
_DESIGN_HINT = re.compile(r"(?i)(?:how (?:can|should|do) we|should we|do we need|design|tokens?\b|approach|"
                          r"what if|could we)")


@record
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


def _conclusion(episode: Sequence[Digest]) -> str:
    """The assistant's closing words: its last substantial finding — a text without the next step it announces
    at its end ("It's not exported as a type. Let me fix by using the inline type:" gives its first sentence,
    `wording.finding`; a finding cut that way counts from `FINDING_WORDS` words, any other text from 30
    characters); a text that only announces counts only when nothing else was said."""
    texts = [t for t in (wording.tidy(d.text) for d in episode if d.role == m.ASSISTANT and d.text) if t]
    if not texts:
        return ""
    found = [(f, f != t) for f, t in ((wording.finding(t), t) for t in texts)]
    best = next((f for f, cut in reversed(found) if len(f) >= 30 or (cut and len(f.split()) >= FINDING_WORDS)),
                next((t for t in reversed(texts) if len(t) >= 30), texts[-1]))
    return clip(best, CONCLUSION_CHARS)


def _shell_write(command: str) -> str | None:
    """The project file a shell command writes (`sed -i … f`, `cat > f`, `tee f`); scratch files in /tmp
    are no project edits. Shell-only agents (mini-swe-agent, SWE-agent) edit files this way."""
    match = _SHELL_WRITE.search(command)
    path = next((g for g in match.groups() if g), None) if match else None
    return path if path and not path.startswith(("/tmp/", "/dev/")) else None


def _short_command(command: str) -> str:
    """A command without its output plumbing (`2>&1`, `| head`, `| tail`, `| grep`)."""
    command = re.sub(r"\s*2>&1", "", command)
    command = re.sub(r"\s*\|\s*(?:head|tail|grep|wc|less|cat)\b.*$", "", command)
    return one_line(command, 70)


@record
class _Work:
    """What a stretch of digests did."""

    reads: list[str]
    edits: Counter[str]
    commands: list[str]
    errors: list[str]
    commits: list[str]
    searches: int
    notes: list[str]
    named: list[str]  # other files named: typed by the person, operands of commands, then named by the agent

    @classmethod
    def of(cls, digests: Sequence[Digest]) -> _Work:
        reads: list[str] = []
        edits: Counter[str] = Counter()
        commands: list[str] = []
        errors: list[str] = []
        commits: list[str] = []
        searches = 0
        notes: list[str] = []
        typed: list[str] = []
        operands: list[str] = []
        said: list[str] = []
        for d in digests:
            if d.prompt:
                typed += files.text_paths(d.text)
            elif d.role == m.ASSISTANT:
                said += files.text_paths(d.text)
            commits += [c for c in d.commits if c not in commits]
            if d.note:
                notes.append(d.note)
            for use in d.tools:
                operands += use.named
                written = _shell_write(use.command) if use.command else None
                if written:
                    edits[written] += 1
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
        acted = {files.short(p) for p in (*edits, *reads)}
        named = [p for p in dict.fromkeys((*typed, *operands, *said))  # `./x.js` alone says too little
                 if "/" in files.short(p) and files.short(p) not in acted]
        return cls(reads, edits, commands, errors, commits, searches, notes, named)

    def by_weight(self) -> list[str]:
        """Every file this work names: edited (most edited first), read, then the others named."""
        return [*(p for p, _ in self.edits.most_common()), *self.reads, *self.named]

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
        named = files.listing(self.named, P1_FILE_CHARS, "; ".join(parts))
        if named:
            parts.append("files " + named)
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
        pieces.append(f'U: "{wording.quote(head.text, PROMPT_CHARS)}"')
    work = _Work.of(episode).sentence()
    commands = [d.note for d in episode if d.note.startswith("!")]
    others = [d.note for d in episode if d.note and not d.note.startswith("!")]
    if commands:
        pieces.append("user ran " + ", ".join(commands[:3]))
    pieces += others[:2]
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
    """(the request that weighs most, the title: its gist). Weight: the request's length in words (up to 25;
    pasted material counts 5) plus the work it led to (up to 15)."""
    asks = [(ep[0].text, _Work.of(ep).score()) for ep in episodes_ if ep[0].prompt and not wording.trivial(ep[0].text)]
    if asks:
        best = max(asks, key=lambda a: (5 if wording.pasted(a[0]) else min(len(a[0].split()), 25)) + min(a[1], 15))[0]
        return best, wording.gist(best)
    if all(d.role == m.SYSTEM for d in digests):
        return None, "System prompt"
    said = _agent_title(digests)
    if said and wording.sentence_score(said) > 0:  # the agent named its goal ("I'll add pre_save to …")
        return None, said
    top = [p for p, _ in work.edits.most_common(2)]
    if top:
        return None, "Continued: edits to " + ", ".join(files.short(p) for p in top)
    return None, said or _work_title(work) or f"Messages {digests[0].ordinal}-{digests[-1].ordinal}"


def _agent_title(digests: Sequence[Digest]) -> str:
    """The gist of the agent's own words where no person asked: its best-scoring sentence among the first
    few things it said (a lead-in such as "Let me look at X:" counts when nothing better is there)."""
    texts = [d.text for d in digests if d.role == m.ASSISTANT and d.text][:TITLE_TEXTS]
    found = [g for g in (wording.gist(wording.tidy(t) or wording.plain(t)) for t in texts) if g.strip(" .…")]
    return max(found, key=lambda g: (wording.sentence_score(g) + (len(g.split()) >= 6), -found.index(g))) \
        if found else ""


def _work_title(work: _Work) -> str:
    if work.commands:
        return "Ran " + work.commands[0] + (f" (+{len(work.commands) - 1} more)" if len(work.commands) > 1 else "")
    if work.reads:
        return "Read " + ", ".join(files.short(p) for p in work.reads[:3])
    return "Tool activity" if work.searches or work.errors else ""


def _outcome(work: _Work) -> str:
    """p3's account of the work, naming its files in their two-part form within `P3_FILE_CHARS`."""
    if work.edits:
        edited = files.listing([p for p, _ in work.edits.most_common()], P3_FILE_CHARS)
        also = files.listing([*work.reads, *work.named], P3_FILE_CHARS // 2)
        return f"edited {len(work.edits)} file{'s' if len(work.edits) != 1 else ''} ({edited})" + \
            (f"; looked at {also}" if also else "")
    others = files.listing([*work.reads, *work.named], P3_FILE_CHARS)
    if work.commands:
        return f"ran {len(work.commands)} command{'s' if len(work.commands) != 1 else ''}" + \
            (f" on {others}" if others else "")
    return f"investigated {others}" if others else "discussion"


def _follow_ups(episodes_: Sequence[list[Digest]], first: str, count: int) -> str:
    """` (+N other prompts: a; b; c)` naming, in order, the three others that led to the most work."""
    if count <= 0:
        return ""
    asks = [(i, _Work.of(ep).score(), ep[0].text) for i, ep in enumerate(episodes_)
            if ep[0].prompt and ep[0].text != first and not wording.trivial(ep[0].text)]
    named = sorted(sorted(asks, key=lambda a: -a[1])[:3])
    names = "; ".join(wording.gist(text, 50) for _, _, text in named)
    return f" (+{count} other prompt{'s' if count > 1 else ''}" + (f": {names})" if names else ")")


def record_lines(pieces: Sequence[Sequence[Digest]]) -> str:
    """p1's record: one line per piece (episode or step) — the person's words, the work, the closing words."""
    return "\n".join(line for line in (_episode_line(piece) for piece in pieces if piece) if line)


def _anchors(work: _Work) -> str:
    named = files.listing(work.by_weight(), P4_FILE_CHARS)
    return " · ".join([*work.commits, *([named] if named else [])])


def anchors(digests: Sequence[Digest]) -> str:
    """p4: the commits, then the files (two-part paths within `P4_FILE_CHARS`) of a stretch of digests."""
    return _anchors(_Work.of(digests))


def pieces(chunk: Chunk, target: int = TARGET_TOKENS) -> list[list[Digest]]:
    """The episodes and steps `group` cuts the chunk into, in order (clipped to a compartment's range, they are
    its record: for one of the extractive historian's own compartments, exactly its pieces)."""
    return [piece for grouped in group(chunk.digests, chunk.arcs, target) for piece in grouped]


def summarize(episodes_: Sequence[list[Digest]], rules: int = 0) -> Draft:
    """One compartment from its episodes."""
    digests = [d for ep in episodes_ for d in ep]
    prompts = [d.text for d in digests if d.prompt]
    work = _Work.of(digests)
    request, title = _title(episodes_, digests, work)
    p1 = record_lines(episodes_) or title
    conclusion = next((c for c in (_conclusion(ep) for ep in reversed(episodes_)) if c), "")
    p2_parts = []
    if request:
        p2_parts.append(f'U: "{wording.quote(request, 160)}"'
                        + _follow_ups(episodes_, request, len(prompts) - 1))
    if work.edits:
        p2_parts.append("Edited " + ", ".join(list(work.edits)[:8]) + (" …" if len(work.edits) > 8 else ""))
    elif work.reads:
        p2_parts.append("Read " + ", ".join(work.reads[:6]) + (" …" if len(work.reads) > 6 else ""))
    more = files.listing(work.by_weight(), P2_FILE_CHARS, ". ".join(p2_parts))
    if more:
        p2_parts.append("Files " + more)
    if work.commits:
        p2_parts.append("Commits " + " ".join(work.commits))
    outcome_line = wording.first_sentence(conclusion)
    if outcome_line:
        p2_parts.append("Outcome: " + outcome_line)
    p2 = ". ".join(p2_parts) or p1
    outcome = _outcome(work)
    p3 = f"{title}: {outcome}" + (f"; committed {' '.join(work.commits)}" if work.commits else "") + "."
    last = wording.first_sentence(_conclusion(episodes_[-1]), 140) if len(episodes_) > 1 else ""
    if last:
        p3 += f" Ended: {last}"
    p4 = _anchors(work)
    return Draft(digests[0].ordinal, digests[-1].ordinal, title, p1, p2, p3, p4,
                 _importance(work, rules, bool(prompts)), _types(" ".join(prompts), work))


def _escape(text: str, attr: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if attr else text


def render_output(drafts: Sequence[Draft], facts: Sequence[tuple[str, str]], start: int, end: int, *,
                  lean: bool = False) -> str:
    """The historian `<output>` document for `drafts` covering `start..end`. `lean`: only the tiers a model is
    asked for (p2, p3): the answer `ExtractiveProvider` gives, whose p1 and p4 `tiers.fill` adds from the chunk."""
    out = ["<output>", "<compartments>"]
    for d in drafts:
        out.append(f'<compartment start="{d.start}" end="{d.end}" title="{_escape(d.title, True)}" '
                   f'episode_type="{d.episode_type}" importance="{d.importance}">')
        tiers = ((2, d.p2), (3, d.p3)) if lean else enumerate((d.p1, d.p2, d.p3, d.p4), 1)
        out += [f"<p{n}>{_escape(text)}</p{n}>" for n, text in tiers]
        out.append("</compartment>")
    out.append("</compartments>")
    if facts:
        out.append("<facts>")
        for category in dict.fromkeys(c for c, _ in facts):
            out += [f"<{category}>", *(f"* {_escape(t)}" for c, t in facts if c == category), f"</{category}>"]
        out.append("</facts>")
    # No <meta>: the compartments tile `start..end`, and an answer that covers its chunk needs none (a model
    # historian is asked for it only when it stops early; each is ~27 output tokens).
    out.append("</output>")
    return "\n".join(out)


def _tile(drafts: list[Draft], start: int, end: int) -> list[Draft]:
    """Drafts made contiguous over `start..end` (holes in the ordinals join the compartment before them),
    each with a title and a p1."""
    for i, d in enumerate(drafts):
        d.start = start if i == 0 else drafts[i - 1].end + 1
        d.end = end if i == len(drafts) - 1 else d.end
        d.title = d.title.strip() or f"Messages {d.start}-{d.end}"
        d.p1 = d.p1 if d.p1.strip() else d.title
    return drafts


def extractive_output(chunk: Chunk, spans: Sequence[boundary.Span] | None = None, target: int = TARGET_TOKENS, *,
                      lean: bool = False) -> str:
    """The extractive historian's answer for `chunk` (deterministic); `lean` as in `render_output`."""
    if chunk.empty:
        return render_output([], [], chunk.start, chunk.end)
    spans = chunk.arcs if spans is None else spans
    drafts, facts = [], []
    for episodes_ in group(chunk.digests, spans, target):
        rules = [r for ep in episodes_ for d in ep if d.prompt for r in wording.find_rules(d.text)]
        facts += [("PROJECT_RULES", r) for r in rules if ("PROJECT_RULES", r) not in facts]
        drafts.append(summarize(episodes_, len(rules)))
    return render_output(_tile(drafts, chunk.start, chunk.end), facts, chunk.start, chunk.end, lean=lean)


def coarse_output(chunk: Chunk, target: int = TARGET_TOKENS) -> str:
    """A cut valid by construction, for when the detailed answer fails: the chunk's own rendered lines
    (already arc-safe) grouped into compartments of about `target` tokens, tiling the chunk."""
    groups: list[list[ChunkLine]] = []
    used = 0
    for line in chunk.lines:
        if not groups or (used >= target and line.start > groups[-1][-1].end):
            groups.append([])
            used = 0
        groups[-1].append(line)
        used += len(line.text) // 4 + 1
    drafts = []
    for lines in groups or [[]]:
        last = lines[-1].end if lines else chunk.end
        p1 = "\n".join(clip(" ".join(line.text.split()), COARSE_LINE_CHARS) for line in lines)
        asked = next((line.text.split("U:", 1)[-1] for line in lines if line.role == "U"), "")
        title = wording.gist(asked) if asked.strip() else ""
        drafts.append(Draft(0, last, title, p1, p1, p1, "", 20, "investigation"))
    drafts = [d for i, d in enumerate(drafts) if i == len(drafts) - 1 or d.end < drafts[i + 1].end]
    return render_output(_tile(drafts, chunk.start, chunk.end), [], chunk.start, chunk.end)


def check_output(text: str, chunk: Chunk) -> None:
    """Raise `HistorianValidationError` when `text` is no valid answer for `chunk` (the runner's own rules)."""
    validate_historian_output(text, chunk.start, chunk.end, tool_only=chunk.tool_only, tool_arcs=chunk.arcs,
                              emergency=True)


class ExtractiveProvider:
    """A `Provider` that answers from the chunk it was built for (see the module docstring).

    `degraded` says why the last answer is the coarse cut (None: the detailed answer validated)."""

    name = NAME
    model = MODEL

    def __init__(self, chunk: Chunk, *, target: int = TARGET_TOKENS) -> None:
        self.chunk = chunk
        self.target = target
        self.degraded: str | None = None

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        started = time.monotonic()
        self.degraded = None
        try:
            text = extractive_output(self.chunk, target=self.target, lean=True)
            if not self.chunk.empty:
                check_output(text, self.chunk)
        except Exception as exc:  # the last fallback of every chain must answer: fall back to the coarse cut
            self.degraded = f"{type(exc).__name__}: {exc}"
            text = coarse_output(self.chunk, self.target)
        return Completion(text=text, provider=NAME, model=MODEL, usage=None,
                          ms=round((time.monotonic() - started) * 1000))


__all__ = [
    "MODEL",
    "NAME",
    "TARGET_TOKENS",
    "Draft",
    "ExtractiveProvider",
    "anchors",
    "check_output",
    "coarse_output",
    "episodes",
    "extractive_output",
    "group",
    "pieces",
    "record_lines",
    "render_output",
    "summarize",
]
