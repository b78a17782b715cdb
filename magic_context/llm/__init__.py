"""Historian model providers (anthropic, openai-compatible, command) and the fallback chain (DESIGN §5).

Cheap to import: httpx is imported only when an HTTP provider sends a request.
"""

from __future__ import annotations

from magic_context.llm.anthropic import AnthropicProvider
from magic_context.llm.base import (
    Completion,
    HttpSettings,
    InvalidOutput,
    Provider,
    ProviderAuthError,
    ProviderCommandError,
    ProviderConfigError,
    ProviderEmpty,
    ProviderError,
    ProviderHTTPError,
    ProviderParseError,
    ProviderTimeout,
)
from magic_context.llm.chain import Attempt, ChainExhausted, build_chain, complete_with_chain, default_repair_prompt
from magic_context.llm.command import CommandProvider
from magic_context.llm.openai import OpenAIProvider

__all__ = [
    "AnthropicProvider",
    "Attempt",
    "ChainExhausted",
    "CommandProvider",
    "Completion",
    "HttpSettings",
    "InvalidOutput",
    "OpenAIProvider",
    "Provider",
    "ProviderAuthError",
    "ProviderCommandError",
    "ProviderConfigError",
    "ProviderEmpty",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderParseError",
    "ProviderTimeout",
    "build_chain",
    "complete_with_chain",
    "default_repair_prompt",
]
