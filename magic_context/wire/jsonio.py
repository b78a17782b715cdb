"""JSON bytes for the hot path: orjson, with the standard library for what orjson will not write.

orjson refuses to write documents nested deeper than 254 levels, although it reads up to 1024
(`transform.protocol.MAX_DEPTH`). Issue #14: a tool input nested ~300 levels deep made every pass of
its session fail (ids, the raw store and the output all serialize it) and fall back to the raw input.
`dumps` writes such a document with the stdlib encoder instead, under a recursion limit raised to cover
the parse limit, so whatever mc reads it can hash, store and write back. Same input, same bytes.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 1024  # orjson's parse limit


def text(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)` for any depth mc accepts (up to MAX_DEPTH)."""
    import json

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH))
    try:
        return json.dumps(value, ensure_ascii=False, **options)
    finally:
        sys.setrecursionlimit(limit)


def _stdlib_dumps(value: Any, sort_keys: bool) -> bytes:
    return text(value, sort_keys=sort_keys, separators=(",", ":")).encode("utf-8", "surrogatepass")


try:
    import orjson

    loads = orjson.loads

    def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
        """Compact JSON bytes (keys sorted on request); deep documents go through the stdlib encoder."""
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if sort_keys else orjson.dumps(value)
        except orjson.JSONEncodeError as exc:
            if "ecursion" not in str(exc):
                raise
            return _stdlib_dumps(value, sort_keys)

except ImportError:  # pragma: no cover - orjson is a declared dependency
    import json

    loads = json.loads  # type: ignore[assignment]  # same documents; orjson's signature is narrower

    def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
        return _stdlib_dumps(value, sort_keys)


__all__ = ["MAX_DEPTH", "dumps", "loads", "text"]
