"""The historian's view of raw history: per-message digests and the compact chunk text (reference §4.1).

A `Digest` is one raw message reduced to what a summary needs: the person's words, the assistant's
text, each tool call with its key argument and a one-line outcome, commits, errors. `build_chunk`
renders a contiguous ordinal range as lines a model reads cheaply:

    [12] U: fix the footer colours
    [13-20] A: commits: 45ffe0a / Let me check the footer. / TC: read(src/footer.ts) / TC: bash(npm test) ✗ 2 failed

An assistant run is one block (split every ~`BLOCK_SPLIT_TOKENS` at an assistant message, never inside
a tool arc); parts are joined by ` / `; at most `MAX_COMMITS_PER_BLOCK` commits lead a block. The same
digests feed the extractive historian, so both producers see one structure. Stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from magic_context import tokens as tok
from magic_context.history import boundary, files
from magic_context.history.commits import MAX_COMMITS_PER_BLOCK, extract_commits
from magic_context.lazyre import lazy
from magic_context.records import Factory, record
from magic_context.wire import model as m
from magic_context.wire.arcs import find_arcs

BLOCK_SPLIT_TOKENS = 1200
USER_TEXT_CHARS = 1500
ASSISTANT_TEXT_CHARS = 500
KEY_ARG_CHARS = 100
OUTCOME_CHARS = 100
DEFAULT_HISTORIAN_CONTEXT = 128_000

_PATH_KEYS = ("path", "file_path", "filePath", "filepath", "file", "notebook_path", "filename")
_KEY_ORDER = (*_PATH_KEYS, "command", "cmd", "pattern", "query", "url", "glob", "description", "prompt", "name")
_READ = {"read", "view", "cat", "read_file", "readfile", "open"}
_EDIT = {"edit", "multiedit", "str_replace", "str_replace_editor", "patch", "apply_patch", "notebookedit",
         "replace", "edit_file"}
_WRITE = {"write", "create", "write_file", "create_file"}
_RUN = {"bash", "shell", "exec", "run", "run_command", "terminal", "execute", "command"}
_SEARCH = {"grep", "glob", "search", "find", "ls", "list", "rg", "codesearch", "websearch"}
_SYSTEM_REMINDER = lazy(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_TAG_PREFIX = lazy(r"§\d+§ ?")
_WS = lazy(r"[ \t]+")
_BLANK_LINES = lazy(r"\n\s*\n+")
_CD_PREFIX = lazy(r"^\s*cd\s+\S+\s*&&\s*")
_NOISE_LINE = lazy(r"^(?:debugger attached\.?|waiting for the debugger.*|\s*>.*|npm warn.*)$", re.I)
_HARNESS_FEEDBACK = lazy(r"\s*(?:Tool call error:|Please always provide EXACTLY ONE action|"
                         r"The last command <command>)")
_RETURN_CODE = lazy(r"^\s*<returncode>(-?\d+)</returncode>")
_WRAPPER_LINE = lazy(r"^(?:<returncode>-?\d+</returncode>|</?output>|<warning>|</warning>)$")
_ERROR_WORD = lazy(r"(?i)(?:error|failed|failure|fatal|exception|traceback|cannot|not found|denied)")


@record
class ToolUse:
    """One tool call with its outcome. `action`: read, edit, write, run, search or other."""

    name: str
    key_arg: str
    action: str
    path: str | None = None
    command: str | None = None
    named: list[str] = Factory(factory=list)  # files the whole command names as operands (`files.command_paths`)
    error: bool = False
    answered: bool = False
    outcome: str = ""


@record
class Digest:
    """One raw message as the historian sees it. `prompt`: words a person typed (starts an episode)."""

    ordinal: int
    message_id: str
    role: str
    prompt: bool = False
    text: str = ""
    note: str = ""  # a non-prompt user line: a `!command`, an injected message, the harness's own summary
    tools: list[ToolUse] = Factory(factory=list)
    commits: list[str] = Factory(factory=list)
    tokens: int = 0
    created_at: int | None = None
    rendered: int = 0  # tokens of this message's share of the chunk text (set by `build_chunk`)

    @property
    def narrative(self) -> bool:
        """Whether the message carries words (not only tool calls/results)."""
        return bool(self.text or self.note)


@record
class ChunkLine:
    start: int
    end: int
    role: str  # "U" or "A"
    text: str
    commits: list[str] = Factory(factory=list)


@record
class Chunk:
    """A rendered ordinal range. `arcs` are completed (call, result) ordinal pairs inside it."""

    start: int
    end: int
    digests: list[Digest]
    lines: list[ChunkLine]
    text: str
    tokens: int
    raw_tokens: int
    tool_only: frozenset[int]
    arcs: tuple[tuple[int, int], ...]
    has_more: bool
    commit_clusters: int
    oversize: bool = False

    @property
    def empty(self) -> bool:
        return not self.digests

    def message_id(self, ordinal: int) -> str | None:
        return next((d.message_id for d in self.digests if d.ordinal == ordinal), None)

    def times(self, start: int, end: int) -> tuple[int | None, int | None]:
        """Earliest and latest message time within `start..end` (None when unknown)."""
        stamps = [d.created_at for d in self.digests if start <= d.ordinal <= end and d.created_at is not None]
        return (min(stamps), max(stamps)) if stamps else (None, None)


def chunk_budget(historian_context: int | None = None) -> int:
    """clamp(round(historian_context × 0.25), 8 000, 50 000); the context defaults to 128K."""
    context = historian_context or DEFAULT_HISTORIAN_CONTEXT
    return max(8_000, min(50_000, round(context * 0.25)))


def clip(text: str, limit: int) -> str:
    """`text` cut at a word boundary near `limit` characters, with `…` when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.6 else cut).rstrip(" ,;:") + "…"


