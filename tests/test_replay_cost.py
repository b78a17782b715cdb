"""The prompt-cache cost model, checked against hand-computed figures."""

from __future__ import annotations

import pytest

from magic_context.errors import BadInput
from magic_context.replay import cost

A, B, C, D = ("a", 2000), ("b", 500), ("c", 1000), ("d", 100)
MINUTE = 60_000


def test_three_passes_anthropic_by_hand() -> None:
    """Sonnet: $3/Mtok base, write 1.25x ($3.75), read 0.1x ($0.30), minimum cacheable 1024 tokens.

    pass 1 (t=0)     [A B]    = 2500, cold: write 2500            → 2500 × 3.75 / 1e6          = 0.009375
    pass 2 (t=+1m)   [A B C]  = 3500, prefix A B = 2500: read 2500, write 1000
                                                                  → (2500 × 0.30 + 1000 × 3.75) / 1e6 = 0.0045
    pass 3 (t=+2m)   [A D C]  = 3100, prefix A = 2000 < 3500: a bust; read 2000, write 1100
                                                                  → (2000 × 0.30 + 1100 × 3.75) / 1e6 = 0.004725
    total 0.0186; cache-read share (0 + 2500 + 2000) / (2500 + 3500 + 3100) = 4500 / 9100
    """
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    first = ledger.add([A, B], 0)
    second = ledger.add([A, B, C], MINUTE)
    third = ledger.add([A, D, C], 2 * MINUTE)

    assert (first.read, first.write, first.warm, first.bust) == (0, 2500, False, False)
    assert first.usd == pytest.approx(0.009375)
    assert (second.prefix, second.read, second.write, second.bust) == (2500, 2500, 1000, False)
    assert second.usd == pytest.approx(0.0045)
    assert (third.prefix, third.read, third.write, third.bust) == (2000, 2000, 1100, True)
    assert third.usd == pytest.approx(0.004725)
    assert ledger.usd == pytest.approx(0.0186)
    assert ledger.read_share == pytest.approx(4500 / 9100)
    assert (ledger.busts, ledger.passes, ledger.cold) == (1, 3, 0)


def test_three_passes_openai_by_hand() -> None:
    """OpenAI: $1.25/Mtok, no write premium, cached input 0.1x, hits in 128-token steps from 1024.

    pass 1 [A B] 2500 uncached                         → 2500 × 1.25 / 1e6                  = 0.003125
    pass 2 [A B C] prefix 2500 → read 2432 (19 × 128), uncached 1068
                                                       → (1068 × 1.25 + 2432 × 0.125) / 1e6 = 0.001639
    pass 3 [A D C] prefix 2000 → read 1920 (15 × 128), uncached 1180
                                                       → (1180 × 1.25 + 1920 × 0.125) / 1e6 = 0.001715
    """
    ledger = cost.Ledger(cost.pricing("openai"), cost.parse_ttl("5m"))
    charges = [ledger.add(units, at) for units, at in (([A, B], 0), ([A, B, C], MINUTE), ([A, D, C], 2 * MINUTE))]
    assert [(c.read, c.write, c.uncached) for c in charges] == [(0, 0, 2500), (2432, 0, 1068), (1920, 0, 1180)]
    assert ledger.usd == pytest.approx(0.003125 + 0.001639 + 0.001715)
    assert ledger.busts == 1


def test_ttl_expiry_is_cold_not_a_bust_and_one_hour_writes_cost_double() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A, B], 0)
    late = ledger.add([A, B, C], 6 * MINUTE)  # past the 5-minute TTL: everything is written again
    assert (late.warm, late.read, late.write, late.bust) == (False, 0, 3500, False)
    assert ledger.cold == 1

    hour = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("1h"))
    hour.add([A, B], 0)
    warm = hour.add([A, B, C], 6 * MINUTE)
    assert warm.read == 2500
    assert warm.usd == pytest.approx((2500 * 0.30 + 1000 * 3.0 * 2.0) / 1e6)  # 1 h writes at 2x


def test_minimum_cacheable_prefix_and_extra_calls() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    small = ledger.add([("x", 300)], 0)
    assert (small.write, small.uncached) == (0, 300)  # under 1024 tokens nothing is cached
    grown = ledger.add([("x", 300), A], MINUTE)
    assert grown.read == 0 and grown.write == 2300  # a 300-token prefix is below the minimum
    extra = ledger.add([("x", 300), A, ("prompt", 200)], MINUTE, output_tokens=2000, extra=True)
    assert extra.usd == pytest.approx((2300 * 0.30 + 200 * 3.75 + 2000 * 15.0) / 1e6)
    assert (ledger.passes, ledger.extra_calls, ledger.output_tokens) == (2, 1, 2000)


def test_parse_ttl_and_unknown_pricing() -> None:
    assert cost.parse_ttl("5m") == 300_000
    assert cost.parse_ttl("1h") == 3_600_000
    assert cost.parse_ttl("90s") == 90_000
    assert cost.parse_ttl("120") == 120_000
    with pytest.raises(BadInput):
        cost.parse_ttl("soon")
    with pytest.raises(BadInput):
        cost.pricing("gemini")
    assert cost.common_prefix([A, B, C], [A, B]) == 2500


