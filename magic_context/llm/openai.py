"""The OpenAI-compatible Chat Completions provider: one `POST {base_url}/chat/completions`.

`base_url` includes the version segment (`https://api.openai.com/v1`, `http://localhost:11434/v1`), so
the same code talks to OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and LM Studio. With no
`api_key_env` configured no Authorization header is sent (local servers need none).
"""

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

NAME = "openai"


class OpenAIProvider(HttpProvider):
    """Sends the historian prompt as a system message plus one user message."""

    name = NAME

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        """Ask the model once (with transport retries); raises `ProviderError` on any failure."""
        base_url = require(NAME, self.base_url, "historian.openai.base_url")
        model = require(NAME, self.model, "historian.openai.model")
        key = read_key(NAME, self.api_key_env, "historian.openai")
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens or self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        started = time.monotonic()
        fix = (f"check that ${self.api_key_env} holds a valid key for {base_url}" if self.api_key_env
               else "set historian.openai.api_key_env to the env var holding your API key")
        data = post_json(NAME, base_url.rstrip("/") + "/chat/completions", headers, body, self.settings,
                         auth_fix=fix)
        text, finish = parse_chat_response(data)
        usage = data.get("usage")
        return Completion(text=text, provider=NAME, model=str(data.get("model") or model),
                          usage=usage if isinstance(usage, dict) else None, ms=elapsed_ms(started),
                          stop_reason=finish)


def parse_chat_response(data: dict[str, Any]) -> tuple[str, str | None]:
    """`choices[0].message.content` (string or text parts) and the finish reason; raises parse/empty errors."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderParseError("response has no choices", provider=NAME)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ProviderParseError("choices[0] has no message", provider=NAME)
    finish = choices[0].get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content
                          if isinstance(part, dict) and isinstance(part.get("text", ""), str))
    if content is not None and not isinstance(content, str):
        raise ProviderParseError(f"message content is {type(content).__name__}", provider=NAME)
    if not content or not content.strip():
        raise ProviderEmpty(f"answer has no text (finish_reason={finish})", provider=NAME)
    return content, finish


__all__ = ["OpenAIProvider", "parse_chat_response"]
