"""The historian's fallback chain: build providers from config, then try them in order with validation.

Each provider gets one request; output that fails `validate` gets ONE repair request; a provider error or
a second invalid answer moves on to the next provider. Every request is recorded as an `Attempt` so the
caller can report failures (class, provider, time) in `mc status`, and what each answered request cost
in tokens (`call_tokens`: the provider's usage, else estimates) so replays can bill it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from magic_context.errors import MCError
from magic_context.llm.base import (
    AttemptKind,
    Completion,
    InvalidOutput,
    Provider,
    ProviderError,
    Sleep,
    elapsed_ms,
    one_line,
)
from magic_context.log import redact
from magic_context.records import record

T = TypeVar("T")

OK = AttemptKind.OK
INTERNAL = AttemptKind.INTERNAL


class ChainExhausted(ProviderError):
    """Raised when every provider in the chain failed; `attempts` lists what each one did."""

    kind = AttemptKind.EXHAUSTED

    def __init__(self, message: str, *, attempts: Sequence[Attempt], fix: str | None = None) -> None:
        super().__init__(message, provider="historian", fix=fix)
        self.attempts = list(attempts)


@record(frozen=True)
class Attempt:
    """One request to one provider: `kind` is ok, a `ProviderError.kind`, invalid or internal."""

    provider: str
    model: str | None
    kind: AttemptKind
    error: str | None
    ms: int
    repair: bool = False
    input_tokens: int = 0  # prompt tokens of the request (0 when it got no answer: nothing to bill)
    output_tokens: int = 0
    tokens_source: str = ""  # "provider" (its reported usage), "estimate", or "" (no answer)

    @property
    def ok(self) -> bool:
        return self.kind == OK


def call_tokens(system: str, prompt: str, completion: Completion) -> tuple[int, int, str]:
    """(input, output, source) of one answered request: the provider's reported usage (Anthropic
    input + cache read/write and output tokens, OpenAI prompt/completion tokens), else estimates."""
    usage = completion.usage or {}

    def whole(*keys: str) -> int:
        return sum(v for k in keys if isinstance(v := usage.get(k), int) and not isinstance(v, bool))

    reported_in = whole("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "prompt_tokens")
    reported_out = whole("output_tokens", "completion_tokens")
    if reported_in and reported_out:
        return reported_in, reported_out, "provider"
    from magic_context import tokens

    return tokens.estimate(system) + tokens.estimate(prompt), tokens.estimate(completion.text), "estimate"


def build_chain(historian: Any, *, extractive: Any = None, sleep: Sleep | None = None) -> list[Provider]:
    """Providers for `historian.provider` then each of `historian.fallback`, de-duplicated, in order.

    `extractive` is a ready provider, or a class / zero-argument factory returning one; when it is None the
    extractive entries are skipped. `sleep` replaces `time.sleep` in HTTP retry backoff (tests).
    """
    names = list(dict.fromkeys([historian.provider, *historian.fallback]))
    chain: list[Provider] = []
    for name in names:
        if name == "extractive":
            if extractive is not None:
                chain.append(_resolve_extractive(extractive))
        elif name == "anthropic":
            from magic_context.llm.anthropic import AnthropicProvider
            chain.append(AnthropicProvider.from_config(historian, sleep=sleep))
        elif name == "openai":
            from magic_context.llm.openai import OpenAIProvider
            chain.append(OpenAIProvider.from_config(historian, sleep=sleep))
        elif name == "command":
            from magic_context.llm.command import CommandProvider
            chain.append(CommandProvider.from_config(historian))
        else:  # the config model rejects unknown names; this guards hand-built configs
            raise ValueError(f"unknown historian provider {name!r}")
    return chain


def _resolve_extractive(extractive: Any) -> Provider:
    if isinstance(extractive, type) or not hasattr(extractive, "complete"):
        return extractive()
    return extractive


def default_repair_prompt(prompt: str, error: str, previous: str) -> str:
    """The original prompt, the validation error, a request for a corrected full answer, and the previous output."""
    return (
        f"{prompt}\n\n"
        "---\n"
        f"Your previous answer was rejected by the validator: {error}\n"
        "Reply again with the corrected, complete answer in the required format — the whole answer, "
        "not just the fixed part, and nothing else.\n\n"
        "Your previous answer was:\n"
        f"{previous}"
    )


def _error_text(exc: BaseException) -> str:
    return one_line(exc.one_line() if isinstance(exc, MCError) else (str(exc) or type(exc).__name__))


def _full_error(exc: BaseException) -> str:
    """The validator's whole message (redacted), for the repair prompt."""
    return redact(exc.one_line() if isinstance(exc, MCError) else (str(exc) or type(exc).__name__))


