"""Prompt-cache cost model: pricing tables and a ledger that prices a stream of requests.

Per request i with units U_i (see `units`), T_i = its tokens, t_i its time:
* warm_i: a previous request exists and t_i − t_{i−1} ≤ TTL (a missing time counts as warm);
* P_i: the longest common prefix of U_i and U_{i−1} in tokens (whole units), 0 when cold;
* read_i = P_i when P_i ≥ the minimum cacheable length, else 0; OpenAI counts hits in 128-token steps;
* Anthropic: write_i = T_i − read_i at the write multiplier (1.25× for a 5-minute TTL, 2× for 1 h),
  uncached_i = 0 (a request under the minimum cacheable length is all uncached at 1×);
  OpenAI: no write premium, uncached_i = T_i − read_i at 1×;
* cost_i = base × (uncached_i + w·write_i + r·read_i) / 1e6 + output_price × out_i / 1e6, where out_i is
  only charged for a strategy's own extra calls (the recorded responses are the same for all strategies);
* bust_i: warm_i and P_i < T_{i−1} (the request did not extend the cached prefix);
* re-sent_i (warm passes): tokens of the units of U_i that were also in U_{i−1}; the re-sent read share
  is Σ read_i / Σ re-sent_i.
An extra call added with `cached=False` (a summary or historian call built as a new prompt) reads and
writes no cache: all its input is uncached at 1×, and it leaves the cached prefix alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from magic_context.errors import BadInput
from magic_context.records import record
from magic_context.replay.units import Unit

FIVE_MINUTES_MS: Final = 5 * 60 * 1000


@record(frozen=True)
class Pricing:
    """One provider's prices: base input and output in $ per million tokens, cache multipliers of the base."""

    name: str
    label: str
    input_per_mtok: float
    output_per_mtok: float
    read_multiplier: float
    write_multiplier_5m: float
    write_multiplier_1h: float
    min_cacheable: int
    step: int = 1  # cache hits are counted in multiples of this many tokens

    def write_multiplier(self, ttl_ms: int) -> float:
        """Anthropic prices a write by the TTL it buys: 5 minutes or one hour."""
        return self.write_multiplier_5m if ttl_ms <= FIVE_MINUTES_MS else self.write_multiplier_1h

    @property
    def write_premium(self) -> bool:
        return self.write_multiplier_5m != 1.0 or self.write_multiplier_1h != 1.0

    def split(self, tokens: int, cached: int) -> tuple[int, int, int]:
        """(read, write, uncached) of a `tokens` request the cache holds `cached` of: a hit under the minimum
        cacheable length reads nothing and hits count in whole `step`s; where writes cost a premium the rest
        is written (uncached if the request is too short to cache), elsewhere it is plain input."""
        read = cached if cached >= self.min_cacheable else 0
        if self.step > 1:
            read -= read % self.step
        if self.write_premium:
            return (read, tokens - read, 0) if tokens >= self.min_cacheable else (read, 0, tokens)
        return read, 0, tokens - read


PRICING: Final = {
    "anthropic-sonnet": Pricing("anthropic-sonnet", "Claude Sonnet 4.5", 3.0, 15.0, 0.1, 1.25, 2.0, 1024),
    "anthropic-opus": Pricing("anthropic-opus", "Claude Opus 4.5", 5.0, 25.0, 0.1, 1.25, 2.0, 4096),
    "openai": Pricing("openai", "GPT-5 (cached input 90% off, free writes)", 1.25, 10.0, 0.1, 1.0, 1.0, 1024, 128),
}


def pricing(name: str) -> Pricing:
    try:
        return PRICING[name]
    except KeyError:
        raise BadInput(f"unknown pricing {name!r}", fix=f"use one of {', '.join(PRICING)}") from None


def known_pricing(model: str | None) -> Pricing | None:
    """The price table for a model id (Opus, other Claude models, GPT / o-series); None for any other model
    (an Ollama or LM Studio id, DeepSeek…): the caller decides, and says, what it assumes."""
    name = (model or "").lower()
    if "opus" in name:
        return PRICING["anthropic-opus"]
    if "claude" in name or "sonnet" in name:
        return PRICING["anthropic-sonnet"]
    if name.startswith(("gpt", "o3", "o4")) or "/gpt" in name:
        return PRICING["openai"]
    return None


def model_pricing(model: str | None, fallback: Pricing) -> Pricing:
    """The price table for a model id (`known_pricing`), else `fallback`."""
    return known_pricing(model) or fallback


