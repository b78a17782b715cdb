r"""Anchor retention: do the facts of history mc folded or dropped stay visible in what it serves?

Anchors are taken from the history blocks mc no longer serves verbatim (a block counts as served
verbatim when the same text, `§N§` tags aside, is in the final request):
* file paths (with a directory part and an extension) named in user or assistant text and in tool
  call arguments (tool outputs such as `ls` or `grep` listings are left out: they name files nobody
  acted on), keyed by their last two components so `/repo/a/b.py` and `a/b.py` are one anchor. Tool
  arguments are read as their strings, not their JSON text (whose `\n` would glue `n` to a path on a
  new line), and a backslash escape written in a command (`printf 'x\nsrc/a.py'`, a `\` line
  continuation) separates words like whitespace, so the anchor is the path itself;
* commit hashes from git output anywhere (`commit <sha>`, `[branch <sha>]`, `git log --oneline` lines);
* user instructions: user-typed text of 20 characters or more, keyed by its first 80 characters
  (case and whitespace folded).
An anchor is retained when its key is visible anywhere in the request, head summaries included. The
visible text is read as the model reads it: the `&lt;`, `&gt;` and `&amp;` that mc's `<session-history>`
block escapes its quotes with count as `<`, `>` and `&` (a quoted `<pr_description>` task is retained).
`Retention` measures it on every pass (mean and minimum), for mc and for each baseline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Final

from magic_context.records import Factory, record
from magic_context.wire import model as m

_TAG = re.compile(r"§\d+§ ?")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w.-])(?:[\w.-]+/)+[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")
_COMMITS = (
    re.compile(r"\bcommit\s+([0-9a-f]{7,40})\b"),
    re.compile(r"\[[\w./-]+(?: \([^)\]]*\))? ([0-9a-f]{7,40})\]"),
    re.compile(r"^([0-9a-f]{7,12}) \S", re.MULTILINE),
)
_SPACE = re.compile(r"\s+")
_ESCAPE = re.compile(r"\\(?:[nrtfvb0]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")  # `\n`, `\x1b`, `\u001b` as written
MIN_INSTRUCTION: Final = 20
INSTRUCTION_KEY: Final = 80
KINDS: Final = ("paths", "commits", "instructions")


@record
class AnchorReport:
    """Retention per kind as (anchors, retained), and a few missing ones for the reader."""

    counts: dict[str, tuple[int, int]] = Factory(factory=dict)
    missing: list[str] = Factory(factory=list)

    @property
    def total(self) -> int:
        return sum(c[0] for c in self.counts.values())

    @property
    def retained(self) -> int:
        return sum(c[1] for c in self.counts.values())

    @property
    def share(self) -> float | None:
        return self.retained / self.total if self.total else None


def _untag(text: str) -> str:
    return _TAG.sub("", text) if "§" in text else text


def _visible(text: str) -> str:
    """Text as the model reads it: tags removed, the XML escapes of the history block undone."""
    text = _untag(text)
    if "&" in text:
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _block_key(block: m.Block) -> str:
    if block.kind == m.TOOL_CALL:
        return "call\x1f" + json.dumps(block.input, sort_keys=True, ensure_ascii=False, default=str)
    return block.kind + "\x1f" + _untag(block.text)


def _strings(value: object) -> Iterator[str]:
    """The strings of a tool call's arguments (keys included), as written: no JSON escapes."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif value is not None and not isinstance(value, bool | int | float):
        yield str(value)


def _paths(text: str) -> set[str]:
    text = _URL.sub(" ", text)
    if "\\" in text:
        text = _ESCAPE.sub(" ", text)
    keys = set()
    for match in _PATH.finditer(text):
        parts = [p for p in match.group(0).split("/") if p and p not in (".", "..")]
        if len(parts) >= 2:
            keys.add("/".join(parts[-2:]))
    return keys


def _commits(text: str) -> set[str]:
    found = set()
    for pattern in _COMMITS:
        for match in pattern.finditer(text):
            sha = match.group(1)
            if any(c.isdigit() for c in sha) and any(c.isalpha() for c in sha):
                found.add(sha[:7])
    return found


def served_text(messages: list[m.Message], system: list[str] | None = None) -> str:
    """Everything the model sees in a request, tags removed (for visibility checks)."""
    parts = [_visible(text) for text in system or []]
    for msg in messages:
        for block in msg.blocks:
            if block.kind == m.TOOL_CALL:
                parts.append(json.dumps(block.input, ensure_ascii=False, default=str))
            elif block.text:
                parts.append(_visible(block.text))
    return "\n".join(parts)


def _block_anchors(msg: m.Message, block: m.Block) -> dict[str, set[str]]:
    """The anchors one history block names (see the module doc)."""
    out: dict[str, set[str]] = {}
    if block.kind in (m.MEDIA, m.OPAQUE):
        return out
    if block.kind == m.TOOL_CALL:
        out["paths"] = _paths("\n".join(_strings(block.input)))
        return out
    text = block.text
    out["commits"] = _commits(text)
    if block.kind == m.TEXT and msg.role in (m.USER, m.ASSISTANT):
        out["paths"] = _paths(text)
    user_typed = msg.role == m.USER and block.kind == m.TEXT and not (
        msg.synthetic or block.synthetic or (block.meta or {}).get("command"))
    folded = _fold(text)
    if user_typed and len(folded) >= MIN_INSTRUCTION:
        out["instructions"] = {folded[:INSTRUCTION_KEY]}
    return {k: v for k, v in out.items() if v}


