"""The historian trigger (reference §4.4): budgets, thresholds, force band, and the in-memory tail figures."""

from __future__ import annotations

import pytest
from historian_helpers import PiBuilder

from magic_context import tokens
from magic_context.history import trigger
from magic_context.store.raw import message_tokens
from magic_context.wire import pi

LIMIT = 200_000


def decide(usage_percent: float, *, tail: int = 0, messages: int = 20, **kw) -> trigger.TriggerDecision:
    return trigger.evaluate(usage_tokens=int(LIMIT * usage_percent / 100), context_limit=LIMIT,
                            threshold_percent=kw.pop("threshold", 65), tail_tokens=tail, tail_messages=messages, **kw)


@pytest.mark.parametrize(("limit", "threshold", "budget"), [
    (200_000, 65, 6_500), (120_000, 65, 5_000), (50_000, 40, 5_000), (2_000_000, 90, 50_000), (1_000_000, 65, 32_500),
])
def test_trigger_budget_is_clamped(limit: int, threshold: float, budget: int) -> None:
    assert trigger.trigger_budget(limit, threshold) == budget


def test_nothing_fires_without_an_eligible_tail() -> None:
    assert decide(99, tail=0, messages=0).reason == "no_eligible_tail"
    assert not decide(99, tail=0, messages=0).fire


def test_running_historian_vetoes() -> None:
    d = decide(90, tail=100_000, running=True)
    assert not d.fire and d.reason == "running"


def test_force_at_80_percent_unless_drops_suffice() -> None:
    assert decide(80, tail=1_000).fire and decide(80, tail=1_000).reason == "force_80"
    assert not decide(79.9, tail=1_000).fire
    # projected post-drop usage at or below threshold × 0.75 (48.75%) means drops alone fix it
    relieved = decide(85, tail=1_000, projected_tokens=int(LIMIT * 0.48))
    assert not relieved.fire and relieved.reason == "drops_suffice"
    assert decide(85, tail=1_000, projected_tokens=int(LIMIT * 0.50)).fire


def test_a_pass_that_busts_anyway_folds_an_eligible_head_of_a_quarter_of_the_threshold() -> None:
    def small(usage: float, tail: int, **kw) -> trigger.TriggerDecision:  # a 20k window: the budget is clamped
        return trigger.evaluate(usage_tokens=int(20_000 * usage / 100), context_limit=20_000, threshold_percent=65,
                                tail_tokens=tail, tail_messages=20, **kw)

    quarter = int(trigger.RIDE_BUST_SHARE * 20_000 * 0.65)  # 3 250 of the threshold's 13 000 tokens
    assert quarter < 3 * trigger.trigger_budget(20_000, 65)  # below the tail-size trigger (15 000 here)
    assert small(30, quarter, busting=True).fire and small(30, quarter, busting=True).reason == "rides_bust"
    assert not small(30, quarter - 1, busting=True).fire  # too little to be worth a compartment
    assert small(30, quarter).reason == "below_threshold"  # a defer pass does not fire for it
    assert not small(30, quarter, busting=True, running=True).fire
    assert small(85, quarter, busting=True).reason == "force_80"  # the earlier rules still decide first
    # in a large window the tail-size trigger (3 budgets, 15% of the threshold) comes first
    assert decide(30, tail=int(trigger.RIDE_BUST_SHARE * LIMIT * 0.65), busting=True).reason == "tail_size"


def test_tail_size_trigger_at_three_budgets() -> None:
    budget = trigger.trigger_budget(LIMIT, 65)
    assert decide(10, tail=3 * budget).reason == "tail_size"
    assert decide(10, tail=3 * budget).fire
    assert not decide(10, tail=3 * budget - 1).fire


def test_commit_cluster_trigger() -> None:
    budget = trigger.trigger_budget(LIMIT, 65)
    assert decide(10, tail=budget, commit_clusters=3).reason == "commit_clusters"
    assert not decide(10, tail=budget - 1, commit_clusters=3).fire
    assert not decide(10, tail=budget, commit_clusters=2).fire
    assert decide(10, tail=budget, commit_clusters=2, min_clusters=2).fire
    assert not decide(10, tail=budget, commit_clusters=5, clusters_enabled=False).fire


def test_proactive_trigger_two_points_below_threshold() -> None:
    assert not decide(62.9, tail=10_000).fire
    d = decide(63, tail=6_000, messages=12)
    assert d.fire and d.reason == "proactive"
    assert decide(63, tail=5_999, messages=40).reason == "tail_too_small"
    assert decide(63, tail=9_000, messages=11).reason == "tail_too_small"
    assert decide(63, tail=9_000, projected_tokens=int(LIMIT * 0.40)).reason == "drops_suffice"
    # the threshold moves the proactive floor
    assert decide(48, tail=9_000, threshold=50).fire
    assert not decide(47, tail=9_000, threshold=50).fire


def test_emergency_band_follows_the_threshold() -> None:
    assert trigger.emergency_percent(65) == 85
    assert trigger.emergency_percent(90) == 92
    assert decide(85, tail=1_000).emergency
    assert not decide(84, tail=1_000).emergency


def test_tail_figures_from_the_pass_messages() -> None:
    b = PiBuilder()
    for i in range(12):
        b.turn(f"please change module {i}", f"src/m{i}.py", padding=3000)
        if i in (2, 5):  # two committed phases, separated by prompts
            b.call("bash", {"command": f"git commit -am 'step {i}'"}, f"[main 1a2b3c{i}] step {i}\n 1 file changed")
    b.user("and the last one").say("working on it")
    messages = pi.decode(b.messages)
    for i, msg in enumerate(messages):
        msg.ordinal = i
    sizes = [message_tokens(msg, tokens.estimate) for msg in messages]
    figures = trigger.tail_figures(messages, sizes, last_end=None, context_limit=LIMIT, threshold_percent=65,
                                   usage_tokens=20_000, protect_tokens=2_000)
    bound = figures.boundary
    assert bound.start == 0 and not bound.empty
    assert bound.end < len(messages) - 1
    assert figures.tokens == sum(sizes[: bound.end + 1])
    assert figures.messages == bound.end + 1
    # the live prompt ("and the last one") and everything after it stay out of the eligible head
    assert bound.end < len(messages) - 2
    assert figures.commit_clusters == 2
    later = trigger.tail_figures(messages, sizes, last_end=bound.end, context_limit=LIMIT, threshold_percent=65,
                                 usage_tokens=20_000, protect_tokens=2_000)
    assert later.boundary.start == bound.end + 1 and later.tokens == 0
