"""Applying drop decisions to a pass's canonical messages (the same code replays them every pass).

A decision is frozen in the tag row (status + drop mode), so the bytes it produces are a pure
function of the tag number and the raw input: `[dropped §N§]`, `[truncated §N§]\\n<preview>…`,
a tool arc removed whole, or its call kept with the output replaced.
"""

from __future__ import annotations

from magic_context.transform.tagger import Site
from magic_context.transform.tags import (
    KIND_MEDIA,
    KIND_TEXT,
    KIND_TOOL,
    MODE_EDIT_MARKER,
    MODE_PREVIEW,
    MODE_REMOVED,
    MODE_SKELETON,
    MODE_TRUNCATED,
    placeholder,
)
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

PREVIEW_CHARS: Final = 250
# What a dropped part still costs once served (the estimate reclaim and accounting use).
PLACEHOLDER_TOKENS: Final = 8
PREVIEW_TOKENS: Final = PREVIEW_CHARS // 3 + 8
PREVIEW_CUT_WINDOW: Final = 30
CONTENT_KINDS: Final = frozenset({m.TEXT, m.TOOL_CALL, m.TOOL_RESULT, m.MEDIA})
PATH_KEYS: Final = ("filePath", "file_path", "path", "filename", "file")


def truncated(number: int, text: str) -> str:
    """User text kept as a turn boundary: `[truncated §N§]` + newline + a ≤250-char preview."""
    if len(text) <= PREVIEW_CHARS:
        preview = text
    else:
        head = text[:PREVIEW_CHARS]
        cut = head.rfind(" ", PREVIEW_CHARS - PREVIEW_CUT_WINDOW)
        cut = max(cut, head.rfind("\n", PREVIEW_CHARS - PREVIEW_CUT_WINDOW))
        preview = (head[:cut] if cut > 0 else head).rstrip() + "…"
    return f"[truncated §{number}§]\n{preview}"


# Oversized live content (issue #14 item 2): a tool output or pasted text larger than its share of the window
# is served as its first and last lines under a header carrying its tag; the full text stays in the tag's
# stored source (what expand reads back).
LIVE_PREVIEW_HEAD_CHARS: Final = 6000
LIVE_PREVIEW_TAIL_CHARS: Final = 2000
LIVE_PREVIEW_TOKENS: Final = (LIVE_PREVIEW_HEAD_CHARS + LIVE_PREVIEW_TAIL_CHARS) // 2 + 60  # an upper bound


def _cut(text: str, at: int, *, forward: bool) -> int:
    """A cut near `at` on a line boundary when one is close (within 400 chars)."""
    line = text.rfind("\n", max(0, at - 400), at) if forward else text.find("\n", at, at + 400)
    return line + 1 if line >= 0 else at


def live_preview(number: int, text: str, tokens: int) -> str:
    """`[preview §N§ …]` + the first ~6000 and last ~2000 characters of an oversized `text`."""
    head_end = _cut(text, LIVE_PREVIEW_HEAD_CHARS, forward=True)
    tail_start = max(head_end, _cut(text, len(text) - LIVE_PREVIEW_TAIL_CHARS, forward=False))
    head, tail = text[:head_end], text[tail_start:]
    omitted = text[head_end:tail_start]
    lines = text.count("\n") + 1
    return (f"[preview §{number}§: {lines:,} lines, ~{tokens:,} tokens, too large for the context window; "
            f"shown: the first {head.count(chr(10)):,} and last {tail.count(chr(10)):,} lines. "
            f"The full text: `mc expand {number}` (ctx_expand §{number}§)]\n"
            f"{head}\n[… {omitted.count(chr(10)):,} lines / {len(omitted):,} characters omitted …]\n{tail}")


def default_mode(site: Site) -> str:
    """How a tag is dropped unless a lane chose otherwise."""
    if site.tag.kind == KIND_TOOL:
        return MODE_REMOVED
    if site.tag.kind == KIND_TEXT and site.role == m.USER:
        return MODE_TRUNCATED
    return "placeholder"


def mode_of(site: Site) -> str:
    """The mode a dropped tag is served in: its own (or the default), except that a pinned call (one
    in an atomic message, e.g. an OpenAI Responses reply tied to its reasoning) is never removed nor
    edited: it stays, and its output becomes the placeholder."""
    mode = site.tag.drop_mode or default_mode(site)
    if site.pinned and mode in (MODE_REMOVED, MODE_EDIT_MARKER):
        return MODE_SKELETON
    return mode