def parse_ttl(text: str) -> int:
    """'5m', '1h', '300s', '90' (seconds) → milliseconds."""
    value = text.strip().lower()
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
    for suffix in ("ms", "s", "m", "h"):
        if value.endswith(suffix) and value[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(float(value[: -len(suffix)]) * scale[suffix])
    if value.replace(".", "", 1).isdigit():
        return int(float(value) * 1000)
    raise BadInput(f"cannot read the TTL {text!r}", fix="use a duration such as 5m, 1h or 300s")


def common_prefix(a: Sequence[Unit], b: Sequence[Unit]) -> int:
    """Tokens of the longest run of equal leading units."""
    total = 0
    for x, y in zip(a, b, strict=False):
        if x[0] != y[0]:
            break
        total += x[1]
    return total


@record
class Charge:
    """What one request cost."""

    tokens: int
    prefix: int
    read: int
    write: int
    uncached: int
    output: int
    warm: bool
    bust: bool
    usd: float


class Ledger:
    """Prices requests in order; keeps the totals one strategy needs."""

    def __init__(self, price: Pricing, ttl_ms: int) -> None:
        self.price = price
        self.ttl_ms = ttl_ms
        self._write = price.write_multiplier(ttl_ms)
        self._prev: Sequence[Unit] | None = None
        self._prev_tokens = 0
        self._prev_at: int | None = None
        self.requests = self.passes = self.extra_calls = 0
        self.input_tokens = self.read_tokens = self.write_tokens = self.uncached_tokens = self.output_tokens = 0
        self.busts = self.cold = 0
        self.resent_tokens = self.resent_read = 0  # warm passes: tokens sent again, and how many were read
        self.usd = 0.0
        self._adds: list[tuple[Sequence[Unit], int | None, int, bool]] = []  # every call, for `repriced`
        self._bills: list[tuple[int, int, Pricing | None]] = []

    def repriced(self, price: Pricing) -> Ledger:
        """The same requests priced at `price`: a new ledger fed this one's calls in order (what a replay
        under another pricing would bill, without serving the passes again). A `bill` made at an explicit
        price (a model historian's) keeps it; bills touch no cache state, so they need no interleaving."""
        other = Ledger(price, self.ttl_ms)
        for units, at_ms, output_tokens, extra in self._adds:
            other.add(units, at_ms, output_tokens=output_tokens, extra=extra)
        for input_tokens, output_tokens, given in self._bills:
            other.bill(input_tokens, output_tokens, given)
        return other

    def add(self, units: Sequence[Unit], at_ms: int | None, *, output_tokens: int = 0, extra: bool = False,
            cached: bool = True) -> Charge:
        """Price one request; `extra` marks a strategy's own call (e.g. a summary) rather than a served pass.

        `cached=False` (an extra call only) is a request that reads nothing from the prompt cache and
        writes nothing to it: all its input is uncached at 1x, and the cached prefix stays as it was."""
        price = self.price
        tokens = sum(u[1] for u in units)
        if not cached:
            return self.bill(tokens, output_tokens)
        self._adds.append((units, at_ms, output_tokens, extra))
        warm = self._prev is not None and (at_ms is None or self._prev_at is None
                                           or at_ms - self._prev_at <= self.ttl_ms)
        prefix = common_prefix(units, self._prev) if warm and self._prev is not None else 0
        read, write, uncached = price.split(tokens, prefix)
        bust = warm and not extra and prefix < self._prev_tokens
        if warm and not extra and self._prev is not None:
            before = {u[0] for u in self._prev}
            self.resent_tokens += sum(u[1] for u in units if u[0] in before)
            self.resent_read += read
        usd = (price.input_per_mtok * (uncached + self._write * write + price.read_multiplier * read)
               + price.output_per_mtok * output_tokens) / 1e6
        self.requests += 1
        if extra:
            self.extra_calls += 1
        else:
            self.passes += 1
            self.cold += 0 if warm or self._prev is None else 1
        self.busts += bust
        self.input_tokens += tokens
        self.read_tokens += read
        self.write_tokens += write
        self.uncached_tokens += uncached
        self.output_tokens += output_tokens
        self.usd += usd
        if at_ms is not None:
            self._prev_at = at_ms
        self._prev, self._prev_tokens = units, tokens
        return Charge(tokens, prefix, read, write, uncached, output_tokens, warm, bust, usd)

    def bill(self, input_tokens: int, output_tokens: int, price: Pricing | None = None) -> Charge:
        """An extra call that reads and writes no cache (all input uncached at 1x) at `price` (default: the
        ledger's); the cached prefix stays as it was. Historian calls and uncached summary calls."""
        p = price or self.price
        self._bills.append((input_tokens, output_tokens, price))
        usd = (p.input_per_mtok * input_tokens + p.output_per_mtok * output_tokens) / 1e6
        self.requests += 1
        self.extra_calls += 1
        self.input_tokens += input_tokens
        self.uncached_tokens += input_tokens
        self.output_tokens += output_tokens
        self.usd += usd
        return Charge(input_tokens, 0, 0, 0, input_tokens, output_tokens, False, False, usd)

    @property
    def read_share(self) -> float:
        return self.read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def resent_read_share(self) -> float | None:
        """Of the tokens a warm pass sent again (already in the previous request), the share read from
        the cache. New messages are written once whatever the strategy, so this is the cache figure
        that does not drop as a strategy gets cheaper; TTL-expired (cold) passes are left out."""
        return self.resent_read / self.resent_tokens if self.resent_tokens else None


__all__ = ["FIVE_MINUTES_MS", "PRICING", "Charge", "Ledger", "Pricing", "common_prefix", "known_pricing",
           "model_pricing", "parse_ttl", "pricing"]
