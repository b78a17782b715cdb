"""Every real session replayed pass by pass through the real `mc transform` subprocess, in four shapes.

Windows are smaller than the sessions, so drops and emergency reclaim must hold the window. Each pass
is checked: exit 0, valid provider output, reasoning untouched, defer passes byte-stable, served
context within the window.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from session_replay import replay

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
WINDOWS = {
    "pi_large-session.jsonl": 60_000,
    "pi_before-compaction.jsonl": 120_000,
    "mini-swe-agent_deepseek-chat_django__django-13964.traj.json": 40_000,
    "mini-swe-agent_deepseek-reasoner_sqlfluff__sqlfluff-1763.traj.json": 30_000,
    "claude-code/bookminder-subagent-a12564cd.jsonl": 20_000,
    "claude-code/bookminder-main-prefix.jsonl": 8_000,
    "claude-code/simonw-claude-code-transcripts__sample_session.jsonl": 2_000,
    "claude-code/daaain-claude-code-log__dag_compact_after_rewind.jsonl": 2_000,
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["anthropic", "openai", "opencode", "openai-responses"])
@pytest.mark.parametrize("name", list(WINDOWS))
def test_real_session_replay(name: str, shape: str) -> None:
    path = SESSIONS / name
    assert path.exists(), path
    outcome = replay(path, shape, WINDOWS[name], subprocess_mode=True, session_id=f"{name}:{shape}")
    assert outcome.problems == []
    assert outcome.passes > 0 and outcome.peak_served <= WINDOWS[name]
