"""The Anthropic Messages API provider: one `POST {base_url}/v1/messages`, text blocks joined."""

from __future__ import annotations

import time
from typing import Any

from magic_context.llm.base import (
    Completion,
    HttpProvider,
    ProviderEmpty,
    ProviderParseError,
    elapsed_ms,
    post_json,
    read_key,
    require,
)

NAME = "anthropic"
API_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
    """Sends the historian prompt as one user message with a top-level `system` string."""

    name = NAME

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        """Ask the model once (with transport retries); raises `ProviderError` on any failure."""
        base_url = require(NAME, self.base_url, "historian.anthropic.base_url")
        model = require(NAME, self.model, "historian.anthropic.model")
        key = read_key(NAME, self.api_key_env, "historian.anthropic")
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if key is not None:
            headers["x-api-key"] = key
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens or self.max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        if system:
            body["system"] = system
        if self.temperature is not None:
            body["temperature"] = self.temperature
        started = time.monotonic()
        fix = (f"check that ${self.api_key_env} holds a valid Anthropic API key" if self.api_key_env
               else "set historian.anthropic.api_key_env to the env var holding your Anthropic API key")
        data = post_json(NAME, base_url.rstrip("/") + "/v1/messages", headers, body, self.settings, auth_fix=fix)
        text = parse_messages_response(data)
        usage = data.get("usage")
        return Completion(text=text, provider=NAME, model=str(data.get("model") or model),
                          usage=usage if isinstance(usage, dict) else None, ms=elapsed_ms(started),
                          stop_reason=data.get("stop_reason") if isinstance(data.get("stop_reason"), str) else None)


def parse_messages_response(data: dict[str, Any]) -> str:
    """The joined text of a Messages response's `text` blocks; `ProviderParseError`/`ProviderEmpty` otherwise."""
    content = data.get("content")
    if not isinstance(content, list):
        raise ProviderParseError("response has no content list", provider=NAME)
    parts = [block["text"] for block in content
             if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)]
    text = "".join(parts)
    if not text.strip():
        raise ProviderEmpty(f"answer has no text (stop_reason={data.get('stop_reason')!s})", provider=NAME)
    return text


__all__ = ["API_VERSION", "AnthropicProvider", "parse_messages_response"]
