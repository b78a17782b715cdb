"""Byte-preserving edits of JSON / JSONC config files (comments, trailing commas).

Harness configs are the user's files: an installer may add or remove one value and must keep every
other byte — comments, key order, indentation, trailing commas — exactly as it was. This module scans
the text (strings and comments are skipped, nothing is re-serialised) to find the top-level object's
members and an array's elements, then splices text in or out at those offsets.
"""

from __future__ import annotations

import json
from typing import Any

from magic_context.errors import BadInput
from magic_context.records import record


@record(frozen=True)
class Span:
    """A value's text range [start, end) and, for object members, its key."""

    start: int
    end: int
    key: str | None = None
    key_start: int = -1  # where an object member's key begins (its line's indentation is measured there)


def _skip(text: str, i: int) -> int:
    """Index of the next character that is not whitespace or inside a comment."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n\ufeff":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError(f"unterminated comment at offset {i}")
            i = end + 2
        else:
            return i
    return i


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text[j] == '"':
            return j + 1
        else:
            j += 1
    raise ValueError(f"unterminated string at offset {i}")


def _value_end(text: str, i: int) -> int:
    """End offset of the JSON value starting at `i` (scalars, strings, nested arrays/objects)."""
    if i >= len(text):
        raise ValueError("unexpected end of input")
    ch = text[i]
    if ch == '"':
        return _string_end(text, i)
    if ch in "[{":
        return _container(text, i)[0]
    j = i
    while j < len(text) and text[j] not in ",]} \t\r\n/":
        j += 1
    if j == i:
        raise ValueError(f"unexpected {ch!r} at offset {i}")
    return j


def _container(text: str, i: int) -> tuple[int, list[Span]]:
    """(end offset, child spans) of the array or object opening at `i`."""
    close = "]" if text[i] == "[" else "}"
    children: list[Span] = []
    j = _skip(text, i + 1)
    while True:
        if j >= len(text):
            raise ValueError(f"unclosed {text[i]!r} opened at offset {i}")
        if text[j] == close:
            return j + 1, children
        key, key_start = None, -1
        if close == "}":
            if text[j] != '"':
                raise ValueError(f"expected a key at offset {j}")
            key_start, key_end = j, _string_end(text, j)
            key = json.loads(text[j:key_end])
            j = _skip(text, key_end)
            if j >= len(text) or text[j] != ":":
                raise ValueError(f"expected ':' at offset {j}")
            j = _skip(text, j + 1)
        end = _value_end(text, j)
        children.append(Span(j, end, key, key_start))
        j = _skip(text, end)
        if j < len(text) and text[j] == ",":
            j = _skip(text, j + 1)
        elif j < len(text) and text[j] != close:
            raise ValueError(f"expected ',' or {close!r} at offset {j}")


def _strip(text: str) -> str:
    """The text as strict JSON: comments blanked out, trailing commas removed (offsets are not kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i) or text.startswith("/*", i):
            i = _skip(text, i)
            out.append(" ")
        elif ch == ",":
            nxt = _skip(text, i + 1)
            if nxt < n and text[nxt] in "]}":
                i += 1
                continue
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def loads(text: str, *, source: str = "config") -> Any:
    """Parse JSON or JSONC; BadInput naming the file and the problem."""
    try:
        return json.loads(_strip(text)) if text.strip() else None
    except ValueError as exc:
        raise BadInput(f"{source} is not valid JSON/JSONC: {exc}", fix=f"fix or move {source} and rerun") from exc


def _root(text: str, source: str) -> tuple[int, int, list[Span]]:
    try:
        start = _skip(text, 0)
        if start >= len(text) or text[start] != "{":
            raise ValueError("the top level is not an object")
        end, members = _container(text, start)
        if _skip(text, end) != len(text):
            raise ValueError(f"unexpected text after the object at offset {end}")
    except ValueError as exc:
        raise BadInput(f"{source} is not a JSON/JSONC object: {exc}", fix=f"fix or move {source} and rerun") from exc
    return start, end, members


def _indent_before(text: str, offset: int) -> str | None:
    """The whitespace between the line start and `offset`, or None when `offset` is not first on its line."""
    line_start = text.rfind("\n", 0, offset) + 1
    prefix = text[line_start:offset]
    return prefix if not prefix.strip() else None