def edit_marker_input(value: object, number: int) -> object:
    """A superseded edit's call input: keep the file path, replace everything bulky."""
    marker: dict[str, object] = {"dropped": placeholder(number)}
    if isinstance(value, dict):
        for key in PATH_KEYS:
            if isinstance(value.get(key), str):
                return {key: value[key], **marker}
    return marker


def _placeholder_block(block: m.Block, number: int) -> m.Block:
    return m.Block(m.TEXT, text=placeholder(number), key=f"{block.key}:dropped", synthetic=True)


def removed_blocks(sites: list[Site]) -> tuple[set[int], set[int]]:
    """(id() of every block the drop decisions remove, indices of the messages those blocks sit in).

    Tool arcs go whole (call and results); a skeleton or edit marker keeps the call and first result.
    """
    removed: set[int] = set()
    touched: set[int] = set()
    for site in sites:
        tag = site.tag
        if not tag.dropped or tag.kind != KIND_TOOL:
            continue
        mode = mode_of(site)
        keep_call = mode in (MODE_SKELETON, MODE_EDIT_MARKER, MODE_PREVIEW) and site.call is not None \
            and site.results
        for mi, block in site.results[1:] if keep_call else site.results:
            removed.add(id(block))
            touched.add(mi)
        if site.call is not None and not keep_call:
            removed.add(id(site.call[1]))
            touched.add(site.call[0])
    return removed, touched


def fully_dropped(message: m.Message, removed: set[int]) -> bool:
    """True when a message carried content and the drops remove all of it (the whole turn goes)."""
    content = [b for b in message.blocks if b.kind in CONTENT_KINDS]
    return bool(content) and all(id(b) in removed for b in content)


def gone_messages(messages: list[m.Message], sites: list[Site]) -> tuple[set[int], set[int]]:
    """(removed block ids, indices of messages the drops empty entirely); only touched messages are checked."""
    removed, touched = removed_blocks(sites)
    return removed, {i for i in touched if fully_dropped(messages[i], removed)}


def apply(messages: list[m.Message], sites: list[Site], stripped_reasoning: set[str]) -> list[m.Message]:
    """Rewrite dropped parts in place; return the messages still worth sending."""
    removed, gone = gone_messages(messages, sites)
    for site in sites:
        tag = site.tag
        if not tag.dropped:
            continue
        mode = mode_of(site)
        if mode == MODE_PREVIEW:
            if tag.kind == KIND_TOOL and site.results:
                site.results[0][1].text = live_preview(tag.number, site.text, tag.tokens)
            elif site.block is not None:
                site.block.text = live_preview(tag.number, site.block.text, tag.tokens)
        elif tag.kind == KIND_TEXT and site.block is not None:
            text = site.block.text
            site.block.text = truncated(tag.number, text) if mode == MODE_TRUNCATED else placeholder(tag.number)
        elif tag.kind == KIND_MEDIA and site.block is not None:
            blocks = messages[site.message_index].blocks
            blocks[blocks.index(site.block)] = _placeholder_block(site.block, tag.number)
        elif tag.kind == KIND_TOOL and mode in (MODE_SKELETON, MODE_EDIT_MARKER) and site.call and site.results:
            site.results[0][1].text = placeholder(tag.number)
            if mode == MODE_EDIT_MARKER:
                site.call[1].input = edit_marker_input(site.call[1].input, tag.number)
    kept: list[m.Message] = []
    for index, msg in enumerate(messages):
        if index in gone:
            continue  # everything it carried was dropped: the whole turn goes (reasoning with it)
        if removed:
            msg.blocks = [b for b in msg.blocks if id(b) not in removed]
        if msg.id in stripped_reasoning:
            msg.blocks = [b for b in msg.blocks if b.kind != m.REASONING]
        kept.append(msg)
    return kept


__all__ = [
    "LIVE_PREVIEW_TOKENS", "PREVIEW_CHARS", "apply", "default_mode", "edit_marker_input", "fully_dropped",
    "gone_messages", "live_preview", "mode_of",
    "removed_blocks",
    "truncated",
]
