"""Skimming folded history (decoding it without blocks) never changes what a pass serves.

Each real session is replayed pass by pass in-process twice, with the skim and without it, into two
fresh databases (historian inline): every pass must produce the same bytes and the same pass kind,
and the skim must actually have been taken on most passes once history was folded.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from session_replay import REPO, render_calls

from magic_context.store import raw as raw_store
from magic_context.transform import pass_view, pipeline, protocol

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"


def _serve_all(path: Path, shape: str, limit: int, storage: Path, monkeypatch, *,
               skim: bool) -> tuple[list, list[tuple[bool, bool]]]:
    """(pass kind, output bytes) per pass, and per pass whether a skim was asked for and whether it held."""
    monkeypatch.setenv("MAGIC_CONTEXT_STORAGE_DIR", str(storage))
    monkeypatch.setattr(pass_view, "SKIM_FOLDED", skim)
    asked: list[bool] = []
    held: list[bool] = []
    real_sync = raw_store.sync

    def counting_sync(*args, **kwargs):
        asked.append(kwargs.get("skimmed", 0) > 0)
        result = real_sync(*args, **kwargs)  # raises SkimmedChange when the skim does not hold
        held.append(kwargs.get("skimmed", 0) > 0)
        return result

    monkeypatch.setattr(raw_store, "sync", counting_sync)
    outputs, skimmed = [], []
    for index, (native, call) in enumerate(render_calls(path, shape)):
        envelope = {"messages": native, "harness": shape, "session_id": "skim", "project_dir": str(REPO),
                    "model": {"provider": "test", "id": call.model or "model", "context_limit": limit},
                    "now": call.timestamp_ms or 1_700_000_000_000 + index * 1000}
        asked.clear()
        held.clear()
        result = pipeline.run(protocol.read_input(protocol.parse_document(orjson.dumps(envelope)), {}))
        outputs.append((result.report["pass"], protocol.dumps(result.document)))
        skimmed.append((any(asked), any(held)))
    monkeypatch.setattr(raw_store, "sync", real_sync)
    return outputs, skimmed


@pytest.mark.slow
@pytest.mark.parametrize(("name", "shape", "limit"), [
    ("pi_large-session.jsonl", "pi", 60_000),
    ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", "openai", 40_000),
    ("mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json", "anthropic", 30_000),
    ("pi_before-compaction.jsonl", "opencode", 120_000),
    ("mini-swe-agent_deepseek-chat_django__django-13964.traj.json", "openai-responses", 40_000),
])
def test_skimmed_passes_serve_the_same_bytes(name: str, shape: str, limit: int, tmp_path: Path,
                                             monkeypatch) -> None:
    path = SESSIONS / name
    plain, _ = _serve_all(path, shape, limit, tmp_path / "plain", monkeypatch, skim=False)
    _skimmed, skim_used = _serve_all(path, shape, limit, tmp_path / "skim", monkeypatch, skim=True)
    assert len(plain) == len(_skimmed)
    for index, (a, b) in enumerate(zip(plain, _skimmed, strict=True)):
        assert a == b, f"pass {index} differs with the skim ({a[0]} vs {b[0]})"
    asked = sum(1 for a, _ in skim_used if a)
    held = sum(1 for _, h in skim_used if h)
    assert held > len(plain) // 5, f"the skim held on only {held} of {len(plain)} passes"
    assert held >= 0.9 * asked, f"the skim fell back on {asked - held} of {asked} passes"


@pytest.mark.parametrize("shape", ["pi", "anthropic", "openai", "opencode", "openai-responses"])
def test_skimmed_decode_keeps_ids_roles_and_the_unskimmed_messages(shape: str) -> None:
    from magic_context.transform.protocol import CODECS
    from magic_context.wire import model as m

    *_, (native, _call) = render_calls(SESSIONS / "mini-swe-agent_deepseek-chat_django__django-13964.traj.json",
                                       shape)
    codec = CODECS[shape]
    skim = len(native) // 2
    whole = codec.decode(orjson.loads(orjson.dumps(native)))
    part = codec.decode(orjson.loads(orjson.dumps(native)), skim=skim)
    assert [(x.id, x.role, x.ordinal) for x in whole] == [(x.id, x.role, x.ordinal) for x in part]
    assert [x.digest for x in whole] == [x.digest for x in part]
    def blocks(msg: m.Message) -> list:
        return [(blk.kind, blk.text, blk.tool_id) for blk in msg.blocks]

    skimmed = 0
    for index, (a, b) in enumerate(zip(whole, part, strict=True)):
        assert b.raw == a.raw
        if index >= skim or a.role == m.SYSTEM or b.blocks:  # decoded whole: exactly as without a skim
            assert blocks(a) == blocks(b)
        else:
            skimmed += 1
    assert skimmed >= skim - 1  # all but a leading system message
