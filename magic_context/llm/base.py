"""What every historian provider shares: the `Completion` result, the typed `ProviderError`s, the
`Provider` protocol, and one JSON POST with bounded retries that both HTTP providers use.

Error messages are redacted one-liners: they name the provider and the failure class, never an API key
or the prompt, because they end up in the log and in `mc status`.
"""

from __future__ import annotations

import email.utils
import math
import os
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, ClassVar, Protocol, runtime_checkable

from magic_context.errors import MCError
from magic_context.log import redact, register_secret
from magic_context.records import record

MAX_DETAIL_CHARS = 240
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 30.0
CONNECT_TIMEOUT_CAP_S = 10.0

Sleep = Callable[[float], None]


@record(frozen=True)
class Completion:
    """One model answer: its text, who produced it, token usage as reported, and wall time."""

    text: str
    provider: str
    model: str
    usage: dict[str, Any] | None
    ms: int
    stop_reason: str | None = None


def one_line(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """Redact, collapse whitespace to single spaces and cut to `limit` characters."""
    flat = " ".join(redact(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class AttemptKind(StrEnum):
    """How one provider request went: ok, or its failure class (`historian_failure.class` in `mc status`)."""

    OK = "ok"
    TIMEOUT = "timeout"
    HTTP = "http"
    AUTH = "auth"
    EMPTY = "empty"
    PARSE = "parse"
    COMMAND = "command"
    CONFIG = "config"
    INVALID = "invalid"  # the answer failed validation, also after its one repair
    INTERNAL = "internal"  # the provider raised something that is not a ProviderError
    EXHAUSTED = "exhausted"  # every provider of the chain failed


class ProviderError(MCError):
    """Raised when a provider could not produce a usable answer; `kind` is its failure class."""

    kind: ClassVar[AttemptKind] = AttemptKind.HTTP

    def __init__(self, message: str, *, provider: str, fix: str | None = None, status: int | None = None) -> None:
        super().__init__(one_line(f"{provider}: {message}", 2 * MAX_DETAIL_CHARS),
                         fix=one_line(fix) if fix else None)
        self.provider = provider
        self.status = status


class ProviderTimeout(ProviderError):
    """Raised when the request or command ran past its timeout."""

    kind = AttemptKind.TIMEOUT


class ProviderHTTPError(ProviderError):
    """Raised on a non-auth HTTP error status, or when the server could not be reached."""

    kind = AttemptKind.HTTP


class ProviderAuthError(ProviderError):
    """Raised when the key env var is unset or the server answered 401/403."""

    kind = AttemptKind.AUTH


class ProviderEmpty(ProviderError):
    """Raised when the answer carried no text."""

    kind = AttemptKind.EMPTY


class ProviderParseError(ProviderError):
    """Raised when the response body is not JSON or not the expected shape."""

    kind = AttemptKind.PARSE


class ProviderCommandError(ProviderError):
    """Raised when the command provider's process could not start or exited non-zero."""

    kind = AttemptKind.COMMAND


class ProviderConfigError(ProviderError):
    """Raised when a provider is selected but its config is incomplete (no model, no base_url, no argv)."""

    kind = AttemptKind.CONFIG


class InvalidOutput(ProviderError):
    """Raised (and recorded) when an answer failed validation, also after its one repair."""

    kind = AttemptKind.INVALID


@runtime_checkable
class Provider(Protocol):
    """Anything that turns a system prompt and a prompt into a `Completion` or raises `ProviderError`."""

    name: str

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion: ...


@record(frozen=True)
class HttpSettings:
    """Transport knobs for one HTTP provider (from `historian.*`); `sleep` is injectable for tests."""

    timeout_s: float
    max_retries: int
    sleep: Sleep = time.sleep
    backoff_base_s: float = BACKOFF_BASE_S
    retry_after_cap_s: float = RETRY_AFTER_CAP_S


def read_key(provider: str, env_name: str | None, config_path: str) -> str | None:
    """The API key from the env var named in config, read now; None when no env var is configured."""
    if not env_name:
        return None
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise ProviderAuthError(
            f"API key env var {env_name} is not set", provider=provider,
            fix=f"export {env_name}=… (or point {config_path}.api_key_env at the variable that holds the key)")
    register_secret(value)  # redacted by its value: the variable's name need not look secret
    return value


def require(provider: str, value: str | None, key: str) -> str:
    """A required config value, or a `ProviderConfigError` naming the key to set."""
    if not value:
        raise ProviderConfigError(f"{key} is not set", provider=provider, fix=f"set {key} in the mc config")
    return value


def retry_after_s(value: str | None, cap: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date), capped; None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), cap)


def _backoff(settings: HttpSettings, attempt: int) -> float:
    return min(settings.backoff_base_s * (2**attempt), BACKOFF_CAP_S)


def _error_detail(response: Any) -> str:
    """The server's own error message if the body has one, else the start of the body."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:MAX_DETAIL_CHARS]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
    return response.text[:MAX_DETAIL_CHARS]


def post_json(provider: str, url: str, headers: dict[str, str], body: dict[str, Any],
              settings: HttpSettings, *, auth_fix: str) -> dict[str, Any]:
    """POST `body` as JSON and return the decoded JSON object.

    Retries 429, 5xx, connection errors and timeouts up to `settings.max_retries` times with exponential
    backoff (Retry-After wins when present, capped). 401/403 raise `ProviderAuthError`, other 4xx
    `ProviderHTTPError`, both at once; a body that is not a JSON object raises `ProviderParseError`.
    """
    import httpx

    timeout = httpx.Timeout(settings.timeout_s, connect=min(settings.timeout_s, CONNECT_TIMEOUT_CAP_S))
    attempt = 0
    with httpx.Client(timeout=timeout) as client:
        while True:
            delay: float | None = None
            try:
                response = client.post(url, headers=headers, json=body)
            except httpx.TimeoutException as exc:
                error: ProviderError = ProviderTimeout(
                    f"no answer within {settings.timeout_s:g}s ({type(exc).__name__})", provider=provider,
                    fix="raise historian.timeout_ms or use a faster model")
            except httpx.UnsupportedProtocol as exc:
                raise ProviderConfigError(f"bad base_url: {exc}", provider=provider,
                                          fix=f"set historian.{provider}.base_url to an http(s) URL") from exc
            except httpx.TransportError as exc:
                error = ProviderHTTPError(f"connection failed ({type(exc).__name__}: {exc})", provider=provider,
                                          fix=f"check that historian.{provider}.base_url is reachable")
            except httpx.InvalidURL as exc:
                raise ProviderConfigError(f"bad base_url: {exc}", provider=provider,
                                          fix=f"set historian.{provider}.base_url to an http(s) URL") from exc
            else:
                status = response.status_code
                if status in (401, 403):
                    raise ProviderAuthError(f"HTTP {status}: {_error_detail(response)}", provider=provider,
                                            fix=auth_fix, status=status)
                if status == 429 or status >= 500:
                    error = ProviderHTTPError(f"HTTP {status}: {_error_detail(response)}", provider=provider,
                                              status=status)
                    delay = retry_after_s(response.headers.get("retry-after"), settings.retry_after_cap_s)
                elif status >= 400:
                    raise ProviderHTTPError(f"HTTP {status}: {_error_detail(response)}", provider=provider,
                                            status=status)
                else:
                    return _decode(provider, response)
            if attempt >= settings.max_retries:
                raise error
            settings.sleep(_backoff(settings, attempt) if delay is None else delay)
            attempt += 1


def _decode(provider: str, response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise ProviderParseError(f"response is not JSON (HTTP {response.status_code}, "
                                 f"{len(response.content)} bytes)", provider=provider) from exc
    if not isinstance(data, dict):
        raise ProviderParseError(f"response is JSON {type(data).__name__}, not an object", provider=provider)
    return data


def elapsed_ms(started: float) -> int:
    """Milliseconds since `started` (a `time.monotonic()` reading)."""
    return round((time.monotonic() - started) * 1000)



class HttpProvider:
    """Shared constructor of the HTTP providers; subclasses set `name` and implement `complete`."""

    name = "http"

    def __init__(self, *, base_url: str | None, api_key_env: str | None, model: str | None, max_tokens: int,
                 temperature: float | None, settings: HttpSettings) -> None:
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.settings = settings

    @classmethod
    def from_config(cls, historian: Any, *, sleep: Sleep | None = None) -> Any:
        """Build from the `historian` config section (`historian.<name>` plus the shared knobs)."""
        import time

        section = getattr(historian, cls.name)
        settings = HttpSettings(timeout_s=historian.timeout_ms / 1000, max_retries=historian.max_retries,
                                sleep=sleep or time.sleep)
        return cls(base_url=section.base_url, api_key_env=section.api_key_env, model=section.model,
                   max_tokens=section.max_tokens, temperature=historian.temperature, settings=settings)


__all__ = [
    "AttemptKind",
    "Completion",
    "HttpProvider",
    "HttpSettings",
    "InvalidOutput",
    "Provider",
    "ProviderAuthError",
    "ProviderCommandError",
    "ProviderConfigError",
    "ProviderEmpty",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderParseError",
    "ProviderTimeout",
    "Sleep",
    "elapsed_ms",
    "one_line",
    "post_json",
    "read_key",
    "require",
    "retry_after_s",
]
