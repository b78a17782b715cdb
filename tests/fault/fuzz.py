"""A seeded fuzzer over mutated real requests (issue #14 item 11): each case is a captured request body
(../shared/data/requests) or a repro input, mutated by a few random edits at the JSON or byte level.

`mutate(rng)` returns the case's bytes and what was done to them (for a failing case's message);
`run_case(data, data_dir)` runs the real `mc transform` entry point in process (the same function the
CLI's fast path calls) against `data_dir` and returns (exit code, stdout, stderr).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REQUESTS = REPO.parent / "shared" / "data" / "requests"
REPRO = REPO.parent / "shared" / "data" / "repro"
HOOK_METADATA = ("claude-code-2.1.332-hook", "codex-0.171.0-hook")  # ids and paths only: no messages

ODD_VALUES: tuple[Any, ...] = (None, 0, -1, 1.5, 1e30, -1e30, 2**63, "", "x", "\x00", "\ud800", [], {}, True,
                               [None], {"": None}, "§1§ ", [[[[[[]]]]]], "a" * 5000)


def seeds() -> list[tuple[str, Any]]:
    """The real documents the cases start from: captured bodies and hook inputs, and the repro inputs."""
    out = []
    for path in sorted(REQUESTS.glob("*.json")):
        if not path.name.startswith(HOOK_METADATA):
            out.append((path.name, json.loads(path.read_text(encoding="utf-8"))))
    for path in sorted(REPRO.glob("*.json")):
        out.append((path.name, json.loads(path.read_text(encoding="utf-8").replace("$TMPDIR", "/tmp"))))
    return out


def _odd(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(ODD_VALUES))  # a fresh copy: later edits must not reach the shared one


def _containers(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """Every (path, dict-or-list) inside `value`, depth first."""
    found = []
    if isinstance(value, dict | list):
        found.append((path, value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            found.extend(_containers(child, (*path, key)))
    return found


def _edit(doc: Any, rng: random.Random) -> str:
    """One random structural edit of `doc` in place; returns what it did."""
    containers = _containers(doc)
    path, node = rng.choice(containers)
    if isinstance(node, dict):
        if not node:
            node["x"] = _odd(rng)
            return f"{path}: add a key"
        key = rng.choice(list(node))
        op = rng.randrange(4)
        if op == 0:
            del node[key]
            return f"{path}: delete {key!r}"
        if op == 1:
            node[key] = _odd(rng)
            return f"{path}.{key} = {str(node[key])[:20]!r}"
        if op == 2 and isinstance(node[key], str):
            node[key] = node[key][: rng.randrange(len(node[key]) + 1)]
            return f"{path}.{key}: truncate"
        node[key] = rng.choice([[node[key]], {"k": node[key]}, str(node[key])[:50]])
        return f"{path}.{key}: rewrap"
    if not node:
        node.append(_odd(rng))
        return f"{path}: append"
    i = rng.randrange(len(node))
    op = rng.randrange(5)
    if op == 0:
        del node[i]
        return f"{path}[{i}]: delete"
    if op == 1:
        node.insert(i, json.loads(json.dumps(node[rng.randrange(len(node))])))
        return f"{path}[{i}]: duplicate"
    if op == 2:
        j = rng.randrange(len(node))
        node[i], node[j] = node[j], node[i]
        return f"{path}: swap {i} {j}"
    if op == 3:
        node[i] = _odd(rng)
        return f"{path}[{i}] = {str(node[i])[:20]!r}"
    node[:] = node[:i]
    return f"{path}: cut at {i}"


def _byte_edit(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    op = rng.randrange(4)
    i = rng.randrange(len(data) + 1)
    if op == 0:
        return data[:i], f"truncate at byte {i}"
    if op == 1 and data:
        j = min(i, len(data) - 1)
        return data[:j] + bytes([rng.randrange(256)]) + data[j + 1:], f"byte {j} replaced"
    if op == 2:
        junk = rng.choice([b"\xff", b"\x00", b"{", b"]", b'"', b"\\u0000", b"\xc3"])
        return data[:i] + junk + data[i:], f"insert at {i}"
    return b" \n\t" + data + b"\n", "whitespace around"


def mutate(rng: random.Random, corpus: list[tuple[str, Any]]) -> tuple[bytes, str]:
    """One fuzz case: a seed document with 1-3 structural edits, sometimes followed by a byte edit."""
    name, seed = rng.choice(corpus)
    doc = json.loads(json.dumps(seed))
    done = [name]
    for _ in range(rng.randint(1, 3)):
        done.append(_edit(doc, rng) if _containers(doc) else "scalar document")
    data = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    if rng.random() < 0.15:
        data, what = _byte_edit(data, rng)
        done.append(what)
    return data, "; ".join(done)


def run_case(data: bytes, data_dir: Path, args: tuple[str, ...] = ()) -> tuple[int, bytes, str]:
    """`mc transform` in process on `data`, with its storage in `data_dir`: (exit code, stdout, stderr)."""
    from magic_context.transform import hook

    os.environ["MAGIC_CONTEXT_STORAGE_DIR"] = str(data_dir)
    out, err = io.BytesIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = hook.main(list(args), stdin=io.BytesIO(data), stdout=out)
    return code, out.getvalue(), err.getvalue()


__all__ = ["mutate", "run_case", "seeds"]
