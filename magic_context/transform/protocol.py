"""Reading the transform's input document and writing its output (DESIGN §3.1–3.2).

Until the full pass lands (issue: the transform pass), a valid document is served unchanged:
the safe behaviour for a harness, which never breaks the agent.
"""

from __future__ import annotations

from typing import Any

from magic_context.errors import BadInput

try:
    import orjson

    def _loads(data: bytes) -> Any:
        return orjson.loads(data)

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    _DecodeError: type[Exception] = orjson.JSONDecodeError
except ImportError:  # pragma: no cover - orjson is a declared dependency
    import json

    def _loads(data: bytes) -> Any:
        return json.loads(data)

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    _DecodeError = ValueError


def parse_document(data: bytes) -> Any:
    """Parse stdin as one JSON document; raise BadInput naming the problem and position."""
    if not data.strip():
        raise BadInput("empty input on stdin", fix="pipe one JSON document (envelope, request body or message array)")
    try:
        return _loads(data)
    except (_DecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise BadInput(f"stdin is not valid JSON: {exc}", fix="pipe one JSON document") from exc


def run(data: bytes, options: dict[str, str | bool]) -> bytes:
    """Serve one pass: parse, check the shape, and return the output document."""
    document = parse_document(data)
    if not isinstance(document, (dict, list)):
        raise BadInput(f"expected a JSON object or array, got {type(document).__name__}")
    return _dumps(document)


__all__ = ["parse_document", "run"]
