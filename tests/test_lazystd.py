"""`lazystd.defer`: a stand-in module that imports the real one on first attribute use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROGRAM = """
import sys
from magic_context import lazystd
assert lazystd.defer("inspect") and not lazystd.defer("inspect")
import orjson, dataclasses                      # what the transform hook imports: inspect stays a stand-in
assert orjson.dumps({"a": [1, 2.5]}) == b'{"a":[1,2.5]}'
assert lazystd.is_deferred("inspect") and "ast" not in sys.modules

@dataclasses.dataclass                          # the first real use imports inspect and works
class Point:
    x: int
    y: int = 0

assert Point(1) == Point(1, 0) and "Point(x: int, y: int = 0)" in Point.__doc__
import inspect
from inspect import signature
assert not lazystd.is_deferred("inspect") and sys.modules["inspect"].__name__ == "inspect"
assert str(signature(lambda a, b=2: None)) == "(a, b=2)" and inspect.isfunction(signature)
assert not lazystd.defer("json")                # already imported: left alone
print("ok")
"""


def test_deferred_module_loads_on_first_use_and_behaves_as_the_real_one() -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
