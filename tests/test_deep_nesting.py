"""Issue #14 item 3: deeply nested JSON is handled up to the parse limit and refused (exit 2) past it —
never a silent fallback to the raw input for the rest of the session."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import REPO, run_mc

from magic_context.transform import protocol
from magic_context.wire import jsonio

REPRO = REPO.parent / "shared" / "data" / "repro" / "deep_tool_input_300.json"


def _nested(depth: int, kind: str = "dict"):
    value: object = {"leaf": "x"}
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    return value


def _request(depth: int, kind: str = "dict", session: str = "deep", turns: int = 1) -> bytes:
    messages: list = [{"role": "user", "content": "run it"}]
    for t in range(turns):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{t}", "name": "bash",
                                                        "input": _nested(depth, kind)}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}",
                                                   "content": f"output {t}"}]}]
    doc = {"harness": "anthropic", "session_id": session, "now": 1_764_000_000_000, "messages": messages}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        return json.dumps(doc).encode()
    finally:
        sys.setrecursionlimit(limit)


def _report(stderr: bytes) -> dict:
    return json.loads(stderr.decode().strip().splitlines()[-1])


def test_the_repro_is_served_by_a_real_pass_every_time(tmp_path, isolated_dirs):
    data = REPRO.read_bytes()
    original = json.loads(data)
    for _ in range(3):
        proc = run_mc("transform", "--report", stdin=data, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert b"mc: warning" not in proc.stderr, proc.stderr  # no fallback, so nothing to warn about
        report = _report(proc.stderr)
        assert report["reason"] != "input served unchanged" and not report.get("lkg")
        out = json.loads(proc.stdout)
        assert out["messages"][-2]["content"][0]["input"] == original["messages"][1]["content"][0]["input"]
    assert (isolated_dirs["data"] / "context.db").exists()


@pytest.mark.parametrize(("depth", "kind"), [(300, "dict"), (600, "list"), (1000, "dict")])
def test_nesting_up_to_the_parse_limit_is_handled_on_every_pass_of_a_growing_session(depth, kind, tmp_path):
    for turns in (1, 2, 3):
        proc = run_mc("transform", "--report", stdin=_request(depth, kind, turns=turns), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        report = _report(proc.stderr)
        assert report["reason"] != "input served unchanged" and not report.get("lkg"), report
        assert report["raw_written"] == (3 if turns == 1 else 2)  # each pass stores its new messages


def test_nesting_past_the_parse_limit_is_refused_at_the_boundary(tmp_path, isolated_dirs):
    proc = run_mc("transform", stdin=_request(protocol.MAX_DEPTH + 10), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and f"deeper than {protocol.MAX_DEPTH} levels" in lines[0]
    assert not isolated_dirs["data"].exists()


def test_jsonio_writes_what_orjson_will_not_and_keeps_shallow_bytes_identical():
    import orjson

    shallow = {"b": [1, 2.5, "é"], "a": None}
    assert jsonio.dumps(shallow) == orjson.dumps(shallow)
    assert jsonio.dumps(shallow, sort_keys=True) == orjson.dumps(shallow, option=orjson.OPT_SORT_KEYS)
    deep = _nested(900)
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(deep)
    assert jsonio.loads(jsonio.dumps(deep)) == deep
    assert jsonio.dumps(deep, sort_keys=True) == jsonio.dumps(deep, sort_keys=True)  # ids stay stable


def test_a_pass_that_falls_back_is_warned_every_time_and_shown_in_status(tmp_path, monkeypatch, capsys):
    """Whatever makes a pass fall back (here: a sub-step that crashes), each such pass warns on stderr and
    is counted in the session's state, which `mc status` shows: never a silent fallback."""
    import io

    from magic_context.transform import hook, pass_serve

    data = _request(3, session="falls-back")
    assert hook.main([], stdin=io.BytesIO(data), stdout=io.BytesIO()) == 0  # a good pass stores the session
    capsys.readouterr()

    def crash(*args, **kwargs):
        raise RuntimeError("sub-step crashed")

    with monkeypatch.context() as patched:
        patched.setattr(pass_serve, "persist", crash)
        for _ in range(3):
            out = io.BytesIO()
            assert hook.main([], stdin=io.BytesIO(data), stdout=out) == 0
            json.loads(out.getvalue())
            assert "mc: warning: internal error (RuntimeError: sub-step crashed)" in capsys.readouterr().err
    status = run_mc("status", "--session", "falls-back", "--json")
    fallbacks = json.loads(status.stdout)["data"]["fallbacks"]
    assert fallbacks["count"] == 3 and "sub-step crashed" in fallbacks["last_reason"]
    assert fallbacks["served"] == "last known good"
    text = run_mc("status", "--session", "falls-back").stdout.decode()
    assert "fallback" in text and "3 pass(es)" in text
