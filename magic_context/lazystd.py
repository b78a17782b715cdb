"""Defer a standard-library module until one of its attributes is used (transform process start-up only).

orjson imports `dataclasses` when it loads, and `dataclasses` imports `inspect` (with `ast`, `dis`,
`tokenize` and `linecache`: ~7 ms) and `copy` (with `weakref`: ~1 ms) although it calls them only
while creating or converting a dataclass, which the transform hot path never does (it uses
`records`). `mc transform` is a process per LLM call, so `commands.main` puts stand-ins for
`UNUSED_BY_TRANSFORM` into `sys.modules` before the hook imports orjson; the first attribute anyone
reads from one imports the real module and hands that attribute over, so code that does use them
still works, only later.

`importlib.util.LazyLoader` is not used: on Python 3.11 the `import` statement itself reads
attributes of the lazy module and loads it at once.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


UNUSED_BY_TRANSFORM = ("inspect", "copy")


class _Deferred(types.ModuleType):
    """A stand-in module: any attribute it lacks comes from the real module, imported on first use."""

    def __getattr__(self, attr: str) -> Any:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = __import__(name)
        for part in name.split(".")[1:]:
            real = getattr(real, part)
        self.__dict__["_mc_real"] = real
        return getattr(real, attr)


def defer(name: str) -> bool:
    """Put a stand-in for `name` into `sys.modules` unless it is already imported; True if it did."""
    if name in sys.modules:
        return False
    sys.modules[name] = _Deferred(name, f"stand-in for {name}, imported on first attribute use")
    return True


def is_deferred(name: str) -> bool:
    """Whether `name` is still a stand-in (its real module not imported yet)."""
    module = sys.modules.get(name)
    return isinstance(module, _Deferred) and "_mc_real" not in module.__dict__


__all__ = ["UNUSED_BY_TRANSFORM", "defer", "is_deferred"]
