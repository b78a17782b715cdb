"""Property: whatever memory changes happen between passes, the head's recorded visible ids are exactly the
memories the served m[0]/m[1] show (minus those m[1] marks removed or superseded), m[0] only changes on a
fold, and a fold shows every eligible memory (the budget is ample here)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_memory_head import MINUTE, NOW, chat, heads, serve

from magic_context import project
from magic_context.errors import BadInput, NotFound
from magic_context.memory import engine, model
from magic_context.store import db
from magic_context.store import memories as store
from magic_context.tools.reduce import find_session

LINE = re.compile(r"^#(\d+): ", re.MULTILINE)
GONE = re.compile(r'<(?:removed|superseded) id="(\d+)"')
OPS = st.lists(st.tuples(st.sampled_from(["add", "edit", "archive", "restore", "merge", "rm"]),
                         st.integers(0, 7), st.integers(0, 7)), max_size=6)
_RUNS = itertools.count()


def _apply(conn, pid: str, step: tuple[str, int, int], now: int) -> None:
    op, a, b = step
    ids = [r["id"] for r in store.select(conn, pid)]
    pick = (lambda i: ids[i % len(ids)]) if ids else (lambda i: 10_000)
    try:
        if op == "add" or not ids:
            engine.add(conn, pid, f"fact {a} {b}", model.CATEGORIES[a % 5], now_ms=now)
        elif op == "edit":
            engine.edit(conn, pick(a), content=f"edited {a} {b} {now}", now_ms=now)
        elif op == "archive":
            engine.archive(conn, [pick(a)], now_ms=now)
        elif op == "restore":
            engine.restore(conn, pick(a), now_ms=now)
        elif op == "merge":
            engine.merge(conn, [pick(a), pick(b)], now_ms=now)
        else:
            engine.remove(conn, [pick(a)], now_ms=now)
    except (BadInput, NotFound):  # refusals (archived, other category, …) change nothing
        pass


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=OPS, second=OPS)
def test_visible_ids_match_what_the_head_shows(tmp_path: Path, first, second) -> None:
    run = next(_RUNS)
    proj = tmp_path / f"proj{run}"
    proj.mkdir()
    pid = project.identity(proj)
    session = f"ses_prop_{run}"
    conn = db.open_db()
    try:
        for op in first:
            _apply(conn, pid, op, NOW)
        conv = chat(1)
        m0, m1 = heads(serve(proj, conv, NOW, session=session)[0])
        pk = find_session(conn, session)
        shown = {int(i) for i in LINE.findall(m0)}
        assert shown == {r["id"] for r in store.eligible(conn, pid, NOW)}
        assert set(store.visible_ids(conn, pk)) == shown
        for op in second:
            _apply(conn, pid, op, NOW + 1)
        big = [*conv, {"role": "user", "content": "x " * 7000}]  # over 65% of 10 000 (OpenAI Chat), under 85%
        served, report = serve(proj, big, NOW + MINUTE, limit=10_000, session=session)
        soft_m0, soft_m1 = heads(served)
        # a pass over the threshold that frees nothing busts only to show a changed m[1] (reclaim.worth_a_bust)
        assert report["pass"] == ("defer" if soft_m1 == m1 else "execute") and soft_m0 == m0
        gone = {int(i) for i in GONE.findall(soft_m1)}
        expected = (shown - gone) | {int(i) for i in LINE.findall(soft_m1)}
        assert set(store.visible_ids(conn, pk)) == expected
        assert gone <= shown
        folded, report = serve(proj, conv, NOW + 30 * MINUTE, session=session)
        hard_m0, _ = heads(folded)
        assert report["pass"] == "fold"
        eligible = {r["id"] for r in store.eligible(conn, pid, NOW + 30 * MINUTE)}
        assert {int(i) for i in LINE.findall(hard_m0)} == eligible
    finally:
        conn.close()
