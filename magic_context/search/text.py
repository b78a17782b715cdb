"""Search text: what of a message is indexed, how a query becomes FTS5, and the literal probes (§3.2–§3.3).

Beyond the original (which indexes only user/assistant prose), a message's text also carries each tool
call's name and key input (path, command, pattern) and a bounded head of each tool output, so a file
path, a command or an error message folded away is one search away.
"""

from __future__ import annotations

import re
from typing import Final

from magic_context.history.chunk import clean_text, tool_use
from magic_context.store.db import fits_integer
from magic_context.wire import model as m

MAX_QUERY_CHARS: Final = 16_384  # [later] rejects queries over 16 KiB
MAX_QUERY_TERMS: Final = 64
MAX_PROBES: Final = 5
TOOL_INPUT_CHARS: Final = 400
TOOL_OUTPUT_HEAD_CHARS: Final = 600  # error messages and test names sit near the top of an output
MAX_TEXT_CHARS: Final = 20_000  # one message's indexed text

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_NOTE_TOKEN = re.compile(r"[a-z0-9/._:-]+")
_ID_QUERY = re.compile(r"^\s*#?\d+(?:[\s,]+#?\d+){0,4}\s*$")
_PROBES: Final = (
    re.compile(r"\"([^\"]{3,80})\"|'([^']{3,80})'|`([^`]{3,80})`"),  # quoted spans
    re.compile(r"(?<![\w/])(/[a-z][\w-]{2,})(?![\w/])"),  # slash commands
    re.compile(r"\b([A-Z]{2,5}\d{3,5}|E[A-Z]{2,}|ERR_[A-Z0-9_]+|[A-Z][a-z]+(?:Error|Exception))\b"),  # error codes
    re.compile(r"((?:[\w-]+/)+[\w.-]+|\b[\w-]+(?:\.[\w-]+)+)"),  # paths and dotted identifiers
    re.compile(r"\b([a-z0-9]+(?:[-_][a-z0-9]+)+)\b"),  # kebab and snake identifiers
    re.compile(r"\b([a-z]+[A-Z][A-Za-z0-9]*)\b"),  # camelCase
    re.compile(r"\b([0-9a-f]{7,40})\b"),  # hex SHAs (a digit is required below)
)
STOPWORDS: Final = frozenset("""
a an and are as at be but by did do does for from had has have how i if in into is it its me my of
on or our so that the their them then there these they this to was we were what when where which who
why will with you your us any all can could should would been being about after before first last
did done get got make made use used using
""".split())  # noqa: SIM905 - a word list reads better as prose


def collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def preview(text: str, limit: int = 220) -> str:
    """Whitespace collapsed, at most `limit` characters (`limit - 1` + `…`)."""
    flat = collapse(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tool_input(block: m.Block) -> str:
    use = tool_use(block)
    parts = [use.name]
    args = block.input if isinstance(block.input, dict) else {}
    for key in ("path", "file_path", "filePath", "command", "cmd", "pattern", "query", "url"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip()[:TOOL_INPUT_CHARS])
    if len(parts) == 1 and use.key_arg:
        parts.append(use.key_arg)
    return " ".join(parts)


def message_text(msg: m.Message, *, tools: bool = True, output_head: int = TOOL_OUTPUT_HEAD_CHARS) -> str:
    """The searchable text of one message: its prose, then (with `tools`) tool inputs and output heads.

    Parts are joined with ` / ` and whitespace is collapsed; empty when nothing is searchable.
    """
    parts: list[str] = []
    for block in msg.blocks:
        if block.kind == m.TEXT and not block.synthetic:
            text = clean_text(block.text or "")
            if text:
                parts.append(collapse(text))
        elif tools and block.kind == m.TOOL_CALL:
            parts.append(collapse(_tool_input(block)))
        elif tools and output_head and block.kind == m.TOOL_RESULT and block.text:
            parts.append(collapse(block.text[: output_head * 2])[:output_head])
    return " / ".join(p for p in parts if p)[:MAX_TEXT_CHARS]


def message_full_text(msg: m.Message) -> str:
    """Everything a message holds, for `mc expand --message`: prose, tool calls with input, full outputs."""
    import json

    lines: list[str] = []
    for block in msg.blocks:
        if block.kind == m.TEXT:
            lines.append(block.text or "")
        elif block.kind == m.REASONING:
            if block.text:
                lines.append(f"(reasoning) {block.text}")
        elif block.kind == m.TOOL_CALL:
            lines.append(f"TC: {block.tool_name or 'tool'}({json.dumps(block.input, ensure_ascii=False)})")
        elif block.kind == m.TOOL_RESULT:
            lines.append(f"TR{' (error)' if block.is_error else ''}: {block.original or block.text or ''}")
        elif block.kind == m.MEDIA:
            lines.append(f"[{block.media_type or 'media'}]")
    return "\n".join(lines)


def sanitize(query: str) -> str:
    """FTS5 expression matching every whitespace token literally: each quoted (inner `"` doubled), ANDed."""
    return " ".join('"' + t.replace('"', '""') + '"' for t in query.split()[:MAX_QUERY_TERMS])


def content_words(query: str) -> list[str]:
    """The query's words of 2+ characters that are not stopwords, lower-cased, first occurrence order."""
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        if len(word) >= 2 and word not in STOPWORDS and word not in words:
            words.append(word)
    return words[:MAX_QUERY_TERMS]


def any_words(query: str | list[str]) -> str:
    """A looser FTS5 expression: the query's content words (stopwords removed), ORed. Empty if none."""
    words = content_words(query) if isinstance(query, str) else query
    return " OR ".join(f'"{w}"' for w in words)


def probes(query: str) -> list[str]:
    """Up to 5 literal probes (≥ 3 characters) in the priority order of `literal-probes` (§3.3)."""
    found: list[str] = []
    for index, pattern in enumerate(_PROBES):
        for match in pattern.finditer(query):
            value = next((g for g in match.groups() if g), "").strip()
            if len(value) < 3 or value.lower() in (p.lower() for p in found):
                continue
            if index == len(_PROBES) - 1 and not any(c.isdigit() for c in value):
                continue
            found.append(value)
            if len(found) == MAX_PROBES:
                return found
    return found


def id_query(query: str) -> list[int] | None:
    """The ids of a whole query of 1–5 `#?\\d+` tokens (the id shortcut), else None."""
    if not _ID_QUERY.match(query):
        return None
    ids = [int(t.lstrip("#")) for t in re.split(r"[\s,]+", query.strip()) if t]
    return ids if all(fits_integer(i) for i in ids) else None  # beyond SQLite's INTEGER range: words, not ids


def note_tokens(text: str) -> list[str]:
    return [t for t in _NOTE_TOKEN.findall(text.lower()) if len(t) >= 2]


def age(at_ms: int | None, now_ms: int) -> str:
    """`today`, `1d ago`, `Nd ago`, `1mo ago`, `Nmo ago`, `1y ago`, `Ny ago` or `future` (§3.6)."""
    if at_ms is None:
        return "today"
    delta = now_ms - at_ms
    if delta < 0:
        return "future"
    days = int(delta // 86_400_000)
    if days == 0:
        return "today"
    if days < 30:
        return f"{days}d ago"
    months = days // 30
    if months < 12:
        return f"{months}mo ago"
    return f"{days // 365 or 1}y ago"


def phrase(value: str) -> str:
    """One literal FTS5 phrase for a probe (its words, quoted)."""
    return '"' + value.replace('"', '""') + '"'


__all__ = [
    "MAX_PROBES", "MAX_QUERY_CHARS", "age", "any_words", "collapse", "content_words", "id_query",
    "message_full_text", "message_text", "note_tokens", "phrase", "preview", "probes", "sanitize",
]
