"""Tagging: every text part, tool arc and media part gets a per-session tag number, stable across passes.

Tags are recorded for every part; the visible `§N§ ` prefix is written only while ctx_reduce is
available. Reasoning is never tagged or edited. Tags the model echoed back at the start of its
own text (including malformed forms such as `§12">§`) are stripped so they never accumulate.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from magic_context.records import Factory, record
from magic_context.transform.tags import KIND_MEDIA, KIND_TEXT, KIND_TOOL, KnownTags, Tag
from magic_context.wire import arcs, jsonio
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

# Echoes split by any whitespace go in one match: stripping is idempotent (a refolding pass tags
# already-stripped text again, and must serve what the next pass serves).
ECHO_RE: Final = re.compile(r"^(?:\s*§\d+(?:\"?>)?§(?:\d+§)?[ \t]*)+")
PREFIX_RE: Final = re.compile(r"^§(\d+)§ ")


def strip_echo(text: str) -> str:
    """Remove leading tag echoes (`§12§ `, `§12">§`, `§12">§12§`) the model copied into its reply."""
    match = ECHO_RE.match(text)
    return text[match.end():] if match else text


def prefix(number: int) -> str:
    return f"§{number}§ "


@record
class Site:
    """Where a tag lives in this pass's canonical messages.

    For text/media: `block` in message `message_index`. For tools: the call (when still present)
    and the result blocks answering it; `pinned` when the call sits in an atomic message (the provider
    rejects it partially), so a drop keeps the call and only blanks the output.
    """

    tag: Tag
    message_index: int
    block: m.Block | None
    role: str
    call: tuple[int, m.Block] | None = None
    results: list[tuple[int, m.Block]] = Factory(factory=list)
    pinned: bool = False

    @property
    def text(self) -> str:
        if self.tag.kind == KIND_TOOL:
            return "\n".join(b.text for _, b in self.results)
        return self.block.text if self.block is not None else ""


CallRef = tuple[int, m.Block]


def pair_tool_blocks(messages: list[m.Message]) -> tuple[dict[int, CallRef], dict[int, list[CallRef]]]:
    """Call of each result block and results of each call block (keyed by block id()), from `arcs.find_arcs`."""
    call_of: dict[int, CallRef] = {}
    results_of: dict[int, list[CallRef]] = {}
    for arc in arcs.find_arcs(messages):
        if arc.call is None:
            continue
        ci, cb = arc.call
        call = (ci, messages[ci].blocks[cb])
        results = [(mi, messages[mi].blocks[bi]) for mi, bi in arc.results]
        results_of[id(call[1])] = results
        for _, block in results:
            call_of[id(block)] = call
    return call_of, results_of


TOOL_CALL_OVERHEAD: Final = 12


def call_tokens(block: m.Block, estimate: Callable[[str], int]) -> int:
    """Estimated prompt cost of a tool call: its arguments as JSON plus a fixed overhead."""
    try:
        args = jsonio.text(block.input)
    except (TypeError, ValueError):
        args = str(block.input)
    return estimate(args) + TOOL_CALL_OVERHEAD


def _taggable(message: m.Message) -> bool:
    return message.role != m.SYSTEM and message.compaction is None and not message.synthetic


def assign(
    messages: list[m.Message],
    existing: KnownTags | dict[str, Tag],
    counter: int,
    estimate: Callable[[str], int],
) -> tuple[list[Site], list[Tag], int]:
    """Find every taggable part, reuse known tags, number new ones in message order."""
    call_of, results_of = pair_tool_blocks(messages)
    sites: list[Site] = []
    new_tags: list[Tag] = []
    seen_tool_keys: set[str] = set()

    def get_tag(key: str, kind: str, message: m.Message, text: str, tool_name: str | None = None, *,
                call: m.Block | None = None) -> Tag:
        nonlocal counter
        tag = existing.get(key)
        if tag is None:
            counter += 1
            tag = Tag(counter, key, kind, message.id, byte_size=len(text.encode("utf-8", "replace")),
                      tokens=estimate(text) if text else 0, tool_name=tool_name, new=True,
                      input_tokens=call_tokens(call, estimate) if call is not None else 0)
            existing[key] = tag
            new_tags.append(tag)
        tag.role = message.role
        return tag

    for mi, message in enumerate(messages):
        if not _taggable(message):
            continue
        for block in message.blocks:
            if block.kind == m.TEXT:
                key = f"{message.id}:{block.key}"
                if not block.text.strip() and existing.get(key) is None:
                    continue  # blank; a reply that was only tag echoes keeps its tag when tagged again (`refold`)
                if message.role == m.ASSISTANT:
                    block.text = strip_echo(block.text)
                tag = get_tag(key, KIND_TEXT, message, block.text, None)
                sites.append(Site(tag, mi, block, message.role))
            elif block.kind == m.MEDIA:
                tag = get_tag(f"{message.id}:{block.key}", KIND_MEDIA, message, "", None)
                sites.append(Site(tag, mi, block, message.role))
            elif block.kind == m.TOOL_RESULT:
                call = call_of.get(id(block))
                owner = messages[call[0]].id if call else message.id
                key = f"tool:{block.tool_id}@{owner}"
                if key in seen_tool_keys:
                    continue  # a second result block of an arc already tagged
                seen_tool_keys.add(key)
                results = results_of[id(call[1])] if call else [(mi, block)]
                text = "\n".join(b.text for _, b in results)
                name = block.tool_name or (call[1].tool_name if call else None)
                tag = get_tag(key, KIND_TOOL, message, text, name, call=call[1] if call else None)
                sites.append(Site(tag, mi, block, message.role, call=call, results=list(results),
                                  pinned=call is not None and messages[call[0]].atomic))
    return sites, new_tags, counter


def write_prefixes(sites: list[Site]) -> None:
    """Put the visible `§N§ ` prefix on active text parts and tool outputs (media stay unprefixed)."""
    for site in sites:
        if site.tag.dropped:
            continue
        if site.tag.kind == KIND_TEXT and site.block is not None:
            site.block.text = prefix(site.tag.number) + site.block.text
        elif site.tag.kind == KIND_TOOL and site.results:
            first = site.results[0][1]
            first.text = prefix(site.tag.number) + first.text


__all__ = ["ECHO_RE", "Site", "assign", "pair_tool_blocks", "prefix", "strip_echo", "write_prefixes"]
