"""Derived message ids for formats that carry none (Anthropic, OpenAI, Pi context arrays).

The id is a hash of the message's own JSON plus how many identical messages came before it,
so the same message at the same place gets the same id on every pass, and repeated identical
messages ("continue", "ok") are told apart. The harness's input is never mc's output, so the
hash sees the raw message and stays stable while mc edits its copy.
"""

from __future__ import annotations

from magic_context.wire import jsonio

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any


def _canonical(value: Any) -> bytes:
    return jsonio.dumps(value, sort_keys=True)  # orjson; the stdlib for documents nested past its limit


try:  # the builtin module skips hashlib's OpenSSL set-up (~2.5 ms per hook process)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import blake2b


def digest(data: bytes, size: int = 12) -> str:
    """Hex BLAKE2b digest of bytes (ids, fingerprints, prompt hashes)."""
    return blake2b(data, digest_size=size).hexdigest()


def content_hash(value: Any) -> str:
    """Stable hex digest of a JSON value (key order does not matter)."""
    return blake2b(_canonical(value), digest_size=12).hexdigest()


class IdDeriver:
    """Hands out derived ids in message order: `h<hash>` then `h<hash>.<n>` for the n-th repeat."""

    def __init__(self, prefix: str = "h") -> None:
        self._prefix = prefix
        self._seen: dict[str, int] = {}

    def next_id(self, raw_message: Any) -> str:
        return self.next(raw_message)[0]

    def next(self, raw_message: Any) -> tuple[str, str]:
        """(derived id, content hash of the message) — the hash is reused by the raw store."""
        digest = content_hash(raw_message)
        count = self._seen.get(digest, 0)
        self._seen[digest] = count + 1
        return (f"{self._prefix}{digest}" if count == 0 else f"{self._prefix}{digest}.{count}"), digest


__all__ = ["IdDeriver", "content_hash", "digest"]
