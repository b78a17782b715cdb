"""`@record`: a light stand-in for `@dataclass(slots=True)` on the transform hot path.

`dataclasses` spends ~0.8 ms per class at import (several `exec` calls, a rebuilt slotted class);
a hook process that defines two dozen records pays ~20 ms before doing any work. `record` compiles
only `__init__` (the one method on the hot path: compiling costs ~0.05 ms per line of source);
`__repr__`, `__eq__` and `__hash__` (when frozen) are shared generic methods over the field names.

Fields are the class annotations in order; a class attribute is the default, `Factory(factory=fn)` a default
factory. `frozen=True` only adds `__hash__` (assignment is not blocked: records are internal).

The compiled initializers are cached like bytecode: `save_code_cache()`, called by the transform
hook after each pass, writes any it had to compile with `marshal` to `<data dir>/cache/records.<python
tag>.marshal`, keyed by their source and checksummed, so a hook process compiles none of its ~30
records (~3 ms). A missing, stale or corrupt cache only costs the compile.
"""

from __future__ import annotations

import marshal
import os
import sys
from _blake2 import blake2b
from collections.abc import Callable
from types import CodeType

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    _T = TypeVar("_T")
else:
    def dataclass_transform(**_params: object) -> Callable[[Callable[..., object]], Callable[..., object]]:
        """Runtime stand-in for `typing.dataclass_transform` (PEP 681): only type checkers read it."""
        return lambda fn: fn


_MISSING = object()
_CACHE_MAGIC = b"mc-records\x01"


class _CodeCache:
    """source -> compiled initializer, read from disk on first use; `unsaved` once something was compiled."""

    codes: dict[str, CodeType] | None = None
    unsaved = False


_cache = _CodeCache()


def _cache_file() -> str | None:
    from magic_context import paths

    if "pytest" in sys.modules and not paths.storage_overridden():
        return None  # a test run never touches the user's data dir
    tag = sys.implementation.cache_tag or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(paths.data_dir_str(), "cache", f"records.{tag}.marshal")


def _load_codes() -> dict[str, CodeType]:
    path = _cache_file()
    try:
        with open(path or "", "rb") as fh:
            blob = fh.read()
        head = len(_CACHE_MAGIC)
        payload = blob[head + 16:]
        if blob[:head] != _CACHE_MAGIC or blake2b(payload, digest_size=16).digest() != blob[head:head + 16]:
            return {}
        codes = marshal.loads(payload)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _compiled(source: str) -> CodeType:
    if _cache.codes is None:
        _cache.codes = _load_codes()
    code = _cache.codes.get(source)
    if code is None:
        code = _cache.codes[source] = compile(source, "<record>", "exec")
        _cache.unsaved = True
    return code


def save_code_cache() -> None:
    """Persist initializers compiled since the cache was read (atomic, best effort, never raises)."""
    path = _cache_file() if _cache.unsaved and _cache.codes else None
    if path is None:
        return
    _cache.unsaved = False
    payload = marshal.dumps(_cache.codes)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        from magic_context import paths

        paths.ensure_private_dir(os.path.dirname(path))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, paths.FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_CACHE_MAGIC + blake2b(payload, digest_size=16).digest() + payload)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class _Factory:
    """Default factory marker (what `Factory(factory=fn)` builds at run time; `Factory(fn)` works too, but
    type checkers only see a keyword `factory` as a field's default)."""

    __slots__ = ("fn",)

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.fn = factory


if TYPE_CHECKING:
    def Factory(*, factory: Callable[[], _T]) -> _T:  # named like the class it stands for
        """A field's default factory: `items: list[int] = Factory(factory=list)` (a PEP 681 field specifier)."""
        ...
else:
    Factory = _Factory


def _fields(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if name not in names and not name.startswith("__") and not _is_classvar(annotation):
                names.append(name)
    return names


def _is_classvar(annotation: object) -> bool:
    """`ClassVar[...]` annotations (strings under `from __future__ import annotations`) are not fields."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


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


@dataclass_transform(field_specifiers=(Factory,))
def record(cls: type | None = None, *, frozen: bool = False, slots: bool = True) -> Any:
    """Class decorator; see the module docstring. Type checkers see it as a dataclass (PEP 681)."""

    def wrap(klass: type) -> type:
        names = _fields(klass)
        namespace: dict[str, Any] = {"_MISSING": _MISSING}
        params, body = [], []
        for name in names:
            default = klass.__dict__.get(name, _MISSING)
            if isinstance(default, _Factory):
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
        exec(_compiled(source), namespace)
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


def _names(obj: object) -> tuple[str, ...]:
    names: tuple[str, ...] = getattr(type(obj), "__record_fields__")  # noqa: B009 - set by @record at run time
    return names


def replace(obj: _T, **changes: Any) -> _T:
    """A copy of the record `obj` with some fields changed (like `dataclasses.replace`)."""
    values = {name: getattr(obj, name) for name in _names(obj)}
    values.update(changes)
    return type(obj)(**values)


def as_dict(obj: object) -> dict[str, Any]:
    """The record's fields by name, in order (shallow: nested records stay records)."""
    return {name: getattr(obj, name) for name in _names(obj)}


__all__ = ["Factory", "as_dict", "record", "replace", "save_code_cache"]
