"""`@record`: a light stand-in for `@dataclass(slots=True)` on the transform hot path.

`dataclasses` spends ~0.8 ms per class at import (several `exec` calls, a rebuilt slotted class);
a hook process that defines two dozen records pays ~20 ms before doing any work. `record` compiles
only `__init__` (the one method on the hot path: compiling costs ~0.05 ms per line of source);
`__repr__`, `__eq__` and `__hash__` (when frozen) are shared generic methods over the field names.

Fields are the class annotations in order; a class attribute is the default, `Factory(fn)` a default
factory. `frozen=True` only adds `__hash__` (assignment is not blocked: records are internal).
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


_MISSING = object()


class Factory:
    """Default factory marker: `items: list[int] = Factory(list)`."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


def _fields(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in vars(klass).get("__annotations__", {}):
            if name not in names and not name.startswith("__"):
                names.append(name)
    return names


def _repr(self: Any) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_fields__)
    return f"{type(self).__qualname__}({fields})"


def _values(self: Any) -> tuple:
    return tuple(getattr(self, name) for name in self.__record_fields__)


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def record(cls: type | None = None, *, frozen: bool = False, slots: bool = True) -> Any:
    """Class decorator; see the module docstring."""

    def wrap(klass: type) -> type:
        names = _fields(klass)
        namespace: dict[str, Any] = {"_MISSING": _MISSING}
        params, body = [], []
        for name in names:
            default = klass.__dict__.get(name, _MISSING)
            if isinstance(default, Factory):
                namespace[f"_f_{name}"] = default.fn
                params.append(f"{name}=_MISSING")
                body.append(f" self.{name}=_f_{name}() if {name} is _MISSING else {name}")
            elif default is not _MISSING:
                namespace[f"_d_{name}"] = default
                params.append(f"{name}=_d_{name}")
                body.append(f" self.{name}={name}")
            else:
                params.append(name)
                body.append(f" self.{name}={name}")
        source = f"def __init__(self,{','.join(params)}):\n" + ("\n".join(body) or " pass") + "\n"
        exec(source, namespace)
        attrs = {k: v for k, v in klass.__dict__.items() if k not in names and k not in ("__dict__", "__weakref__")}
        if slots:
            attrs["__slots__"] = tuple(n for n in names if not any(n in getattr(b, "__slots__", ()) for b in
                                                                klass.__mro__[1:]))
        attrs["__init__"] = namespace["__init__"]
        attrs["__init__"].__qualname__ = f"{klass.__qualname__}.__init__"
        attrs.setdefault("__repr__", _repr)
        attrs.setdefault("__eq__", _eq)
        attrs["__hash__"] = _hash if frozen else None
        attrs["__match_args__"] = tuple(names)
        attrs["__record_fields__"] = tuple(names)
        return type(klass)(klass.__name__, klass.__bases__, attrs)

    return wrap if cls is None else wrap(cls)


__all__ = ["Factory", "record"]
