"""Replaying recorded sessions pass by pass through mc and through baselines; the prompt-cache cost model.

`replay(path, ...)` is the entry point (`mc replay` and `bench/run.py` call it); see `runner`.
"""

from __future__ import annotations

from magic_context.replay.runner import STRATEGIES, ReplayResult, StrategyRun, replay

__all__ = ["STRATEGIES", "ReplayResult", "StrategyRun", "replay"]
