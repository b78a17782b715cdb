"""Audit (#12 acceptance): memory claims no earlier test could fail on — the auto-promotion gates at publish
(`memory.enabled`, `memory.auto_promote`) and m001 left as it landed."""

from __future__ import annotations

import hashlib
import inspect

import pytest
from historian_helpers import NOW, PiBuilder, compartments, store_pi

from magic_context.config.model import MCConfig
from magic_context.history import runner


def _session(conn) -> int:
    b = PiBuilder().user("Never commit secrets to the repo.").say("Understood, I will not commit secrets.")
    b.user("ok").say("fine")
    return store_pi(conn, b.messages)


@pytest.mark.parametrize("memory", [{"auto_promote": False}, {"enabled": False}])
def test_a_publish_promotes_no_fact_when_promotion_is_off(conn, memory) -> None:
    pk = _session(conn)
    result = runner.run_once(conn, pk, keep=1, now_ms=NOW, config=MCConfig.model_validate({"memory": memory}))
    assert result.status == runner.PUBLISHED and compartments(conn, pk)  # compartments still publish
    assert result.facts == 0
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_a_publish_promotes_the_historians_facts_by_default(conn) -> None:
    pk = _session(conn)
    assert runner.run_once(conn, pk, keep=1, now_ms=NOW, config=MCConfig()).facts == 1
    row = conn.execute("SELECT source_type, status, seen_count FROM memories").fetchone()
    assert tuple(row) == ("historian", "active", 1)


# m001 as it landed (d3da507 … eb7b332, whose only change was `db["memories"]` → `db.table("memories")`).
# A schema change goes in a new migration: an edited m001 is never re-run on an existing database.
M001_SHA256 = "1d1efe1573bebb5245f55d5e16796b466088321e18164a811c6ec61f54bc2ae0"


def test_m001_is_never_edited() -> None:
    from magic_context.store import migrations

    source = inspect.getsource(migrations.m001_initial)
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == M001_SHA256, "m001 changed: add a new migration instead (#12: never edit m001)"


def _output(ranges: list[tuple[int, int]]) -> str:
    comps = "".join(f'<compartment start="{a}" end="{b}" title="t{a}"><p1>did {a}</p1><p2>x</p2><p3>x</p3><p4/>'
                    "</compartment>" for a, b in ranges)
    return (f"<output><compartments>{comps}</compartments>"
            "<facts><PROJECT_RULES>\n* Lines are at most 120 characters.\n</PROJECT_RULES></facts></output>")


@pytest.mark.parametrize(("split", "promoted"), [(False, 1), (True, 0)])
def test_a_publish_whose_last_compartment_was_discarded_promotes_no_fact(conn, split, promoted) -> None:
    """§1.4 gate 3: when the validator discards the last compartment (weak lookahead), the facts may describe the
    discarded tail, which the next run re-reads — so this publish promotes none (`promote_unanchored`)."""
    from magic_context.history import publish
    from magic_context.history.validate import validate_historian_output

    b = PiBuilder()
    for i in range(6):
        b.user(f"please update module {i}").say(f"updated src/m{i}.py")
    pk = store_pi(conn, b.messages)
    c = runner.plan(conn, pk, keep=0, emergency=False, protect_tokens=0, budget=32_000, harness="pi",
                    project_dir="/work/syn").chunk
    mid = (c.start + c.end) // 2
    mid += 1 - mid % 2  # end a compartment after an assistant reply (odd ordinals, from 0)
    ranges = [(c.start, mid), (mid + 1, c.end)] if split else [(c.start, c.end)]
    validated = validate_historian_output(_output(ranges), c.start, c.end)
    assert (validated.discarded is not None) is split
    result = publish.publish(conn, pk, validated, c, provider="test", model=None, now_ms=NOW, project_id="dir:syn",
                             session_id="syn")
    assert result.compartments == 1
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == promoted


