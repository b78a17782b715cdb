"""Structural types the engine passes around, for the type checker.

Imported only under `TYPE_CHECKING` by hot-path modules (`typing` costs ~5 ms to import). A codec is a
`wire.<format>` module; mypy checks each module in `transform.protocol.CODECS` against `Codec`.
"""

from __future__ import annotations

from typing import Protocol

from magic_context.wire.model import Message


class Codec(Protocol):
    """A harness wire format: its message array to mc's model and back, byte-faithful for what is unchanged."""

    def decode(self, messages: list, *, skim: int = 0) -> list[Message]:
        """The harness's messages as mc messages; the first `skim` may be read shallowly (already folded)."""
        ...

    def encode(self, messages: list[Message]) -> list:
        """The harness's message array for `messages` (unchanged messages are their original JSON)."""
        ...


__all__ = ["Codec"]
