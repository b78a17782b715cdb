"""Regular expressions compiled on first use.

A process compiles every module-level `re.compile` again (the `re` cache is per process), at
~0.05–0.2 ms each. The transform hook imports modules whose patterns most passes never touch
(the historian's digest rules, the head renderer), so those are declared with `lazy` instead.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """Stands in for `re.compile(pattern, flags)`; compiles when a pattern method is first used."""

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(self._pattern, self._flags)
        return getattr(self._compiled, name)


def lazy(pattern: str, flags: int = 0) -> Any:
    """A pattern object with the `re.Pattern` methods (match, search, sub, finditer, …), compiled on first use."""
    return LazyPattern(pattern, flags)


__all__ = ["LazyPattern", "lazy"]
