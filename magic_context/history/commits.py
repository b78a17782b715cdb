"""Commit detection shared by the historian's digests and the deferred-notes trigger (reference §2.3).

One rule, as the original's shared helper: a 7–40 hex hash in `git commit` output (`[main 45ffe0a] …`)
or within a line's 40 characters after a commit, cherry-pick, merge, rebase or revert verb. A hash needs a
digit and a letter (so `deadbeef`-like words and plain numbers are not commits). Stdlib only: the
transform scans each pass's new messages with it, and most texts fail the substring test before any regex.
"""

from __future__ import annotations

import re

from magic_context.lazyre import lazy

MAX_COMMITS_PER_BLOCK = 5

_HEX = r"([0-9a-f]{7,40})"
_COMMIT_OUTPUT = lazy(r"^\[[\w./@-]+(?: \([\w -]+\))? " + _HEX + r"\]", re.MULTILINE)
_COMMIT_VERB = lazy(r"(?i:\b(?:commit(?:ted|s)?|cherry-pick(?:ed)?|merged?|merges|rebased?|rebases|"
                    r"revert(?:ed|s)?)\b)[^\n]{0,40}?\b" + _HEX + r"\b")
_VERB_WORDS = ("commit", "merge", "rebase", "revert", "cherry")


def extract_commits(text: str, limit: int = MAX_COMMITS_PER_BLOCK) -> list[str]:
    """Commit hashes in `git commit` output or near a commit verb, in order, at most `limit`."""
    if not text:
        return []
    low = text.lower()
    verb = any(word in low for word in _VERB_WORDS)
    output = "[" in text and ("changed" in low or "root-commit" in low)  # `git commit` prints "N files changed"
    if not (verb or output):
        return []  # the common case on the transform hot path: no regex at all
    found: list[str] = []
    for pattern in ((_COMMIT_OUTPUT,) if output else ()) + ((_COMMIT_VERB,) if verb else ()):
        for match in pattern.finditer(text):
            sha = match.group(1)
            if any(c.isdigit() for c in sha) and any(c.isalpha() for c in sha) and sha not in found:
                found.append(sha)
    return found[:limit]


__all__ = ["MAX_COMMITS_PER_BLOCK", "extract_commits"]
