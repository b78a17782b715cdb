"""The search benchmark's held-out questions stay answerable: well formed, and every evidence string is in
the recorded session it asks about (so a set edited by hand cannot silently ask for text that is not there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "bench" / "search" / "heldout"
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
KINDS = {"exact", "paraphrase", "decision", "first"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _session_strings(name: str) -> list[str]:
    raw = (SESSIONS / name).read_text(encoding="utf-8")
    lines = raw.splitlines() if name.endswith(".jsonl") else [raw]
    docs = [json.loads(line) for line in lines if line.strip()]
    return [_norm(s) for doc in docs for s in _strings(doc)]


@pytest.mark.parametrize("path", sorted(HELDOUT.glob("*.json")), ids=lambda p: p.stem)
def test_heldout_questions_are_well_formed_and_their_evidence_is_in_the_session(path: Path) -> None:
    spec = json.loads(path.read_text())
    questions = spec["questions"]
    assert sum(1 for q in questions if q["kind"] == "paraphrase") >= 15
    assert {q["kind"] for q in questions} <= KINDS
    assert len({q["q"] for q in questions}) == len(questions)
    texts = _session_strings(spec["session"])
    missing = [(q["q"], e) for q in questions for e in q["evidence"]
               if not e.strip() or not any(_norm(e) in t for t in texts)]
    assert not missing
