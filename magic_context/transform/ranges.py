"""The ctx_reduce range syntax: "5", "3-5", "1,2,9", "1-5,8,12-15" (bare non-negative integers)."""

from __future__ import annotations

from typing import Final

from magic_context.errors import BadInput

MAX_ELEMENTS: Final = 1000


def parse_ranges(text: str) -> list[int]:
    """Sorted, de-duplicated tag numbers; BadInput on empty, malformed, reversed or oversized ranges."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput("empty drop range", fix='give tag numbers like "3-5,9"')
    numbers: set[int] = set()
    for raw in text.split(","):
        item = raw.strip().lstrip("§").rstrip("§")
        if not item:
            raise BadInput(f"empty element in range {text!r}", fix='give tag numbers like "3-5,9"')
        start_text, dash, end_text = item.partition("-")
        if not start_text.strip().isdigit() or (dash and not end_text.strip().isdigit()):
            raise BadInput(f"{raw.strip()!r} is not a tag number or range", fix='use bare integers: "3-5,9"')
        start = int(start_text)
        end = int(end_text) if dash else start
        if end < start:
            raise BadInput(f"reversed range {raw.strip()!r}", fix="write ranges low-high, e.g. 3-5")
        if end - start + 1 > MAX_ELEMENTS or len(numbers) + (end - start + 1) > MAX_ELEMENTS:
            raise BadInput(f"range {text!r} names more than {MAX_ELEMENTS} tags", fix="drop in smaller batches")
        numbers.update(range(start, end + 1))
    return sorted(numbers)


def format_ranges(numbers: list[int]) -> str:
    """Inverse of parse_ranges for display: [3,4,5,9] -> "3-5,9"."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


__all__ = ["MAX_ELEMENTS", "format_ranges", "parse_ranges"]