def clean_text(text: str) -> str:
    """Text without system reminders, mc tag prefixes, trailing spaces or runs of blank lines."""
    text = _SYSTEM_REMINDER.sub("", text)
    text = _TAG_PREFIX.sub("", text)
    text = _WS.sub(" ", text)
    return _BLANK_LINES.sub("\n", text).strip()


def one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)


def _action(name: str) -> str:
    low = name.lower().rsplit("__", 1)[-1]
    for action, names in (("read", _READ), ("edit", _EDIT), ("write", _WRITE), ("run", _RUN), ("search", _SEARCH)):
        if low in names:
            return action
    return "other"


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path


def tool_use(block: m.Block, root: str | None = None) -> ToolUse:
    """The call's name, key argument (path, command, pattern, url…) and action class."""
    name = block.tool_name or "tool"
    args = block.input if isinstance(block.input, dict) else {}
    action = _action(name)
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)
    path = _relative(path.strip(), root) if path else None
    command = args.get("command") if isinstance(args.get("command"), str) else args.get("cmd")
    command = command if isinstance(command, str) and command.strip() else None
    named = files.command_paths(command) if command is not None else []
    if named and root:
        named = list(dict.fromkeys(_relative(p, root) for p in named))
    if command is not None:
        command = _CD_PREFIX.sub("", command.strip().splitlines()[0] if command.strip() else command)
        if root:
            command = command.replace(root.rstrip("/") + "/", "")
        action = "run" if action == "other" else action
    key = path or command
    if key is None:
        key = next((args[k] for k in _KEY_ORDER if isinstance(args.get(k), str) and args[k].strip()), None)
    if key is None:
        key = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
    if key is None:
        key = ""
    if action == "search" and path and isinstance(args.get("pattern"), str):
        key = f"{args['pattern']} in {path}"
    return ToolUse(name=name, key_arg=one_line(key, KEY_ARG_CHARS), action=action, path=path, command=command,
                   named=named)


def _outcome(use: ToolUse, result: m.Block) -> None:
    use.answered = True
    text = result.text or ""
    code = _RETURN_CODE.search(text[:200])  # mini-swe-agent: <returncode>N</returncode><output>…</output>
    use.error = use.error or result.is_error or (code is not None and code.group(1) != "0")
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not _NOISE_LINE.match(line.strip()) and not _WRAPPER_LINE.match(line.strip())]
    if use.error:
        telling = next((line for line in lines if _ERROR_WORD.search(line)), lines[0] if lines else "failed")
        if telling.startswith("Traceback"):  # the exception itself is the traceback's last line
            telling = next(line for line in reversed(lines) if _ERROR_WORD.search(line))
        use.outcome = one_line(telling, OUTCOME_CHARS)
    elif use.action == "run" and lines and lines[-1] != "(no output)":
        use.outcome = one_line(lines[-1], 60)


def is_prompt(msg: m.Message) -> bool:
    """A user message a person typed: not synthetic, not a harness summary, not an agent harness's own
    feedback (mini-swe-agent's "Tool call error: …"), with visible words."""
    if msg.role != m.USER or msg.synthetic or msg.compaction:
        return False
    return any(b.kind == m.TEXT and not b.synthetic and not (b.meta and "command" in b.meta)
               and _has_words(b.text) and not _HARNESS_FEEDBACK.match(b.text) for b in msg.blocks)


