"""The values of the configured API keys, registered for redaction by value (issue #14 item 7).

A key's env var may have any name (`api_key_env = "MY_CREDS"`) and the key any shape, so neither the
log's name markers nor its patterns can be relied on: what a command shows (status, doctor) first
registers the value of every `api_key_env` the effective config names, wherever in the model it sits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magic_context import log

KEY_ENV_FIELD = "api_key_env"


def key_env_names(model: Any) -> list[str]:
    """Every env var name the config points an `api_key_env` at (any section, nested at any depth)."""
    names: list[str] = []

    def walk(value: Any) -> None:
        fields = getattr(type(value), "model_fields", None)  # a pydantic model (pydantic stays off module level)
        if isinstance(fields, dict):
            for field_name in fields:
                child = getattr(value, field_name)
                if field_name == KEY_ENV_FIELD and isinstance(child, str) and child:
                    names.append(child)
                else:
                    walk(child)
        elif isinstance(value, dict):
            for child in value.values():
                walk(child)
        elif isinstance(value, list | tuple):
            for child in value:
                walk(child)

    walk(model)
    return list(dict.fromkeys(names))


def register_configured(project_dir: Path | None = None) -> list[str]:
    """Register the configured keys' values for redaction; returns the env var names (never raises)."""
    try:
        from magic_context.config.load import load_config

        names = key_env_names(load_config(project_dir).config)
    except Exception:  # a broken config must not stop a command from showing (redacted) data
        return []
    log.register_env_secrets(names)
    return names


def redacted(data: Any, project_dir: Path | None = None) -> Any:
    """`data` with every configured key's value (and the log's patterns) redacted, for showing it."""
    register_configured(project_dir)
    return log.redact_data(data)


__all__ = ["KEY_ENV_FIELD", "key_env_names", "redacted", "register_configured"]