class Retention:
    """Anchor retention measured pass after pass on a growing history (same figures as `retention`).

    `measure(history, served, system)` is `retention(...)` with its work memoized, because a replay
    measures every pass of every strategy (it was two thirds of `bench/run.py`'s time): each block's
    key, anchors and served text are kept by block identity (the replay's history objects, and the
    baselines' served ones, live for the whole replay); the history's blocks that name anchors are
    indexed once as the history grows (it is the same list, one prefix longer per pass); and the
    served text is case-and-space folded part by part, memoized by text, which gives the fold of the
    whole text (whitespace runs across a part boundary fold to one space either way). The reports of
    every pass are kept so `summary()` can give the mean and the minimum over the passes with anchors.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, tuple[m.Block, str, dict[str, set[str]]]] = {}
        self._parts: dict[int, tuple[m.Block, str, str]] = {}  # served block → (key, served text)
        self._folded: dict[str, str] = {}
        self._shown: dict[str, str] = {}  # system text → as the model reads it
        self._indexed: list[m.Message] = []  # the history prefix already indexed
        self._named: list[tuple[str, dict[str, set[str]]]] = []  # its blocks that name anchors
        self.reports: list[AnchorReport] = []

    def _info(self, msg: m.Message, block: m.Block) -> tuple[str, dict[str, set[str]]]:
        hit = self._blocks.get(id(block))
        if hit is None or hit[0] is not block:
            hit = self._blocks[id(block)] = (block, _block_key(block), _block_anchors(msg, block))
        return hit[1], hit[2]

    def _part(self, block: m.Block) -> tuple[str, str]:
        hit = self._parts.get(id(block))
        if hit is None or hit[0] is not block:
            text = (json.dumps(block.input, ensure_ascii=False, default=str) if block.kind == m.TOOL_CALL
                    else _visible(block.text) if block.text else "")
            hit = self._parts[id(block)] = (block, _block_key(block), text)
        return hit[1], hit[2]

    def _visible(self, text: str) -> str:
        found = self._shown.get(text)
        if found is None:
            found = self._shown[text] = _visible(text)
        return found

    def _fold_part(self, text: str) -> str:
        found = self._folded.get(text)
        if found is None:
            found = self._folded[text] = _fold(text)
        return found

    def _index(self, history: list[m.Message]) -> list[tuple[str, dict[str, set[str]]]]:
        done = len(self._indexed)
        if done > len(history) or any(history[i] is not self._indexed[i] for i in (0, done - 1) if done):
            self._indexed, self._named, done = [], [], 0  # not the history indexed so far: start again
        for msg in history[done:]:
            for block in msg.blocks:
                key, found = self._info(msg, block)
                if found:
                    self._named.append((key, found))
        self._indexed.extend(history[done:])
        return self._named

    def measure(self, history: list[m.Message], served: list[m.Message],
                system: list[str] | None = None) -> AnchorReport:
        verbatim: set[str] = set()
        parts = [self._visible(text) for text in system or []]
        for msg in served:
            for block in msg.blocks:
                key, text = self._part(block)
                verbatim.add(key)
                if text:
                    parts.append(text)
        anchors: dict[str, set[str]] = {kind: set() for kind in KINDS}
        for key, found in self._index(history):
            if key in verbatim:
                continue
            for kind, keys in found.items():
                anchors[kind] |= keys
        folded = " ".join(f for f in map(self._fold_part, parts) if f)
        report = _check(anchors, "\n".join(parts), folded)
        self.reports.append(report)
        return report

    def summary(self) -> dict[str, object]:
        """Mean and minimum share over the passes with anchors, overall and per kind (None: no anchors)."""
        shares = [r.share for r in self.reports if r.share is not None]
        out: dict[str, object] = {
            "passes": len(shares),
            "mean": round(sum(shares) / len(shares), 4) if shares else None,
            "min": round(min(shares), 4) if shares else None,
        }
        for kind in KINDS:
            kind_shares = [r.counts[kind][1] / r.counts[kind][0] for r in self.reports
                           if r.counts.get(kind, (0, 0))[0]]
            out[kind] = {"mean": round(sum(kind_shares) / len(kind_shares), 4) if kind_shares else None,
                         "min": round(min(kind_shares), 4) if kind_shares else None}
        return out


def _check(anchors: dict[str, set[str]], visible: str, visible_folded: str | None = None) -> AnchorReport:
    if visible_folded is None:
        visible_folded = _fold(visible)
    report = AnchorReport()
    for kind in KINDS:
        haystack = visible_folded if kind == "instructions" else visible
        kept = 0
        for key in sorted(anchors[kind]):
            if key in haystack:
                kept += 1
            elif len(report.missing) < 12:
                report.missing.append(f"{kind[:-1]}: {key[:60]}")
        report.counts[kind] = (len(anchors[kind]), kept)
    return report


def retention(history: list[m.Message], served: list[m.Message], system: list[str] | None = None) -> AnchorReport:
    """Anchors of the history blocks not served verbatim, and how many stay visible in `served`."""
    verbatim = {_block_key(b) for msg in served for b in msg.blocks}
    anchors: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for msg in history:
        for block in msg.blocks:
            if _block_key(block) in verbatim:
                continue
            for kind, keys in _block_anchors(msg, block).items():
                anchors[kind] |= keys
    return _check(anchors, served_text(served, system))


__all__ = ["KINDS", "AnchorReport", "Retention", "retention", "served_text"]
