"""transform/tags.py on a real database: a tag row round-trips field by field, drop decisions and pristine text
persist, and KnownTags reads the served messages' tags up front and fetches only tool tags it lacks."""

from __future__ import annotations

import sqlite3

from magic_context.store import raw as raw_store
from magic_context.store import tags as tag_rows
from magic_context.transform import tags
from magic_context.transform.tags import Tag


def stored(conn: sqlite3.Connection) -> tuple[int, list[Tag]]:
    pk = raw_store.ensure_session(conn, "pi", "tags-session", project_dir="/p", now_ms=1)
    rows = [Tag(1, "u1:p0", tags.KIND_TEXT, "u1", byte_size=10, tokens=3),
            Tag(2, "tool:c1@a1", tags.KIND_TOOL, "r1", byte_size=40, tokens=12, tool_name="read", input_tokens=7),
            Tag(3, "u2:p1", tags.KIND_MEDIA, "u2", status=tags.DROPPED, drop_mode=tags.MODE_PLACEHOLDER)]
    tags.insert_new(conn, pk, rows, 99)
    return pk, rows


def test_rows_round_trip_field_by_field(conn: sqlite3.Connection) -> None:
    pk, rows = stored(conn)
    assert tags.load(conn, pk) == {r.part_key: r for r in rows}
    created = conn.execute("SELECT DISTINCT created_at FROM tags WHERE session_pk = ?", (pk,)).fetchall()
    assert [tuple(r) for r in created] == [(99,)]
    assert [r.dropped for r in rows] == [False, False, True]


def test_drop_decisions_and_sources_persist(conn: sqlite3.Connection) -> None:
    pk, rows = stored(conn)
    rows[1].status, rows[1].drop_mode = tags.DROPPED, tags.MODE_EDIT_MARKER
    rows[2].status, rows[2].drop_mode = tags.ACTIVE, None
    tags.save_drops(conn, pk, rows[1:])
    loaded = tags.load(conn, pk)
    assert (loaded["tool:c1@a1"].status, loaded["tool:c1@a1"].drop_mode) == (tags.DROPPED, tags.MODE_EDIT_MARKER)
    assert (loaded["u2:p1"].status, loaded["u2:p1"].drop_mode) == (tags.ACTIVE, None)
    tags.save_source(conn, pk, [(1, "pristine"), (2, "output")])
    tags.save_source(conn, pk, [(1, "changed")])  # stored once
    assert [tag_rows.source(conn, pk, n) for n in (1, 2, 3)] == ["pristine", "output", None]


def test_known_tags_read_the_served_messages_and_fetch_missing_tool_tags(conn: sqlite3.Connection) -> None:
    pk, rows = stored(conn)
    known = tags.KnownTags.for_messages(conn, pk, ["u1"], any_stored=True)
    assert known.get("u1:p0") == rows[0]
    assert known.get("tool:c1@a1") == rows[1]  # recorded under r1, not served: fetched
    assert known.get("u2:p1") is None  # text/media keys are never fetched
    assert known.get("tool:missing@a9") is None
    conn.execute("DELETE FROM tags WHERE session_pk = ?", (pk,))
    assert known.get("tool:c1@a1") == rows[1]  # fetched once, then remembered
    copy = known.copy()
    assert copy.get("tool:c1@a1") == rows[1] and copy.get("u1:p0") == rows[0]
    new = Tag(9, "u9:p0", tags.KIND_TEXT, "u9")
    copy["u9:p0"] = new
    assert copy.get("u9:p0") is new and known.get("u9:p0") is None


def test_known_tags_without_stored_tags_never_query(conn: sqlite3.Connection) -> None:
    pk, rows = stored(conn)
    known = tags.KnownTags.for_messages(conn, pk, ["u1", "u2"], any_stored=False)
    assert known.get("u2:p1") == rows[2]  # read up front all the same
    assert known.get("tool:c1@a1") is None  # no fetch
    fetching = tags.KnownTags(conn, pk, {}, fetch=True).copy()
    assert fetching.get("tool:c1@a1") == rows[1]  # a copy keeps fetching
