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
    assert (ledger.uncached_tokens, ledger.read_tokens, ledger.write_tokens) == (2500 + 1068 + 1180, 2432 + 1920, 0)


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


T0 = 1_733_000_000_000  # a real epoch time in ms: a sum of two times would be far past any TTL


def test_every_total_after_passes_busts_an_extra_call_expiry_and_a_bill() -> None:
    """Sonnet, 5-minute TTL: every counter of the ledger pinned after a mixed run.

    1 [A B]          cold first           write 2500                      → 2500 × 3.75             = 0.009375
    2 [A B C] +1m    prefix 2500          read 2500, write 1000           → 750 + 3750              = 0.0045
    3 [A D]   +2m    prefix 2000 < 3500   bust; read 2000, write 100      → 600 + 375               = 0.000975
    4 [A D p] +2m    extra, 500 out       read 2100, write 200; no bust   → 630 + 750 + 7500        = 0.00888
    5 [A C]   +3m    prefix 2000 < 2300   bust; read 2000, write 1000     → 600 + 3750              = 0.00435
    6 [A C]   +8m+1  past the TTL         cold; write 3000                → 11250                   = 0.01125
    7 [A C D] +9m+1  prefix 3000 = 3000   read 3000, write 100            → 900 + 375               = 0.001275
    8 bill 1000 in, 300 out at Opus ($5 / $25)                           → 5000 + 7500             = 0.0125
    """
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    prompt = ("p", 200)
    charges = [
        ledger.add([A, B], T0),
        ledger.add([A, B, C], T0 + MINUTE),
        ledger.add([A, D], T0 + 2 * MINUTE),
        ledger.add([A, D, prompt], T0 + 2 * MINUTE, output_tokens=500, extra=True),
        ledger.add([A, C], T0 + 3 * MINUTE),
        ledger.add([A, C], T0 + 8 * MINUTE + 1),
        ledger.add([A, C, D], T0 + 9 * MINUTE + 1),
        ledger.bill(1000, 300, cost.pricing("anthropic-opus")),
    ]
    assert [(c.tokens, c.prefix, c.read, c.write, c.uncached, c.output, c.warm, c.bust) for c in charges] == [
        (2500, 0, 0, 2500, 0, 0, False, False),
        (3500, 2500, 2500, 1000, 0, 0, True, False),
        (2100, 2000, 2000, 100, 0, 0, True, True),
        (2300, 2100, 2100, 200, 0, 500, True, False),
        (3000, 2000, 2000, 1000, 0, 0, True, True),
        (3000, 0, 0, 3000, 0, 0, False, False),
        (3100, 3000, 3000, 100, 0, 0, True, False),
        (1000, 0, 0, 0, 1000, 300, False, False),
    ]
    usd = [0.009375, 0.0045, 0.000975, 0.00888, 0.00435, 0.01125, 0.001275, 0.0125]
    assert [c.usd for c in charges] == [pytest.approx(u, rel=1e-9) for u in usd]
    assert (ledger.requests, ledger.passes, ledger.extra_calls, ledger.busts, ledger.cold) == (8, 6, 2, 2, 1)
    assert (ledger.input_tokens, ledger.read_tokens, ledger.write_tokens, ledger.uncached_tokens,
            ledger.output_tokens) == (20_500, 11_600, 7_900, 1_000, 800)
    # re-sent by warm passes (the extra call and the cold pass left out): A B, A, A, A C
    assert (ledger.resent_tokens, ledger.resent_read) == (2500 + 2000 + 2000 + 3000, 2500 + 2000 + 2000 + 3000)
    assert ledger.usd == pytest.approx(sum(usd), rel=1e-9)
    assert ledger.read_share == 11_600 / 20_500 and ledger.resent_read_share == 1.0


def test_an_empty_ledger_has_no_shares() -> None:
    ledger = cost.Ledger(cost.pricing("openai"), cost.parse_ttl("5m"))
    assert (ledger.read_share, ledger.resent_read_share, ledger.usd, ledger.requests) == (0.0, None, 0.0, 0)


