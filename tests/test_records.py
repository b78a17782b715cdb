"""`@record` (the hot path's dataclass stand-in) and its cache of compiled initializers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from magic_context.records import Factory, record

REPO = Path(__file__).resolve().parents[1]


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list = Factory(factory=list)


def test_record_fields_defaults_factories_and_methods() -> None:
    a, b = Point(1), Point(1)
    assert (a.x, a.y, a.tags) == (1, 0, [])
    assert a.tags is not b.tags  # a fresh factory value per instance
    assert Factory(list).fn is list  # positional still works at run time (older call sites)
    assert a == b and a != Point(1, 2) and a != (1, 0, [])
    assert repr(Point(1, 2, [3])) == "Point(x=1, y=2, tags=[3])"
    assert Point.__slots__ == ("x", "y", "tags")
    assert hash(Point(1, 2, ())) == hash(Point(1, 2, ()))


def _import_hot_path(data_dir: Path) -> str:
    """Import the transform hot path in a fresh process; returns '<compiled any?> <initializers known>'."""
    code = ("import magic_context.transform.pipeline as _; from magic_context import records; "
            "print(records._cache.unsaved, len(records._cache.codes)); records.save_code_cache()")
    env = {**os.environ, "MAGIC_CONTEXT_STORAGE_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return proc.stdout.strip()


def test_initializers_are_compiled_once_then_loaded_from_the_cache(tmp_path: Path) -> None:
    data = tmp_path / "data"
    unsaved, count = _import_hot_path(data).split()
    assert unsaved == "True" and int(count) > 10
    cache = next((data / "cache").glob("records.*.marshal"))
    assert oct(cache.stat().st_mode & 0o777) == "0o600"
    assert _import_hot_path(data) == f"False {count}"  # nothing compiled: every initializer came from disk

    cache.write_bytes(cache.read_bytes()[:-40] + b"\x00" * 40)  # corrupt: checksum fails, compile again
    assert _import_hot_path(data) == f"True {count}"
    assert _import_hot_path(data) == f"False {count}"  # ... and the rewritten cache is whole again


def test_no_cache_file_under_pytest_without_a_storage_override(tmp_path: Path, monkeypatch) -> None:
    from magic_context import records

    monkeypatch.delenv("MAGIC_CONTEXT_STORAGE_DIR")
    assert records._cache_file() is None
    monkeypatch.setenv("MAGIC_CONTEXT_STORAGE_DIR", str(tmp_path))
    assert records._cache_file().startswith(str(tmp_path))


@record(frozen=True)
class _Limits:
    kind: ClassVar[str] = "limits"  # a class constant, not a field
    soft: int
    hard: int = 10


def test_classvar_is_not_a_field_and_replace_and_as_dict_copy() -> None:
    from magic_context.records import as_dict, replace

    a = _Limits(1)
    assert _Limits.__record_fields__ == ("soft", "hard") and a.kind == "limits"
    b = replace(a, hard=20)
    assert b == _Limits(1, 20) and a == _Limits(1, 10)  # a copy: the original is untouched
    assert as_dict(b) == {"soft": 1, "hard": 20}


def test_one_record_style_throughout() -> None:
    """`@record` everywhere (PEP 681 makes it a dataclass to the type checker): no `dataclasses` in mc's code."""
    offenders = [str(p.relative_to(REPO)) for folder in ("magic_context", "commands", "wizard")
                 for p in sorted((REPO / folder).rglob("*.py"))
                 if re.search(r"^\s*(?:from dataclasses import|import dataclasses)", p.read_text(), re.M)]
    assert offenders == []