def test_export_to_a_path_that_cannot_be_written_is_a_one_line_error(mc, tmp_path) -> None:
    """`mc memory export -o` into a missing folder was 'mc: internal error: FileNotFoundError' (exit 1)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    assert mc("memory", "add", "alpha fact", "-c", "NAMING", "--project", str(proj)).returncode == 0
    target = tmp_path / "missing" / "m.jsonl"
    result = mc("memory", "export", "--project", str(proj), "-o", str(target))
    err = result.stderr.decode()
    assert result.returncode == 2 and err.startswith(f"mc: error: cannot write {target}: ") and "internal" not in err
    assert len(err.strip().splitlines()) == 1 and not target.exists()


@pytest.mark.parametrize("args", [("memory", "add", "y", "-c", "NAMING"), ("memory", "list"), ("memory", "export"),
                                  ("note", "add", "x"), ("note", "list")])
def test_a_project_directory_that_does_not_exist_is_refused(mc, tmp_path, args) -> None:
    """`--project` with a typo filed memories and notes under the identity of a directory no one has."""
    missing = tmp_path / "no-such-project"
    result = mc(*args, "--project", str(missing))
    err = result.stderr.decode()
    assert result.returncode == 2 and f"--project {missing}: no such directory" in err, err
    from magic_context.store.db import open_db

    conn = open_db()
    try:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_session_note_is_anchored_at_the_sessions_last_message(mc) -> None:
    """§2.1: `anchor_ordinal` is the session's last message at write time; its search shows `@msg N` (§3.6)."""
    import json

    from search_helpers import session_with_history

    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-note")  # 14 messages: ordinals 0-13
    conn.close()
    added = json.loads(mc("note", "add", "look at the stripes again", "--session", "ses-note", "--json").stdout)
    assert added["data"]["note"]["anchor_ordinal"] == 13
    text = mc("search", "stripes again", "--session", "ses-note", "--source", "note").stdout.decode()
    assert "status=active today @msg 13" in text and "ctx_expand(start=N-10, end=N)" in text
    project = json.loads(mc("note", "add", "for everyone", "--json").stdout)["data"]["note"]
    assert project["anchor_ordinal"] is None  # no session, no anchor


HUGE = str(2**64)  # beyond SQLite's INTEGER range: binding it raised OverflowError ('mc: internal error', exit 1)


@pytest.mark.parametrize(("args", "needle"), [
    (("memory", "show", HUGE), f"memory #{HUGE} not found"),
    (("memory", "edit", HUGE, "--content", "x"), f"memory #{HUGE} not found"),
    (("memory", "archive", HUGE), f"memory #{HUGE} not found"),
    (("memory", "restore", HUGE), f"memory #{HUGE} not found"),
    (("memory", "rm", HUGE), f"memory #{HUGE} not found"),
    (("memory", "merge", HUGE, "1"), f"memory #{HUGE} not found"),
    (("note", "dismiss", HUGE), f"note #{HUGE} not found"),
    (("expand", "--session", "ses-huge", "--tag", HUGE), f"no tag {HUGE}"),
    (("reduce", HUGE, "--session", "ses-huge"), f"unknown tags {HUGE}"),
])
def test_an_id_beyond_sqlites_range_is_not_found_not_an_internal_error(mc, args, needle) -> None:
    from search_helpers import session_with_history

    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-huge")
    conn.close()
    result = mc(*args)
    err = result.stderr.decode()
    assert result.returncode == 2 and needle in err and "internal error" not in err, err


def test_a_huge_message_ordinal_or_id_query_is_an_empty_or_plain_result(mc) -> None:
    from search_helpers import session_with_history

    from magic_context.search import text as st
    from magic_context.store.db import open_db

    conn = open_db()
    session_with_history(conn, session_id="ses-huge2")
    conn.close()
    expanded = mc("expand", "--session", "ses-huge2", "--message", HUGE)
    assert expanded.returncode == 0 and expanded.stdout.decode().startswith("No messages found in range")
    assert st.id_query(f"#{HUGE}") is None and st.id_query("#12 15") == [12, 15]
    searched = mc("search", f"#{HUGE}", "--session", "ses-huge2")
    assert searched.returncode == 0 and "internal error" not in searched.stderr.decode()


@pytest.mark.parametrize("command", ["memory", "note"])
def test_a_huge_list_limit_means_no_limit(mc, command) -> None:
    result = mc(command, "list", "--limit", HUGE, "--json")
    assert result.returncode == 0, result.stderr.decode()


def test_listings_and_status_on_a_fresh_install_answer_none_and_create_no_database(mc, isolated_dirs,
                                                                                    tmp_path) -> None:
    """A command that only reads answers "none yet" before mc has stored anything, and leaves no database behind
    (`mc memory list`, `mc note list` and `mc status` created a 250 KB context.db just to say so)."""
    import json as _json

    from magic_context import paths

    project = tmp_path / "proj"
    project.mkdir()
    for args, key in ((("memory", "list", "--project", str(project), "--json"), "memories"),
                      (("memory", "export", "--project", str(project)), None),
                      (("note", "list", "--project", str(project), "--json"), "notes"),
                      (("status", "--latest", "--json"), "session")):
        result = mc(*args)
        assert result.returncode == 0, (args, result.stderr.decode())
        if key is not None:
            data = _json.loads(result.stdout)["data"]
            assert data[key] in ([], None), (args, data)
        else:
            assert result.stdout == b""
        assert not paths.db_path().exists() and not isolated_dirs["data"].joinpath("context.db").exists(), args
    assert mc("memory", "show", "3").returncode == 2 and not paths.db_path().exists()
    assert mc("memory", "add", "Keep lines short.", "--category", "NAMING", "--project", str(project)).returncode == 0
    assert paths.db_path().exists()  # the first write creates it