def _skip_inline(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _insert_after(text: str, container_start: int, last: Span | None, close_at: int, item: str) -> str:
    """Insert `item` as the last child of the container at `container_start` (closing bracket at `close_at`).

    Multi-line containers get the item on a line of its own after the last child's line (its comments stay
    where they were); a trailing comma style is kept."""
    if last is None:
        outer = _indent_before(text, container_start) or ""
        if text[container_start] == "{":
            return f"{text[:container_start]}{{\n{outer}  {item}\n{outer}}}{text[close_at + 1:]}"
        return f"{text[:container_start]}[{item}]{text[close_at + 1:]}"
    indent = _indent_before(text, last.key_start if last.key is not None else last.start)
    comma = _skip(text, last.end)
    trailing = comma < len(text) and text[comma] == ","
    if indent is None:  # one-line container
        if trailing:
            return f"{text[:comma + 1]} {item},{text[comma + 1:]}"
        return f"{text[:last.end]}, {item}{text[last.end:]}"
    anchor = comma + 1 if trailing else last.end
    eol = text.find("\n", anchor)
    if eol < 0 or eol > close_at:
        eol = close_at
    line = f"\n{indent}{item}" + ("," if trailing else "")
    if trailing:
        return text[:eol] + line + text[eol:]
    return text[:last.end] + "," + text[last.end:eol] + line + text[eol:]


def array_values(text: str, key: str, *, source: str = "config") -> list[Any]:
    """The parsed elements of the top-level array `key` ([] when absent)."""
    value = (loads(text, source=source) or {}).get(key)
    return list(value) if isinstance(value, list) else []


def append_to_array(text: str, key: str, value: Any, *, source: str = "config") -> str:
    """`text` with `value` appended to the top-level array `key` (created when absent); other bytes unchanged."""
    item = json.dumps(value, ensure_ascii=False)
    if not text.strip():
        return json.dumps({key: [value]}, indent=2, ensure_ascii=False) + "\n"
    start, end, members = _root(text, source)
    member = next((m for m in members if m.key == key), None)
    if member is None:
        return _insert_after(text, start, members[-1] if members else None, end - 1,
                             f"{json.dumps(key)}: [{item}]")
    if text[member.start] != "[":
        raise BadInput(f"{source}: `{key}` is not an array", fix=f"make `{key}` an array in {source}")
    array_end, elements = _container(text, member.start)
    return _insert_after(text, member.start, elements[-1] if elements else None, array_end - 1, item)


def remove_from_array(text: str, key: str, value: Any, *, source: str = "config") -> str:
    """`text` without the elements of top-level array `key` equal to `value`; other bytes unchanged.

    The inverse of `append_to_array`: an element on a line of its own goes with its line (and, when it was
    the last one without a trailing comma, with the comma that separated it)."""
    while True:
        _, _, members = _root(text, source)
        member = next((m for m in members if m.key == key), None)
        if member is None or text[member.start] != "[":
            return text
        _, elements = _container(text, member.start)
        index = next((i for i, e in enumerate(elements) if loads(text[e.start:e.end], source=source) == value), None)
        if index is None:
            return text
        text = _cut(text, elements, index)


def _cut(text: str, elements: list[Span], index: int) -> str:
    span, last = elements[index], index == len(elements) - 1
    after = _skip(text, span.end)
    comma_after = after < len(text) and text[after] == ","
    if len(elements) == 1:
        if _indent_before(text, span.start) is not None:
            return text[:text.rfind("\n", 0, span.start)] + text[(after + 1) if comma_after else span.end:]
        return text[:span.start] + text[(after + 1) if comma_after else span.end:]
    if _indent_before(text, span.start) is not None:  # on a line of its own: the line goes
        line_start = text.rfind("\n", 0, span.start)
        if comma_after:
            return text[:line_start] + text[after + 1:]
        previous = _skip_inline(text, elements[index - 1].end)
        if last and previous < len(text) and text[previous] == ",":  # the separator appended with it
            return text[:previous] + text[previous + 1:line_start] + text[span.end:]
        return text[:line_start] + text[span.end:]
    if index > 0:  # from the previous element's end: takes the separating comma with it
        return text[:elements[index - 1].end] + text[span.end:]
    return text[:span.start] + text[elements[1].start:]


__all__ = ["Span", "append_to_array", "array_values", "loads", "remove_from_array"]
