"""Lenient parsing of the historian's XML-ish output (reference §4.2–4.3).

Models get the format slightly wrong: attributes in any order, mismatched tier closers
(`<p1>…</p2>`), missing middle tiers, a forgotten `</compartment>`, output cut off by a length cap.
The parser keeps everything it can read and records what it could not; `validate.py` then decides,
strictly, whether the result may be published. Stdlib only; never raises on malformed text.
"""

from __future__ import annotations

import re

from magic_context.records import Factory, record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any

FACT_CATEGORIES = ("PROJECT_RULES", "ARCHITECTURE", "CONSTRAINTS", "CONFIG_VALUES", "NAMING")
SECTIONS = ("output", "compartments", "facts", "events", "user_observations", "primer_candidates", "meta")

# A compartment ends at its closer, or (lenient) at the next opener / container closer; \Z = cut off.
_COMPARTMENT = re.compile(
    r"<compartment\s+([^>]*?)\s*>(.*?)(?:(</compartment\s*>)|(?=<compartment\s)|(?=</compartments\s*>)|\Z)",
    re.DOTALL,
)
_CUT_OPENER = re.compile(r"<compartment\s[^>]*\Z")
_ATTR = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_TIER_OPEN = [re.compile(rf"<p{n}\s*(/?)>") for n in range(1, 5)]
_TIER_CLOSE_ANY = re.compile(r"</p\d")
_TIER_OPEN_ANY = re.compile(r"<p\d")
_CATEGORY_BLOCK = re.compile(r"<([A-Za-z][A-Za-z0-9_]*)\s*>(.*?)</\1\s*>", re.DOTALL)
_STAR_ITEM = re.compile(r"^[ \t]*\*[ \t]*(\S.*)$", re.MULTILINE)
_PRIMER_ELEMENT = re.compile(r"<primer\b([^>]*)>(.*?)</primer\s*>", re.DOTALL)
_PRIMER_BULLET = re.compile(r"^[ \t]*(?:\*|-|\d+\.)[ \t]*(\S.*)$", re.MULTILINE)
_EVENT_ELEMENT = re.compile(r"<([A-Za-z_][\w-]*)(\s[^>]*?)?>(.*?)</\1\s*>", re.DOTALL)
_EVENT_FIELD = re.compile(r"<([A-Za-z_][\w-]*)\s*>(.*?)</\1\s*>", re.DOTALL)
_PROCESSED = re.compile(r"<messages_processed>\s*(\d+)\s*(?:-\s*(\d+))?\s*</messages_processed>")
_UNPROCESSED = re.compile(r"<unprocessed_from>\s*(\d+)\s*</unprocessed_from>")
_ENTITY = re.compile(r"&(amp|apos|quot|lt|gt|#\d+|#[xX][0-9A-Fa-f]+);")
_NAMED = {"amp": "&", "apos": "'", "quot": '"', "lt": "<", "gt": ">"}


@record(frozen=True)
class ParsedCompartment:
    """One `<compartment>`; `p1..p4` are None for a flat (untiered) compartment. A lean one (`lean`: p2 without
    p1, the format a model is asked for) has p1 None, and p4 None unless given, until `tiers.fill` adds them."""

    start: int
    end: int
    title: str
    content: str
    p1: str | None = None
    p2: str | None = None
    p3: str | None = None
    p4: str | None = None
    importance: int | None = None
    episode_type: str | None = None
    closed: bool = True

    @property
    def tiered(self) -> bool:
        return bool(self.p1)

    @property
    def lean(self) -> bool:
        return not self.p1 and bool(self.p2)


@record(frozen=True)
class ParsedFact:
    category: str
    content: str


@record(frozen=True)
class ParsedEvent:
    """Any element inside `<events>` carrying `at_compartment` (a 1-based index into this output)."""

    kind: str
    at_compartment: int | None
    fields: dict[str, str]


