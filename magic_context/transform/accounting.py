"""Token accounting for a pass without re-estimating the whole request.

Each raw message's estimate is cached by the raw store; a drop's saving comes from its tag's cached
estimates and is attributed to the message it shrinks. A message whose content was dropped entirely
costs nothing; removed reasoning is estimated once and remembered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from magic_context.transform import drops
from magic_context.transform.drops import LIVE_PREVIEW_TOKENS, PLACEHOLDER_TOKENS, PREVIEW_TOKENS
from magic_context.transform.tagger import Site
from magic_context.transform.tags import (
    KIND_MEDIA,
    KIND_TEXT,
    MODE_EDIT_MARKER,
    MODE_PREVIEW,
    MODE_REMOVED,
    MODE_SKELETON,
    MODE_TRUNCATED,
)
from magic_context.wire import model as m

MEDIA_TOKENS = 500
EDIT_MARKER_TOKENS = 24


def savings_by_message(sites: list[Site]) -> dict[int, int]:
    """Tokens each message (by input index) loses to the current drop decisions."""
    out: dict[int, int] = defaultdict(int)
    for site in sites:
        tag = site.tag
        if not tag.dropped:
            continue
        mode = drops.mode_of(site)
        if mode == MODE_PREVIEW:
            where = site.results[0][0] if tag.kind != KIND_TEXT and site.results else site.message_index
            out[where] += max(0, tag.tokens - LIVE_PREVIEW_TOKENS)
        elif tag.kind == KIND_TEXT:
            kept = PREVIEW_TOKENS if mode == MODE_TRUNCATED else PLACEHOLDER_TOKENS
            out[site.message_index] += max(0, tag.tokens - kept)
        elif tag.kind == KIND_MEDIA:
            out[site.message_index] += MEDIA_TOKENS - PLACEHOLDER_TOKENS
        elif site.results:
            first = site.results[0][0]
            if mode in (MODE_SKELETON, MODE_EDIT_MARKER):
                out[first] += max(0, tag.tokens - PLACEHOLDER_TOKENS)
                if mode == MODE_EDIT_MARKER and site.call is not None:
                    out[site.call[0]] += max(0, tag.input_tokens - EDIT_MARKER_TOKENS)
            else:
                out[first] += tag.tokens
                if site.call is not None and mode == MODE_REMOVED:
                    out[site.call[0]] += tag.input_tokens
    return out


def reasoning_tokens(messages: list[m.Message], stripped: set[str], cache: dict[str, int],
                     estimate: Callable[[str], int]) -> None:
    """Fill `cache` with the reasoning cost of each stripped message present (estimated once per message)."""
    for message in messages:
        if message.id in stripped and message.id not in cache:
            cache[message.id] = sum(estimate(b.text) for b in message.blocks if b.kind == m.REASONING)


def served_tokens(messages: list[m.Message], msg_tokens: list[int], sites: list[Site], *,
                  kept: list[m.Message] | None = None, stripped: set[str] | frozenset[str] = frozenset(),
                  reasoning: dict[str, int] | None = None) -> int:
    """Estimated tokens of the served messages (before head, system and prefixes).

    Messages whose content the drops remove entirely cost nothing (their reasoning goes with them);
    pass `kept` after `drops.apply`, or leave it None to derive the survivors from the decisions.
    """
    saved = savings_by_message(sites)
    if kept is None:
        _, gone = drops.gone_messages(messages, sites)
    else:
        survivors = {id(msg) for msg in kept}
        gone = {i for i, msg in enumerate(messages) if id(msg) not in survivors}
    total = 0
    for index, message in enumerate(messages):
        if index in gone:
            continue
        cost = msg_tokens[index] - saved.get(index, 0)
        if reasoning and message.id in stripped:
            cost -= reasoning.get(message.id, 0)
        total += max(0, cost)
    return total


__all__ = ["reasoning_tokens", "savings_by_message", "served_tokens"]
