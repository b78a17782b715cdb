"""File paths named in history, and the short form the extractive historian's compartments list them in.

A compartment that says `theme.ts` has lost which `theme.ts`; one that spells every path in full
(`/Users/x/workspaces/pi-mono/packages/coding-agent/src/theme/theme.ts`) spends ~15 tokens a file. The
middle ground kept here is the last two parts (`theme/theme.ts`, ~4 tokens): enough to find the file again
in any checkout (`find . -path '*theme/theme.ts'`), and the same key `mc replay`'s anchor retention
matches a path by (`replay/anchors.py`). Lists are cut to a character budget and say how many were left
out, so a tier's size stays bounded however many files a stretch of work touched.

* `command_paths(command)`: the file operands of a shell command — paths with a directory part and an
  extension, the way a person names a file — outside quoted strings (sed and grep patterns, `python -c`
  bodies: text, not operands), `#` comments and heredoc bodies; URLs are not paths. A quoted string that
  is itself one path (`cat "src/a b.py"` aside) still counts.
* `text_paths(text)`: the same paths in prose (what a person typed, what the agent said it changed).
* `short(path)`, `listing(paths, chars, shown)`.

Stdlib only (the historian can run inside the transform pass).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from magic_context.lazyre import lazy

_PATH = r"(?<![\w.-])/?(?:[\w.@+-]+/)+[\w-][\w.+-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])"
_FIND = lazy(_PATH)
_WHOLE = lazy(r"\s*" + _PATH + r"\s*")
_URL = lazy(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_QUOTED = lazy(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_HEREDOC = lazy(r"<<-?\s*['\"]?(\w+)['\"]?")


def short(path: str) -> str:
    """The last two parts of `path` (`a/b/c.py` → `b/c.py`; `./c.py` → `c.py`)."""
    parts = [p for p in path.strip().split("/") if p and p not in (".", "..")]
    return "/".join(parts[-2:]) if parts else path.strip()


def _unquoted(match: re.Match[str]) -> str:
    inner = match.group(0)[1:-1]
    return f" {inner} " if _WHOLE.fullmatch(inner) else " "


def _operand_text(command: str) -> str:
    """`command` without heredoc bodies, comment lines, quoted strings (unless one path) and URLs."""
    kept: list[str] = []
    marker: str | None = None
    for line in command.splitlines():
        if marker is not None:
            marker = None if line.strip() == marker else marker
            continue
        if line.lstrip().startswith("#"):
            continue
        kept.append(line)
        opened = _HEREDOC.search(line)
        marker = opened.group(1) if opened else None
    return _URL.sub(" ", _QUOTED.sub(_unquoted, "\n".join(kept)))


def text_paths(text: str) -> list[str]:
    """Paths named in `text`, in order, once each (URLs are not paths)."""
    if "/" not in text:
        return []  # the common case: no regex at all
    return list(dict.fromkeys(match.group(0) for match in _FIND.finditer(_URL.sub(" ", text))))


def command_paths(command: str) -> list[str]:
    """The file operands `command` names (see the module doc), in order, once each."""
    return text_paths(_operand_text(command)) if "/" in command else []


def listing(paths: Iterable[str], chars: int, shown: str = "") -> str:
    """`paths` in their short form, once each, leaving out those `shown` already names, within `chars`
    characters; `(+N more)` says how many did not fit. "" when none is left to name."""
    names: list[str] = []
    more = 0
    used = 0
    for name in dict.fromkeys(short(p) for p in paths):
        if name in shown:
            continue
        cost = len(name) + 2
        if used + cost > chars:
            more += 1
            continue
        names.append(name)
        used += cost
    if not names:
        return ""
    return ", ".join(names) + (f" (+{more} more)" if more else "")


__all__ = ["command_paths", "listing", "short", "text_paths"]
