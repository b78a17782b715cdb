"""Tag rows: one per taggable part (text, tool arc, media), numbered per session, monotonic.

A tag's number and its drop decision are persisted, so every later pass re-applies the same
bytes. Tool tags are keyed by (call id, owning message id) because OpenCode reuses call ids
per assistant turn.
"""

from __future__ import annotations

import sqlite3
from enum import StrEnum

from magic_context.records import record
from magic_context.store import tags as tag_rows

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final



class TagKind(StrEnum):
    """`tags.kind`: what a tag numbers."""

    TEXT = "text"
    TOOL = "tool"  # a tool arc: the call and its result(s)
    MEDIA = "media"


class TagStatus(StrEnum):
    """`tags.status`: a dropped tag stays dropped (its drop is replayed on every pass)."""

    ACTIVE = "active"
    DROPPED = "dropped"


class DropMode(StrEnum):
    """`tags.drop_mode`: how a dropped tag is shown, frozen at first application and replayed on every pass."""

    PLACEHOLDER = "placeholder"  # text → "[dropped §N§]"; media → a text part "[dropped §N§]"
    TRUNCATED = "truncated"  # user text → "[truncated §N§]\n<preview>…"
    REMOVED = "removed"  # tool arc: call and result(s) removed together (OpenCode: the whole part)
    SKELETON = "skeleton"  # tool arc: call kept, output → "[dropped §N§]"
    EDIT_MARKER = "edit_marker"  # superseded edit: call keeps its path, output → "[dropped §N§]"
    PREVIEW = "preview"  # oversized live content: a bounded head/tail preview carrying §N§ (tool: call kept)


KIND_TEXT: Final = TagKind.TEXT
KIND_TOOL: Final = TagKind.TOOL
KIND_MEDIA: Final = TagKind.MEDIA
ACTIVE: Final = TagStatus.ACTIVE
DROPPED: Final = TagStatus.DROPPED
MODE_PLACEHOLDER: Final = DropMode.PLACEHOLDER
MODE_TRUNCATED: Final = DropMode.TRUNCATED
MODE_REMOVED: Final = DropMode.REMOVED
MODE_SKELETON: Final = DropMode.SKELETON
MODE_EDIT_MARKER: Final = DropMode.EDIT_MARKER
MODE_PREVIEW: Final = DropMode.PREVIEW


def placeholder(number: int) -> str:
    """The one drop placeholder: a pure function of the tag number."""
    return f"[dropped §{number}§]"


@record
class Tag:
    number: int
    part_key: str
    kind: str
    message_id: str
    status: str = ACTIVE
    drop_mode: str | None = None
    byte_size: int = 0
    tokens: int = 0
    tool_name: str | None = None
    input_tokens: int = 0  # tool tags: the call's arguments (what removing the call saves besides the output)
    new: bool = False
    role: str = ""

    @property
    def dropped(self) -> bool:
        return self.status == DROPPED


# sqlite3 hands out a new str for every value: one shared copy of each kind, status and mode word instead
# (a 20 000-message session holds 20 000 tags: ~2.5 MB of peak RSS, issue #14 item 10).
_WORDS: Final = {w: w for w in (KIND_TEXT, KIND_TOOL, KIND_MEDIA, ACTIVE, DROPPED, MODE_PLACEHOLDER, MODE_TRUNCATED,
                                MODE_REMOVED, MODE_SKELETON, MODE_EDIT_MARKER, MODE_PREVIEW)}


def _tag(r: tuple) -> Tag:  # a row in `store.tags.COLUMNS` order
    words = _WORDS
    return Tag(r[0], r[1], words.get(r[2], r[2]), r[3], words.get(r[4], r[4]), words.get(r[5], r[5]), r[6], r[7],
               r[8], r[9])


def load(conn: sqlite3.Connection, session_pk: int) -> dict[str, Tag]:
    """All tags of a session keyed by part key."""
    return {r[1]: _tag(r) for r in tag_rows.load_rows(conn, session_pk)}


class KnownTags:
    """A session's tags by part key, for the messages a pass serves: those messages' tags are read up
    front; a tool tag recorded under another message (its result was rewritten since) is fetched when
    asked for. Folded history is never read, so a pass costs the same however long the session grows.

    Text and media keys begin with their message's id, which is the tag's `message_id`, so a miss
    there is a new part; a tool key names the call's message while the tag records the result's.
    """

    def __init__(self, conn: sqlite3.Connection, session_pk: int, tags: dict[str, Tag], *, fetch: bool) -> None:
        self._conn = conn
        self._session_pk = session_pk
        self._tags: dict[str, Tag | None] = dict(tags)
        self._fetch = fetch

    @classmethod
    def for_messages(cls, conn: sqlite3.Connection, session_pk: int, message_ids: list[str], *,
                     any_stored: bool) -> KnownTags:
        rows = tag_rows.rows_for_messages(conn, session_pk, message_ids)
        return cls(conn, session_pk, {r[1]: _tag(r) for r in rows}, fetch=any_stored)

    def get(self, key: str) -> Tag | None:
        if key in self._tags:
            return self._tags[key]
        tag = None
        if self._fetch and key.startswith("tool:"):
            row = tag_rows.row_by_part_key(self._conn, self._session_pk, key)
            tag = _tag(row) if row is not None else None
        self._tags[key] = tag
        return tag

    def __setitem__(self, key: str, tag: Tag) -> None:
        self._tags[key] = tag

    def copy(self) -> KnownTags:
        return KnownTags(self._conn, self._session_pk, {k: v for k, v in self._tags.items() if v is not None},
                         fetch=self._fetch)


def insert_new(conn: sqlite3.Connection, session_pk: int, tags: list[Tag], now_ms: int) -> None:
    tag_rows.insert_rows(conn, [(session_pk, t.number, t.part_key, t.kind, t.message_id, t.status, t.drop_mode,
                                 t.byte_size, t.tokens, t.input_tokens, t.tool_name, now_ms) for t in tags])


def save_drops(conn: sqlite3.Connection, session_pk: int, tags: list[Tag]) -> None:
    tag_rows.set_statuses(conn, session_pk, [(t.status, t.drop_mode, t.number) for t in tags])


def save_source(conn: sqlite3.Connection, session_pk: int, items: list[tuple[int, str]]) -> None:
    """Store pristine (pre-tag) text once per tag, for ctx_expand and compression."""
    tag_rows.save_sources(conn, session_pk, items)


__all__ = [
    "ACTIVE",
    "DROPPED",
    "KIND_MEDIA",
    "KIND_TEXT",
    "KIND_TOOL",
    "MODE_EDIT_MARKER",
    "MODE_PLACEHOLDER",
    "MODE_PREVIEW",
    "MODE_REMOVED",
    "MODE_SKELETON",
    "MODE_TRUNCATED",
    "DropMode",
    "KnownTags",
    "Tag",
    "TagKind",
    "TagStatus",
    "insert_new",
    "load",
    "placeholder",
    "save_drops",
    "save_source",
]
