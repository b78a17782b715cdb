"""Common programming abbreviations and the words they stand for, for matching prose against code vocabulary
(bench/search_levers.py "r4:" rows; measured and not kept, README "Search", so it lives with the bench).

A person asks about "the background colour"; the session wrote `bg`, `toolBg`, `--bg-color`. The table is
general software vocabulary (what a style guide or a glossary of identifiers lists), one canonical word per
abbreviation, and only abbreviations with one common meaning in code: `res` (result or response), `ts`
(timestamp or TypeScript), `ws`, `kb`, `rm` are left out. It was written from general knowledge, never from the
bench's questions.
"""

from __future__ import annotations

import re
from typing import Final

ABBREVIATIONS: Final = {
    "addr": "address", "alloc": "allocation", "arg": "argument", "args": "arguments", "async": "asynchronous",
    "attr": "attribute", "attrs": "attributes", "auth": "authentication", "avg": "average", "bg": "background",
    "btn": "button", "buf": "buffer", "calc": "calculate", "cb": "callback", "cfg": "config", "char": "character",
    "chars": "characters", "cmd": "command", "cmds": "commands", "cnt": "count", "col": "column", "cols": "columns",
    "config": "configuration", "conf": "config", "ctx": "context", "cur": "current", "curr": "current",
    "db": "database", "dep": "dependency", "deps": "dependencies", "desc": "description", "dest": "destination",
    "dir": "directory", "dirs": "directories", "dst": "destination", "elem": "element", "env": "environment",
    "err": "error", "errs": "errors", "exe": "executable", "ext": "extension", "fg": "foreground", "fmt": "format",
    "fn": "function", "func": "function", "hdr": "header", "idx": "index", "img": "image", "impl": "implementation",
    "info": "information", "init": "initialize", "iter": "iterator", "len": "length", "lib": "library",
    "libs": "libraries", "mgr": "manager", "msg": "message", "msgs": "messages", "num": "number", "obj": "object",
    "opt": "option", "opts": "options", "param": "parameter", "params": "parameters", "perf": "performance",
    "pkg": "package", "pos": "position", "prev": "previous", "proc": "process", "prop": "property",
    "props": "properties", "ptr": "pointer", "repo": "repository", "repos": "repositories",
    "req": "request", "resp": "response", "seq": "sequence", "src": "source",
    "stats": "statistics", "str": "string", "sys": "system", "tmp": "temporary",
    "txt": "text", "util": "utility", "utils": "utilities", "val": "value", "var": "variable", "vars": "variables",
    "ver": "version",
}
_FULL: dict[str, list[str]] = {}
for _short, _long in ABBREVIATIONS.items():
    _FULL.setdefault(_long, []).append(_short)
FULL_WORDS: Final = {k: tuple(v) for k, v in _FULL.items()}

_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def counterparts(word: str) -> list[str]:
    """The other spellings of one lower-cased word: its full word when it is an abbreviation, its abbreviations
    when it is a full word (a plural `s` tried off too); empty for any other word."""
    found: list[str] = []
    for form in (word, word[:-1] if word.endswith("s") and len(word) > 3 else ""):
        if not form:
            continue
        if form in ABBREVIATIONS:
            found.append(ABBREVIATIONS[form])
        found += FULL_WORDS.get(form, ())
    return [w for i, w in enumerate(found) if w != word and w not in found[:i]]


def identifier_parts(token: str) -> list[str]:
    """`toolBgColor` → tool, bg, color; `bg_color`, `bg-color` the same; lower-cased."""
    return [p.lower() for p in _PART.findall(token)]


def expansions(text: str, *, paths: bool = True) -> list[str]:
    """The full words of the abbreviations in `text`, whole words and identifier parts alike, first seen first;
    without `paths`, words inside a path (`packages/tui/src/…`) are skipped."""
    out: list[str] = []
    chunks = text.split() if not paths else [text]
    tokens = [t for c in chunks if paths or "/" not in c for t in re.findall(r"[A-Za-z0-9_-]+", c)]
    for token in tokens:
        parts = identifier_parts(token)
        for part in parts:
            full = ABBREVIATIONS.get(part)
            if full and full not in out:
                out.append(full)
    return out


__all__ = ["ABBREVIATIONS", "FULL_WORDS", "counterparts", "expansions", "identifier_parts"]