def _has_words(text: str) -> bool:
    """`bool(clean_text(text))` without the regexes when there is no reminder or tag to remove."""
    if "<system-reminder>" in text or "§" in text:
        return bool(clean_text(text))
    return bool(text.strip())


def digest_messages(messages: Sequence[m.Message], sizes: Sequence[int] | None = None,
                    root: str | None = None) -> tuple[list[Digest], list[tuple[int, int | None]]]:
    """Digests of canonical messages (ordinals set) and their tool arcs as (call, result|None) ordinals.

    Decode a contiguous range at once so results pair with their calls. `root` (the project
    directory) is stripped from paths and commands.
    """
    digests: list[Digest] = []
    uses: dict[tuple[int, int], ToolUse] = {}
    for index, msg in enumerate(messages):
        d = Digest(msg.ordinal, msg.id, msg.role, created_at=msg.created_at,
                   tokens=sizes[index] if sizes is not None else 0)
        texts: list[str] = []
        for bi, block in enumerate(msg.blocks):
            if block.kind == m.TEXT and block.text:
                if block.meta and "command" in block.meta:  # a user's own `!command` (Pi bashExecution)
                    d.note = f"!{one_line(str(block.meta.get('command') or ''), KEY_ARG_CHARS)}"
                    d.commits += extract_commits(block.text)
                else:
                    texts.append(clean_text(block.text))
            elif block.kind == m.TOOL_CALL:
                use = tool_use(block, root)
                uses[index, bi] = use
                d.tools.append(use)
            elif block.kind == m.TOOL_RESULT:
                d.commits += extract_commits(block.text or "")
        text = "\n".join(t for t in texts if t)
        if text.lstrip().startswith(("<session-history", "<session-history-since")):
            text = ""  # mc's own head, should a harness have stored it
        if msg.role == m.USER and text and not is_prompt(msg):
            label = "earlier summary" if msg.compaction else "injected"
            d.note, text = f"({label}) {one_line(text, 400)}", ""
        d.prompt = msg.role == m.USER and bool(text) and is_prompt(msg)
        d.text = text if msg.role in (m.USER, m.ASSISTANT) else ""
        for use in d.tools:
            if use.command:
                d.commits += extract_commits(use.command)
        d.commits += extract_commits(d.text) if msg.role == m.ASSISTANT else []
        d.commits = list(dict.fromkeys(d.commits))
        digests.append(d)
    spans: list[tuple[int, int | None]] = []
    for arc in find_arcs(list(messages)):
        if arc.call is None:
            continue
        called = uses.get(arc.call)
        for mi, bi in arc.results:
            if called is not None:
                _outcome(called, messages[mi].blocks[bi])
        result = max((messages[mi].ordinal for mi, _ in arc.results), default=None)
        spans.append((messages[arc.call[0]].ordinal, result))
    return digests, spans


def commit_clusters(digests: Iterable[Digest]) -> int:
    """Runs of work containing commits, separated by prompts (distinct committed phases)."""
    clusters, current = 0, False
    for d in digests:
        if d.prompt:
            clusters += current
            current = False
        current = current or bool(d.commits)
    return clusters + current


def message_commits(msg: m.Message) -> list[str]:
    """Commits a message mentions (its text, tool outputs and tool-call commands), without a full digest."""
    found: list[str] = []
    for block in msg.blocks:
        if block.kind == m.TOOL_CALL and isinstance(block.input, dict):
            command = block.input.get("command") or block.input.get("cmd")
            found += extract_commits(command) if isinstance(command, str) else []
        elif block.kind == m.TOOL_RESULT or (block.kind == m.TEXT and msg.role != m.USER) \
                or (block.kind == m.TEXT and block.meta and "command" in block.meta):
            found += extract_commits(block.text or "")
    return found


def commit_clusters_of(messages: Iterable[m.Message]) -> int:
    """`commit_clusters` straight from canonical messages (cheap enough for the transform pass)."""
    clusters, current = 0, False
    for msg in messages:
        if is_prompt(msg):
            clusters += current
            current = False
        current = current or bool(message_commits(msg))
    return clusters + current


def _tool_part(use: ToolUse, repeat: int) -> str:
    part = f"TC: {use.name}({use.key_arg})" if use.key_arg else f"TC: {use.name}"
    if repeat > 1:
        part += f" ×{repeat}"
    if use.error:
        part += f" ✗ {use.outcome}"
    elif use.outcome:
        part += f" → {use.outcome}"
    return part


