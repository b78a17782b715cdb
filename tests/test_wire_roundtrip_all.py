"""Every message of every recorded session, rendered into each of the four formats, round-trips.

Each session's full history is decoded with its own codec, rendered fresh into every target format,
and the rendered JSON must survive decode → encode unchanged. Also: the wire layer and tokens.py
import nothing beyond the standard library, sqlite3 and orjson.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from magic_context.transform.protocol import CODECS
from magic_context.wire import model as m
from magic_context.wire.importers import load_session

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
FILES = sorted(p for p in SESSIONS.rglob("*") if p.suffix in (".jsonl", ".json"))


def _fresh(messages: list[m.Message]) -> list[m.Message]:
    for message in messages:
        message.raw = None
        for block in message.blocks:
            block.raw = None
            block.original = None
    return messages


@pytest.mark.parametrize("target", list(CODECS))
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_session_round_trips_in_every_format(path: Path, target: str) -> None:
    session = load_session(path)
    native = orjson.loads(orjson.dumps(session.messages))
    decoded = CODECS[session.harness].decode(native)
    assert len(decoded) == len(session.messages)
    rendered = CODECS[target].encode(_fresh(decoded))
    assert rendered, "rendering produced nothing"
    expected = orjson.loads(orjson.dumps(rendered))
    again = CODECS[target].encode(CODECS[target].decode(orjson.loads(orjson.dumps(rendered))))
    assert again == expected
    for before, after in zip(expected, again, strict=True):  # message by message, for a readable failure
        assert before == after


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_own_format_round_trip_is_exact(path: Path) -> None:
    session = load_session(path)
    native = orjson.loads(orjson.dumps(session.messages))
    codec = CODECS[session.harness]
    assert codec.encode(codec.decode(orjson.loads(orjson.dumps(native)))) == native


def test_wire_and_tokens_import_only_stdlib_sqlite_orjson() -> None:
    modules = ["magic_context.tokens", *(f"magic_context.wire.{p.stem}" for p in
                                         (Path(__file__).resolve().parents[1] / "magic_context" / "wire").glob("*.py")
                                         if p.stem != "__init__")]
    code = ("import sys, importlib\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print('\\n'.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    baseline = subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sorted(sys.modules)))"],
                              capture_output=True, text=True, check=True).stdout.split()  # site hooks etc.
    third_party = {name.split(".")[0] for name in set(loaded) - set(baseline)} - set(sys.stdlib_module_names) \
        - {"magic_context", "orjson"}
    assert third_party == set(), third_party