def test_a_bill_at_the_ledgers_own_price_by_default() -> None:
    ledger = cost.Ledger(cost.pricing("openai"), cost.parse_ttl("5m"))
    charge = ledger.bill(4000, 1000)
    assert (charge.tokens, charge.prefix, charge.read, charge.write, charge.uncached, charge.output,
            charge.warm, charge.bust) == (4000, 0, 0, 0, 4000, 1000, False, False)
    assert charge.usd == pytest.approx((4000 * 1.25 + 1000 * 10.0) / 1e6, rel=1e-9)
    ledger.bill(10, 5)
    assert (ledger.requests, ledger.passes, ledger.extra_calls) == (2, 0, 2)
    assert (ledger.input_tokens, ledger.uncached_tokens, ledger.output_tokens) == (4010, 4010, 1005)
    assert ledger.usd == pytest.approx((4010 * 1.25 + 1005 * 10.0) / 1e6, rel=1e-9)


def test_the_ttl_boundary_is_warm_and_one_ms_later_is_cold() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A], T0)
    assert ledger.add([A, B], T0 + 5 * MINUTE).warm  # exactly the TTL after the previous request
    late = ledger.add([A, B, C], T0 + 10 * MINUTE + 1)
    assert (late.warm, late.prefix, late.read) == (False, 0, 0)


def test_a_missing_time_counts_as_warm_and_keeps_the_last_known_one() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A], None)
    assert ledger.add([A, B], T0).read == 2000  # no previous time: warm
    assert ledger.add([A, B, C], None).read == 2500  # no time now: warm
    late = ledger.add([A, B, C, D], T0 + 6 * MINUTE)  # measured from T0, the last known time
    assert (late.warm, late.read, late.write) == (False, 0, 3600)
    assert ledger.cold == 1


def test_a_request_of_exactly_the_minimum_cacheable_length_is_written() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    charge = ledger.add([("a", 1024)], T0)
    assert (charge.write, charge.uncached) == (1024, 0)


def test_hits_are_counted_in_the_steps_the_pricing_names() -> None:
    """A provider counting hits in 2-token steps reads 1100 of a 1101-token prefix; step 1 reads it all."""
    two = cost.Pricing("two", "2-token steps", 1.0, 1.0, 0.1, 1.0, 1.0, 1024, 2)
    ledger = cost.Ledger(two, cost.parse_ttl("5m"))
    ledger.add([("a", 1101)], T0)
    assert ledger.add([("a", 1101), ("b", 9)], T0 + MINUTE).read == 1100
    one = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    one.add([("a", 1101)], T0)
    assert one.add([("a", 1101), ("b", 9)], T0 + MINUTE).read == 1101


OPUS, SONNET, OPENAI = (cost.PRICING[n] for n in ("anthropic-opus", "anthropic-sonnet", "openai"))
FALLBACK = cost.Pricing("fallback", "fallback", 1.0, 1.0, 1.0, 1.0, 1.0, 1)


@pytest.mark.parametrize(("model", "expected"), [
    ("claude-opus-4-5", OPUS), ("Claude-Opus-4-1", OPUS), ("anthropic/claude-opus-4", OPUS),
    ("claude-sonnet-4-5", SONNET), ("claude-3-5-haiku-latest", SONNET), ("sonnet-4.5", SONNET),
    ("gpt-5", OPENAI), ("GPT-5-Codex", OPENAI), ("o3-mini", OPENAI), ("o4-mini", OPENAI), ("openai/gpt-4.1", OPENAI),
    (None, FALLBACK), ("", FALLBACK), ("gemini-2.5-pro", FALLBACK), ("deepseek-chat", FALLBACK),
])
def test_model_pricing_picks_the_table_by_model_id(model: str | None, expected: cost.Pricing) -> None:
    assert cost.model_pricing(model, FALLBACK) is expected


def test_an_unreadable_ttl_says_how_to_write_one() -> None:
    with pytest.raises(BadInput) as caught:
        cost.parse_ttl("soon")
    assert str(caught.value) == "cannot read the TTL 'soon'"
    assert caught.value.fix == "use a duration such as 5m, 1h or 300s"


def test_a_bare_decimal_is_seconds() -> None:
    assert cost.parse_ttl("2.5") == 2500


def test_extra_calls_are_counted_one_by_one() -> None:
    ledger = cost.Ledger(cost.pricing("anthropic-sonnet"), cost.parse_ttl("5m"))
    ledger.add([A], T0)
    for minute in (1, 2, 3):
        ledger.add([A, ("prompt", 100)], T0 + minute * MINUTE, output_tokens=10, extra=True)
    assert (ledger.requests, ledger.passes, ledger.extra_calls, ledger.output_tokens) == (4, 1, 3, 30)