@pytest.mark.parametrize(("text", "ms"), [("250ms", 250), ("1.5s", 1500), (" 5M ", 300_000), ("2h", 7_200_000),
                                          ("0.5m", 30_000), ("90", 90_000), ("1.5", 1500), ("300s", 300_000)])
def test_parse_ttl_units_and_decimals(text: str, ms: int) -> None:
    assert cost.parse_ttl(text) == ms


@pytest.mark.parametrize("text", ["1.2.3s", "1..5", "ms", "5 minutes", "-1s", "1.5.m"])
def test_parse_ttl_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(BadInput, match="cannot read the TTL"):
        cost.parse_ttl(text)


def test_unknown_pricing_names_the_choices() -> None:
    with pytest.raises(BadInput) as caught:
        cost.pricing("cheap")
    assert str(caught.value) == "unknown pricing 'cheap'"
    assert caught.value.fix == "use one of " + ", ".join(cost.PRICING)
    assert ", " in caught.value.fix and len(cost.PRICING) >= 2


def test_cache_boundaries_by_hand() -> None:
    """A prefix of exactly the minimum cacheable length is read; OpenAI reads in 128-token steps; cold is 0."""
    sonnet = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    first = sonnet.add([("a", 1024), ("b", 10)], 0)
    assert (first.prefix, first.read, first.write, first.uncached, first.warm) == (0, 0, 1034, 0, False)
    second = sonnet.add([("a", 1024), ("x", 50)], MINUTE)
    assert (second.prefix, second.read, second.write, second.bust) == (1024, 1024, 50, True)
    small = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m")).add([("a", 1023)], 0)
    assert (small.write, small.uncached) == (0, 1023)  # under the minimum: all uncached at 1x
    openai = cost.Ledger(cost.pricing("openai"), cost.parse_ttl("5m"))
    openai.add([("a", 1100)], 0)
    hit = openai.add([("a", 1100), ("b", 10)], MINUTE)
    assert (hit.prefix, hit.read, hit.write, hit.uncached) == (1100, 1024, 0, 86)
    assert hit.usd == pytest.approx((86 + 0.1 * 1024) * 1.25 / 1e6)


def test_an_uncached_extra_call_pays_full_input_and_leaves_the_cache_alone() -> None:
    """Pi and Codex build their summary request anew: no cache read or write, and the next pass still
    extends the conversation's cached prefix."""
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A, B], 0)
    summary = ledger.add([("summarize", 2700)], MINUTE, output_tokens=1000, extra=True, cached=False)
    assert (summary.read, summary.write, summary.uncached) == (0, 0, 2700)
    assert summary.usd == pytest.approx((2700 * 3.0 + 1000 * 15.0) / 1e6)
    after = ledger.add([A, B, C], MINUTE)
    assert after.read == 2500 and not after.bust
    assert (ledger.extra_calls, ledger.uncached_tokens, ledger.busts) == (1, 2700, 0)


def test_resent_read_share_counts_only_what_was_sent_before() -> None:
    """A, B then A, B, C: 2 500 re-sent, all read. Then a bust that keeps A and drops B: A (2 000) re-sent
    and read, C (1 000) re-sent but behind the break, so written again."""
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A, B], 0)
    ledger.add([A, B, C], MINUTE)
    assert (ledger.resent_tokens, ledger.resent_read) == (2500, 2500) and ledger.resent_read_share == 1.0
    ledger.add([A, C], 2 * MINUTE)
    assert (ledger.resent_tokens, ledger.resent_read) == (2500 + A[1] + C[1], 2500 + A[1])
    assert ledger.read_share < ledger.resent_read_share < 1


def test_a_repriced_ledger_bills_what_a_ledger_at_that_price_would() -> None:
    """bench/run.py prices every replay under three pricings from one replay: the repriced ledger must
    equal one fed the same calls at the other price (cached and uncached extra calls, a model-priced bill
    kept at its own price)."""
    sonnet, openai, opus = (cost.pricing(n) for n in ("anthropic-sonnet", "openai", "anthropic-opus"))

    def feed(ledger: cost.Ledger) -> cost.Ledger:
        ledger.add([A, B], 0)
        ledger.add([A, B, ("s", 200)], MINUTE, output_tokens=900, extra=True)
        ledger.add([("p", 3000)], MINUTE, output_tokens=700, extra=True, cached=False)
        ledger.add([A, B, C], MINUTE)
        ledger.bill(4000, 300, opus)
        ledger.add([A, D, C], 7 * MINUTE)
        return ledger

    repriced = feed(cost.Ledger(sonnet, 300_000)).repriced(openai)
    direct = feed(cost.Ledger(openai, 300_000))
    assert repriced.usd == pytest.approx(direct.usd) and repriced.usd != pytest.approx(feed(
        cost.Ledger(sonnet, 300_000)).usd)
    for name in ("passes", "extra_calls", "busts", "cold", "read_tokens", "write_tokens", "uncached_tokens",
                 "output_tokens", "resent_tokens", "resent_read"):
        assert getattr(repriced, name) == getattr(direct, name), name
