"""Issue #14 item 2: an oversized newest tool output (or user paste) is served as a bounded preview
carrying its tag, the full text stays recoverable, the request fits, and every pass serves the same bytes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import REPO, run_mc

MAKER = REPO.parent / "shared" / "data" / "repro" / "make_five_mb_tool_output.py"


@pytest.fixture(scope="module")
def five_mb() -> bytes:
    return subprocess.run([sys.executable, str(MAKER)], capture_output=True, check=True).stdout


def _report(stderr: bytes) -> dict:
    return json.loads(stderr.decode().strip().splitlines()[-1])


def _stored_source(data_dir, number: int) -> str | None:
    from magic_context.store import tags

    conn = sqlite3.connect(data_dir / "context.db")
    try:
        pk = conn.execute("SELECT session_pk FROM source_contents WHERE tag_number = ?", (number,)).fetchone()[0]
        return tags.source(conn, pk, number)
    finally:
        conn.close()


@pytest.mark.parametrize("with_usage", [True, False])
def test_the_five_mb_tool_output_is_previewed_and_the_request_fits(five_mb, with_usage, tmp_path, isolated_dirs):
    doc = json.loads(five_mb)
    if not with_usage:
        doc.pop("usage")
    data = json.dumps(doc).encode()
    big = doc["messages"][-1]["content"][0]["content"]
    outputs = []
    for _ in range(3):
        proc = run_mc("transform", "--report", stdin=data, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-400:]
        report = _report(proc.stderr)
        assert report["tokens_after"] < report["context_limit"] * report["threshold_percent"] / 100
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] == outputs[2]  # the preview is a stored decision: same bytes every pass
    served = json.loads(outputs[0])
    assert len(outputs[0]) < 60_000  # 5 MB in, a bounded request out
    preview = served["messages"][-1]["content"][0]["content"]
    assert preview.startswith("[preview §") and "mc expand" in preview
    number = int(preview.split("§")[1])
    head, tail = big.splitlines()[0], big.splitlines()[-1]
    assert head in preview and tail in preview
    assert _stored_source(isolated_dirs["data"], number) == big  # recoverable in full


def test_an_oversized_user_paste_is_previewed_too(tmp_path, isolated_dirs):
    paste = "".join(f"row {i}: value={i * 7} status=ok\n" for i in range(60_000))
    doc = {"harness": "openai", "session_id": "paste", "now": 1_764_000_000_000,
           "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
                        {"role": "user", "content": paste}]}
    proc = run_mc("transform", "--report", stdin=json.dumps(doc), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-300:]
    last = json.loads(proc.stdout)["messages"][-1]["content"]
    assert last.startswith("[preview §") and len(last) < 12_000
    assert _stored_source(isolated_dirs["data"], int(last.split("§")[1])) == paste


def test_content_below_the_cap_is_served_whole(tmp_path):
    text = "line\n" * 2000
    doc = {"harness": "openai", "session_id": "small", "messages": [{"role": "user", "content": text}]}
    proc = run_mc("transform", stdin=json.dumps(doc), cwd=tmp_path)
    assert json.loads(proc.stdout)["messages"][-1]["content"].endswith(text)
