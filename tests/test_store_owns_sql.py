"""`store/` owns SQL: the rest of the engine calls named functions in `magic_context/store/` and never runs SQL
itself. The only exceptions are listed here, each with its reason; a new call outside `store/` fails this test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL_CALL = re.compile(r"\.(?:execute|executemany|executescript)\(")

# path -> (number of SQL calls, why they are not in store/ yet)
ALLOWED: dict[str, tuple[int, str]] = {}


def sql_calls() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted((ROOT / "magic_context").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("magic_context/store/"):
            continue
        count = len(SQL_CALL.findall(path.read_text(encoding="utf-8")))
        if count:
            found[rel] = count
    return found


def test_only_store_runs_sql() -> None:
    assert sql_calls() == {path: count for path, (count, _why) in ALLOWED.items()}
    assert all(why.strip() for _count, why in ALLOWED.values())


def test_commands_and_wizard_run_no_sql() -> None:
    for folder in ("commands", "wizard"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            assert not SQL_CALL.search(path.read_text(encoding="utf-8")), path