def _assistant_parts(run: Sequence[Digest]) -> list[str]:
    parts: list[str] = []
    last: tuple[str, str, bool, str] | None = None
    count = 0
    pending: ToolUse | None = None
    for d in run:
        if d.note:
            parts.append(f"U: {d.note}")
        if d.text and d.role == m.ASSISTANT:
            if pending is not None:
                parts.append(_tool_part(pending, count))
                pending, last = None, None
            parts.append(one_line(d.text, ASSISTANT_TEXT_CHARS))
        for use in d.tools:
            key = (use.name, use.key_arg, use.error, use.outcome)
            if key == last:
                count += 1
                continue
            if pending is not None:
                parts.append(_tool_part(pending, count))
            pending, last, count = use, key, 1
    if pending is not None:
        parts.append(_tool_part(pending, count))
    return parts


def _block_line(run: Sequence[Digest]) -> ChunkLine:
    commits = list(dict.fromkeys(c for d in run for c in d.commits))[:MAX_COMMITS_PER_BLOCK]
    parts = _assistant_parts(run)
    if commits:
        parts.insert(0, "commits: " + " ".join(commits))
    start, end = run[0].ordinal, run[-1].ordinal
    label = f"[{start}]" if start == end else f"[{start}-{end}]"
    return ChunkLine(start, end, "A", f"{label} A: " + (" / ".join(parts) if parts else "(tool activity)"), commits)


def render_lines(digests: Sequence[Digest], arcs: Iterable[tuple[int, int | None]] = ()) -> list[ChunkLine]:
    """`[N] U: …` for prompts, `[N-M] A: …` for the work between them (split at arc-safe points)."""
    unsafe = boundary.unsafe_cuts(arcs)
    lines: list[ChunkLine] = []
    run: list[Digest] = []
    run_tokens = 0
    for d in digests:
        if d.prompt:
            if run:
                lines.append(_block_line(run))
                run, run_tokens = [], 0
            lines.append(ChunkLine(d.ordinal, d.ordinal, "U", f"[{d.ordinal}] U: {clip(d.text, USER_TEXT_CHARS)}"))
            continue
        if run and run_tokens >= BLOCK_SPLIT_TOKENS and d.role == m.ASSISTANT and run[-1].ordinal not in unsafe:
            lines.append(_block_line(run))
            run, run_tokens = [], 0
        run.append(d)
        run_tokens += tok.estimate(" ".join(_assistant_parts([d])))
    if run:
        lines.append(_block_line(run))
    return lines


def build_chunk(digests: Sequence[Digest], arcs: Sequence[tuple[int, int | None]], *, start: int, end: int,
                budget: int) -> Chunk:
    """The chunk for `start..end`, cut to `budget` rendered tokens without splitting a completed arc.

    When the first atomic unit alone is larger than the budget it is admitted whole (`oversize`).
    """
    window = [d for d in digests if start <= d.ordinal <= end]
    completed = [(c, r) for c, r in arcs if r is not None]
    for d in window:
        d.rendered = tok.estimate(clip(d.text, USER_TEXT_CHARS) if d.prompt else " / ".join(_assistant_parts([d]))) + 8
    sizes = [(d.ordinal, d.rendered) for d in window]
    cap_end = boundary.apply_head_cap(sizes, completed, start, end, budget) if window else end
    chosen = [d for d in window if d.ordinal <= cap_end]
    inside = [(c, r) for c, r in completed if start <= c and r <= cap_end]
    lines = render_lines(chosen, arcs)
    text = "\n".join(line.text for line in lines)
    real_end = chosen[-1].ordinal if chosen else start - 1
    rendered = tok.estimate(text) if text else 0
    return Chunk(
        start=start, end=real_end, digests=chosen, lines=lines, text=text, tokens=rendered,
        raw_tokens=sum(d.tokens for d in chosen),
        tool_only=frozenset(d.ordinal for d in chosen if not d.narrative),
        arcs=tuple(inside), has_more=real_end < end, commit_clusters=commit_clusters(chosen),
        oversize=rendered > budget,
    )


__all__ = [
    "BLOCK_SPLIT_TOKENS",
    "MAX_COMMITS_PER_BLOCK",
    "Chunk",
    "ChunkLine",
    "Digest",
    "ToolUse",
    "build_chunk",
    "chunk_budget",
    "clean_text",
    "clip",
    "commit_clusters",
    "commit_clusters_of",
    "digest_messages",
    "extract_commits",
    "is_prompt",
    "message_commits",
    "one_line",
    "render_lines",
    "tool_use",
]
