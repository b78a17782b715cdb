"""Automatic reclaim lanes that ride a pass which already busts the cache (never originate one).

Each lane returns drop decisions; the caller freezes them in the tag rows so later passes replay
the same bytes. Protected tags (the newest `protected_tags`) and open tool arcs are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from magic_context.records import record
from magic_context.transform.tagger import Site
from magic_context.transform.tags import KIND_TOOL, MODE_EDIT_MARKER, MODE_REMOVED
from magic_context.wire import jsonio
from magic_context.wire import model as m

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

REDUCE_KEEP: Final = 3
TODO_KEEP: Final = 1
TODO_TOOLS: Final = frozenset({"todowrite", "todo_write", "todo"})
EDIT_TOOLS: Final = frozenset({"edit", "write", "multiedit", "str_replace_editor", "str_replace_based_edit_tool",
                               "apply_patch", "patch", "create_file", "write_file", "edit_file"})
META_TOOLS: Final = frozenset({"bash_status", "bash_kill"})
# Providers whose old reasoning may be removed whole (Anthropic strips prior-turn thinking itself).
REASONING_REMOVABLE: Final = frozenset({m.ANTHROPIC, m.OPENCODE, m.PI})


@record(frozen=True)
class Drop:
    site: Site
    mode: str
    lane: str


def base_name(tool_name: str | None) -> str:
    """`mcp__magic-context__ctx_reduce` → `ctx_reduce`; lower-cased."""
    name = (tool_name or "").lower()
    return name.rsplit("__", 1)[-1]


def _completed_tools(sites: Iterable[Site], protected_from: int) -> list[Site]:
    return [s for s in sites if s.tag.kind == KIND_TOOL and not s.tag.dropped and s.results
            and s.tag.number < protected_from]


def age_drops(sites: list[Site], newest: int, max_age: int, protected_from: int) -> list[Drop]:
    """Tool outputs older than `max_age` tags (auto_drop_tool_age)."""
    return [Drop(s, MODE_REMOVED, "age") for s in _completed_tools(sites, protected_from)
            if newest - s.tag.number >= max_age]


def _call_signature(site: Site) -> str | None:
    if site.call is None:
        return None
    block = site.call[1]
    try:
        args = jsonio.text(block.input, sort_keys=True)
    except (TypeError, ValueError):
        args = repr(block.input)
    return f"{base_name(block.tool_name)}\x00{args}"


def duplicate_drops(sites: list[Site], protected_from: int) -> list[Drop]:
    """Identical tool calls (same tool, same arguments): all but the newest go."""
    newest_by_signature: dict[str, int] = {}
    for site in sites:
        signature = _call_signature(site) if site.tag.kind == KIND_TOOL else None
        if signature is not None:
            newest_by_signature[signature] = site.tag.number
    drops = []
    for site in _completed_tools(sites, protected_from):
        signature = _call_signature(site)
        if signature is not None and newest_by_signature.get(signature, site.tag.number) > site.tag.number:
            drops.append(Drop(site, MODE_REMOVED, "duplicate"))
    return drops


def _keep_newest(sites: list[Site], names: frozenset[str], keep: int, protected_from: int, lane: str) -> list[Drop]:
    matching = [s for s in sites if s.tag.kind == KIND_TOOL and base_name(s.tag.tool_name) in names]
    stale = matching[:-keep] if keep else matching
    candidates = {id(s) for s in _completed_tools(stale, protected_from)}
    return [Drop(s, MODE_REMOVED, lane) for s in stale if id(s) in candidates]


def stale_reduce_drops(sites: list[Site], protected_from: int) -> list[Drop]:
    """Spent ctx_reduce calls, keeping the newest three as exemplars."""
    return _keep_newest(sites, frozenset({"ctx_reduce"}), REDUCE_KEEP, protected_from, "stale_reduce")


def _edit_path(site: Site) -> str | None:
    if site.call is None or not isinstance(site.call[1].input, dict):
        return None
    for key in ("filePath", "file_path", "path", "filename"):
        value = site.call[1].input.get(key)
        if isinstance(value, str):
            return value
    return None


def smart_drops(sites: list[Site], protected_from: int) -> list[Drop]:
    """Opt-in: superseded todo writes, zero-value meta tools, and older edits of a file (→ edit marker)."""
    drops = _keep_newest(sites, TODO_TOOLS, TODO_KEEP, protected_from, "superseded_todo")
    drops += [Drop(s, MODE_REMOVED, "meta_tool") for s in _completed_tools(sites, protected_from)
              if base_name(s.tag.tool_name) in META_TOOLS]
    newest_edit: dict[str, int] = {}
    for site in sites:
        if site.tag.kind == KIND_TOOL and base_name(site.tag.tool_name) in EDIT_TOOLS:
            path = _edit_path(site)
            if path:
                newest_edit[path] = site.tag.number
    for site in _completed_tools(sites, protected_from):
        if base_name(site.tag.tool_name) in EDIT_TOOLS:
            path = _edit_path(site)
            if path and newest_edit[path] > site.tag.number:
                drops.append(Drop(site, MODE_EDIT_MARKER, "superseded_edit"))
    return drops


def old_reasoning(messages: list[m.Message], sites: list[Site], harness: str, *, newest: int, max_age: int,
                  protected_from: int) -> set[str]:
    """Ids of assistant messages whose reasoning may be removed whole (old, and the provider allows it)."""
    if harness not in REASONING_REMOVABLE:
        return set()
    newest_tag_of: dict[int, int] = {}
    for site in sites:
        newest_tag_of[site.message_index] = max(newest_tag_of.get(site.message_index, 0), site.tag.number)
    last_assistant = max((i for i, msg in enumerate(messages) if msg.role == m.ASSISTANT), default=-1)
    out = set()
    for index, message in enumerate(messages):
        if message.role != m.ASSISTANT or index == last_assistant:
            continue
        number = newest_tag_of.get(index)
        if number is None or number >= protected_from or newest - number < max_age:
            continue
        if any(b.kind == m.REASONING for b in message.blocks):
            out.add(message.id)
    return out


def dedupe(drops: Iterable[Drop]) -> list[Drop]:
    """One decision per tag: the first lane to claim it wins."""
    seen: set[int] = set()
    out = []
    for drop in drops:
        if drop.site.tag.number not in seen and not drop.site.tag.dropped:
            seen.add(drop.site.tag.number)
            out.append(drop)
    return out


__all__ = [
    "Drop",
    "age_drops",
    "base_name",
    "dedupe",
    "duplicate_drops",
    "old_reasoning",
    "smart_drops",
    "stale_reduce_drops",
]