class _Recorder:
    """Times requests and collects `Attempt`s."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self._tokens: tuple[int, int, str] = (0, 0, "")

    def request(self, provider: Provider, system: str, prompt: str, max_tokens: int | None,
                *, repair: bool) -> Completion | None:
        """Call the provider; on failure record it and return None."""
        started = time.monotonic()
        self._tokens = (0, 0, "")
        try:
            completion = provider.complete(system, prompt, max_tokens=max_tokens)
            self._tokens = call_tokens(system, prompt, completion)
            return completion
        except ProviderError as exc:
            self.add(provider, exc.kind, _error_text(exc), elapsed_ms(started), repair)
        except Exception as exc:  # a provider bug must not stop the chain; it is recorded as "internal"
            self.add(provider, INTERNAL, f"{type(exc).__name__}: {_error_text(exc)}", elapsed_ms(started), repair)
        return None

    def add(self, provider: Provider, kind: AttemptKind, error: str | None, ms: int, repair: bool) -> None:
        tokens_in, tokens_out, source = self._tokens
        self._tokens = (0, 0, "")
        self.attempts.append(Attempt(provider=provider.name, model=getattr(provider, "model", None), kind=kind,
                                     error=error, ms=ms, repair=repair, input_tokens=tokens_in,
                                     output_tokens=tokens_out, tokens_source=source))


def complete_with_chain(
    chain: Sequence[Provider],
    system: str,
    prompt: str,
    validate: Callable[[str], T],
    repair_prompt: Callable[[str, str], str] | None = None,
    *,
    max_tokens: int | None = None,
) -> tuple[T, list[Attempt]]:
    """The first validated answer from the chain and every attempt made, or `ChainExhausted`.

    `validate(text)` returns the parsed value or raises with a message. `repair_prompt(error, previous_output)`
    builds the one repair request (default: `default_repair_prompt` around `prompt`).
    """
    build_repair = repair_prompt or (lambda error, previous: default_repair_prompt(prompt, error, previous))
    rec = _Recorder()
    for provider in chain:
        text_prompt, repair = prompt, False
        while True:
            completion = rec.request(provider, system, text_prompt, max_tokens, repair=repair)
            if completion is None:
                break
            try:
                value = validate(completion.text)
            except Exception as exc:
                rec.add(provider, InvalidOutput.kind, _error_text(exc), completion.ms, repair)
                if repair:
                    break
                text_prompt, repair = build_repair(_full_error(exc), completion.text), True
                continue
            rec.add(provider, OK, None, completion.ms, repair)
            return value, rec.attempts
    raise _exhausted(chain, rec.attempts)


def _exhausted(chain: Sequence[Provider], attempts: list[Attempt]) -> ChainExhausted:
    if not chain:
        return ChainExhausted("no historian provider is available", attempts=attempts,
                              fix="set historian.provider (or keep 'extractive' in historian.fallback)")
    failures = ", ".join(f"{a.provider}{' (repair)' if a.repair else ''}: {a.kind}" for a in attempts)
    return ChainExhausted(f"every provider failed — {failures}", attempts=attempts,
                          fix="`mc status` shows each attempt's error")


__all__ = [
    "Attempt",
    "ChainExhausted",
    "build_chain",
    "call_tokens",
    "complete_with_chain",
    "default_repair_prompt",
]