@record(frozen=True)
class ParsedPrimer:
    """A primer question; `at_compartment` is the origin compartment's start ordinal (None: bullet form)."""

    question: str
    at_compartment: int | None = None


@record
class ParsedOutput:
    """Everything read from one historian answer, plus what was dropped and whether it was cut off."""

    compartments: list[ParsedCompartment] = Factory(factory=list)
    facts: list[ParsedFact] = Factory(factory=list)
    dropped_facts: int = 0
    dropped_categories: list[str] = Factory(factory=list)
    events: list[ParsedEvent] = Factory(factory=list)
    user_observations: list[str] = Factory(factory=list)
    primers: list[ParsedPrimer] = Factory(factory=list)
    messages_processed: tuple[int, int] | None = None
    unprocessed_from: int | None = None
    truncated: bool = False
    warnings: list[str] = Factory(factory=list)


def unescape_xml(text: str) -> str:
    """Single-pass unescape of the five XML entities and numeric character references."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _NAMED:
            return _NAMED[name]
        try:
            code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
            return chr(code)
        except (ValueError, OverflowError):
            return match.group(0)

    return _ENTITY.sub(repl, text)


def _attrs(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTR.finditer(text)}


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def extract_tier(inner: str, n: int) -> str | None:
    """Body of `<pN>`: "" for `<pN/>`, None when absent. Ends at any `</p\\d` or the next `<p\\d`."""
    opened = _TIER_OPEN[n - 1].search(inner)
    if opened is None:
        return None
    if opened.group(1) == "/":
        return ""
    rest = inner[opened.end():]
    close = _TIER_CLOSE_ANY.search(rest)
    body = rest if close is None else rest[: close.start()]
    nxt = _TIER_OPEN_ANY.search(body)
    if nxt is not None:
        body = body[: nxt.start()]
    return unescape_xml(body.strip())


def _compartment(attrs_text: str, inner: str, closed: bool, out: ParsedOutput) -> ParsedCompartment | None:
    attrs = _attrs(attrs_text)
    start, end = _int(attrs.get("start")), _int(attrs.get("end"))
    title = unescape_xml(attrs.get("title", "")).strip()
    if start is None or end is None or not title:
        out.warnings.append(f"skipped a compartment without a valid start, end and title: <compartment {attrs_text}>")
        return None
    episode = attrs.get("episode_type")
    common: dict[str, Any] = {
        "start": start,
        "end": end,
        "title": title,
        "importance": _int(attrs.get("importance")),
        "episode_type": unescape_xml(episode) if episode is not None else None,
        "closed": closed,
    }
    p1, p2 = extract_tier(inner, 1), extract_tier(inner, 2)
    if p1:
        p3, p4 = extract_tier(inner, 3), extract_tier(inner, 4)
        p2 = p1 if p2 is None else p2
        p3 = p2 if p3 is None else p3
        return ParsedCompartment(content=p1, p1=p1, p2=p2, p3=p3, p4=p4 or "", **common)
    if p2:  # the lean answer a model is asked for: p1 and p4 (None here) are written by code (`tiers.fill`)
        p3 = extract_tier(inner, 3)
        return ParsedCompartment(content=p2, p2=p2, p3=p2 if p3 is None else p3, p4=extract_tier(inner, 4),
                                 **common)
    flat = unescape_xml(inner.strip())
    if not flat:
        out.warnings.append(f"skipped empty compartment {start}-{end}")
        return None
    return ParsedCompartment(content=flat, **common)


def _section(text: str, name: str) -> str | None:
    # The first complete `<name>…</name>`; None when absent or never closed.
    opened = re.search(rf"<{name}\s*>", text)
    if opened is None:
        return None
    closed = re.compile(rf"</{name}\s*>").search(text, opened.end())
    return None if closed is None else text[opened.end(): closed.start()]


def _truncated_sections(text: str) -> list[str]:
    cut = []
    for name in SECTIONS:
        opened = re.search(rf"<{name}\s*>", text)
        if opened is not None and re.compile(rf"</{name}\s*>").search(text, opened.end()) is None:
            cut.append(name)
    return cut


def _parse_facts(block: str, out: ParsedOutput) -> None:
    for match in _CATEGORY_BLOCK.finditer(block):
        category = match.group(1).upper()
        items = [unescape_xml(m.group(1).strip()) for m in _STAR_ITEM.finditer(match.group(2))]
        items = [item for item in items if item]
        if category not in FACT_CATEGORIES:
            out.dropped_facts += len(items)
            if category not in out.dropped_categories:
                out.dropped_categories.append(category)
            continue
        out.facts.extend(ParsedFact(category, item) for item in items)


def _parse_events(block: str) -> list[ParsedEvent]:
    events = []
    for match in _EVENT_ELEMENT.finditer(block):
        attrs = _attrs(match.group(2) or "")
        if "at_compartment" not in attrs:
            continue
        fields = {}
        for item in _EVENT_FIELD.finditer(match.group(3)):
            value = unescape_xml(item.group(2).strip())
            if value:
                fields[item.group(1)] = value
        events.append(ParsedEvent(match.group(1), _int(attrs["at_compartment"]), fields))
    return events


def _parse_primers(block: str) -> list[ParsedPrimer]:
    elements = list(_PRIMER_ELEMENT.finditer(block))
    if elements:
        primers = []
        for match in elements:
            question = unescape_xml(match.group(2).strip())
            if question:
                primers.append(ParsedPrimer(question, _int(_attrs(match.group(1)).get("at_compartment"))))
        return primers
    bullets = (unescape_xml(m.group(1).strip()) for m in _PRIMER_BULLET.finditer(block))
    return [ParsedPrimer(q) for q in bullets if q]


def parse_historian_output(text: str) -> ParsedOutput:
    """Read compartments, facts, events, observations, primers and meta from one historian answer.

    Compartments are sorted by start. A compartment that never closes before the end of the text
    is dropped and marks the output truncated; one followed by another opener is kept with a warning.
    """
    out = ParsedOutput()
    cut = _truncated_sections(text)
    for match in _COMPARTMENT.finditer(text):
        closed = match.group(3) is not None
        if not closed and match.end() == len(text):
            out.truncated = True
            out.warnings.append("the last compartment was cut off before </compartment> and was ignored")
            continue
        parsed = _compartment(match.group(1), match.group(2), closed, out)
        if parsed is not None:
            if not closed:
                out.warnings.append(f"compartment {parsed.start}-{parsed.end} has no </compartment>")
            out.compartments.append(parsed)
    out.compartments.sort(key=lambda c: c.start)
    if _CUT_OPENER.search(text):
        out.truncated = True
        out.warnings.append("output ends inside a <compartment> opening tag")
    if cut:
        out.truncated = True
        out.warnings.append("output cut off: no closing tag for " + ", ".join(f"<{name}>" for name in cut))
    facts = _section(text, "facts")
    if facts is not None:
        _parse_facts(facts, out)
    events = _section(text, "events")
    if events is not None:
        out.events = _parse_events(events)
    observations = _section(text, "user_observations")
    if observations is not None:
        items = (unescape_xml(m.group(1).strip()) for m in _STAR_ITEM.finditer(observations))
        out.user_observations = [item for item in items if item]
    primers = _section(text, "primer_candidates")
    if primers is not None:
        out.primers = _parse_primers(primers)
    processed = _PROCESSED.search(text)
    if processed is not None:
        first = int(processed.group(1))
        out.messages_processed = (first, int(processed.group(2) or first))
    unprocessed = _UNPROCESSED.search(text)
    if unprocessed is not None:
        out.unprocessed_from = int(unprocessed.group(1))
    return out


__all__ = [
    "FACT_CATEGORIES",
    "ParsedCompartment",
    "ParsedEvent",
    "ParsedFact",
    "ParsedOutput",
    "ParsedPrimer",
    "extract_tier",
    "parse_historian_output",
    "unescape_xml",
]
