"""transform/scheduler.py, value by value: which window a model gets, which threshold applies, and the exact
edges of execute / force / block and of the cache-TTL expiry (the mutation run showed the coarse test in
test_transform_units.py leaves those edges free)."""

from __future__ import annotations

import pytest

from magic_context.history import boundary
from magic_context.transform import reclaim, scheduler


@pytest.mark.parametrize(("model_id", "limit"), [
    ("claude-sonnet-4-5-20250929", 200_000),
    ("anthropic/Claude-Opus-4-1", 200_000),  # matched lower-cased, with a provider prefix
    ("claude-2.1", 200_000),  # only the bare "claude" fragment matches
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4o-2024-08-06", 128_000),
    ("openai/gpt-5-codex", 400_000),
    ("o4-mini", 200_000),
    ("o3-pro", 200_000),
    ("gpt-4-turbo-preview", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("gemini-2.5-pro", 1_048_576),
    ("gemini-2.0-flash", 1_048_576),
    ("gemini-1.5-pro-latest", 2_097_152),
    ("deepseek-chat", 128_000),
    ("qwen3-coder-480b", 262_144),  # the specific fragment wins over "qwen"
    ("qwen2.5-72b", 131_072),
    ("kimi-k2-instruct", 131_072),
    ("glm-4.6", 131_072),
    ("llama-3.3-70b", 131_072),
    ("mistral-large-2411", 131_072),
    ("codestral-2501", 256_000),
])
def test_builtin_limit_of_known_models(model_id: str, limit: int) -> None:
    assert scheduler.builtin_limit(model_id) == limit


@pytest.mark.parametrize("model_id", [None, "", "mystery-model", "gpt-4"])
def test_builtin_limit_of_unknown_models_is_none(model_id: str | None) -> None:
    assert scheduler.builtin_limit(model_id) is None


def test_resolve_limit_order_and_plausibility() -> None:
    assert scheduler.resolve_limit(1024, "gpt-4o", 50_000) == scheduler.Limit(1024, "input")  # the floor is plausible
    assert scheduler.resolve_limit(1023, "gpt-4o", 50_000) == scheduler.Limit(50_000, "config")
    assert scheduler.resolve_limit(None, "gpt-4o", 1024) == scheduler.Limit(1024, "config")
    assert scheduler.resolve_limit(None, "gpt-4o", 1023) == scheduler.Limit(128_000, "builtin")
    assert scheduler.resolve_limit(0, "gpt-4o", None) == scheduler.Limit(128_000, "builtin")
    assert scheduler.resolve_limit(None, "mystery", None) == scheduler.Limit(200_000, "default")
    assert scheduler.resolve_limit(None, None) == scheduler.Limit(200_000, "default")
    assert scheduler.resolve_limit(150_000.0, None).tokens == 150_000  # type: ignore[arg-type]
    assert type(scheduler.resolve_limit(150_000.0, None).tokens) is int  # type: ignore[arg-type]
    assert type(scheduler.resolve_limit(None, None, 99_000.0).tokens) is int  # type: ignore[arg-type]


def test_only_an_input_limit_is_proven() -> None:
    assert [scheduler.Limit(1, source).proven for source in ("input", "config", "builtin", "default")] == [
        True, False, False, False]


def test_default_threshold_by_harness() -> None:
    assert scheduler.default_threshold("openai") == 40.0
    for harness in ("anthropic", "opencode", "pi", "responses", ""):
        assert scheduler.default_threshold(harness) == 40.0
        assert scheduler.default_threshold(harness, 14_400) == 65.0  # a small window: mostly fixed parts
        assert not scheduler.autonomous(harness)
    assert scheduler.autonomous("openai")


@pytest.mark.parametrize(("limit", "expected"), [
    (None, 40.0), (200_000, 40.0), (36_000, 40.0), (29_000, 40.0), (25_000, 40.0),  # 40% once that is ≥ 10 000
    (20_000, 50.0), (16_000, 62.5), (15_385, 65.0), (14_400, 65.0), (3_000, 65.0),  # raised to 10 000, ≤ 65%
])
def test_interactive_sessions_bust_at_40_percent_but_not_below_10000_tokens(limit, expected) -> None:
    """#13's re-sweep of the small Pi windows: 40% was cheapest at 36k and 29k, 50% at 20k, 65% at 14.4k."""
    for harness in ("pi", "anthropic", "opencode", "responses", ""):
        assert scheduler.default_threshold(harness, limit) == expected


@pytest.mark.parametrize(("limit", "expected"), [
    (None, 40.0), (200_000, 40.0), (22_000, 40.0), (16_250, 40.0),  # 40% whenever that is ≥ 6 500 tokens
    (13_200, 49.2), (10_000, 65.0), (8_125, 80.0), (7_700, 84.4), (7_647, 85.0), (3_000, 85.0),  # to 6 500, ≤ 85%
])
def test_autonomous_runs_bust_at_40_percent_but_not_below_6500_tokens(limit, expected) -> None:
    assert scheduler.default_threshold("openai", limit) == expected


def test_reclaim_target_and_protected_floor_as_swept() -> None:
    """#13's sweep: a reclaim down to 20% of the threshold, a raw tail of at least 1 000 tokens."""
    assert reclaim.TARGET_SHARE_OF_THRESHOLD == 0.20
    assert boundary.protected_tail_tokens(10_000, 50) == 1_000  # 15% of 5 000 usable is under the floor
    assert boundary.protected_tail_tokens(5_000, 40) == 800  # the floor, capped at 40% of 2 000 usable


def test_threshold_percent() -> None:
    assert scheduler.threshold_percent(65, None, 100_000) == 65.0
    assert scheduler.threshold_percent(65, 0, 100_000) == 65.0  # a zero token threshold means unset
    assert scheduler.threshold_percent(95, None, 100_000) == 90.0  # capped
    assert scheduler.threshold_percent(90, None, 100_000) == 90.0
    assert scheduler.threshold_percent(65, 25_000, 200_000) == 12.5  # tokens override the percentage
    assert scheduler.threshold_percent(65, 190_000, 200_000) == 90.0  # capped too
    assert scheduler.threshold_percent(65, 1_000, 200_000) == 1.0  # floored at 1%
    assert scheduler.threshold_percent(65, 3_000, 200_000) == 1.5


def decide(usage: int, threshold: float = 65, *, now: int = 0, last: int | None = None,
           ttl: float = 300_000, limit: int = 100_000) -> scheduler.Decision:
    return scheduler.decide(usage, limit, threshold, now_ms=now, last_activity_ms=last, ttl_ms=ttl)


def test_decide_at_the_threshold_executes_and_reports_every_field() -> None:
    assert decide(65_000) == scheduler.Decision(
        execute=True, reason="usage 65.0% ≥ threshold 65%", usage_tokens=65_000, usage_percent=65.0,
        threshold_percent=65, ttl_expired=False, force=False, block_band=False)
    below = decide(64_999)
    assert not below.execute and below.reason == "within threshold, cache warm"
    assert below.usage_percent == pytest.approx(64.999)
    assert decide(40_550, 40.5).reason == "usage 40.5% ≥ threshold 40.5%"


def test_decide_with_no_limit_measures_zero() -> None:
    zero = decide(10_000, 1, limit=0)
    assert zero.usage_percent == 0.0 and not zero.execute and zero.reason == "within threshold, cache warm"
    assert decide(0, 0, limit=0).execute  # 0% ≥ a 0% threshold


def test_cache_ttl_expires_strictly_after_the_ttl() -> None:
    at = decide(1_000, now=300_000, last=0)
    assert not at.ttl_expired and not at.execute
    after = decide(1_000, now=300_001, last=0)
    assert after.ttl_expired and after.execute and after.reason == "cache TTL expired"
    assert not decide(1_000, now=1_000_000, last=700_000).ttl_expired  # the gap counts, not the clock
    assert decide(1_000, now=1_000_001, last=700_000).ttl_expired
    assert not decide(1_000, now=300_001, last=None).ttl_expired  # no activity known: nothing expired
    assert not decide(1_000, now=10**15, last=0, ttl=float("inf")).ttl_expired
    assert not decide(1_000, now=10**15, last=0, ttl=float("nan")).ttl_expired
    hot_and_cold = decide(70_000, now=300_001, last=0)
    assert hot_and_cold.ttl_expired and hot_and_cold.reason.startswith("usage 70.0%")


def test_force_band_follows_the_threshold() -> None:
    assert not decide(84_999, 65).force and decide(85_000, 65).force  # 85% at a low threshold
    assert not decide(89_999, 88).force and decide(90_000, 88).force  # threshold + 2 above 83%


def test_block_band_from_95_percent() -> None:
    assert not decide(94_999).block_band
    assert decide(95_000).block_band
