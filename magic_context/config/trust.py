"""The project tier's trust boundary (stdlib only: shared by the loader and the hot-path reader).

A project's `.magic-context.toml` comes with the repository, so it is untrusted. `POLICY` decides
every key of the config model (`config.model.MCConfig`; a test enumerates the model against it):

- allowed: a preference about how this project's own content is shown; no cost, safety or routing effect.
- raise-only: the project may make mc keep more or wait longer (thresholds, protection, TTL), never less.
- lower-only: the project may make mc spend less or stop sooner (budgets, LLM work, runtimes,
  timeouts, switches of costly features), never more.
- user-tier-only: the project may not set it at all — where requests, commands, keys and prompts
  go, switches that turn mc or its safety off, storage and proxy settings.

Rule of thumb: a cloned repository may make mc cheaper or more conservative for itself; it may never
redirect mc, switch it off, make it spend more (LLM calls, injected tokens, cache misses) or stretch
how long anything may run. A key is compared to the user's effective value (user tier over defaults),
per model key for per-model maps; a violation drops the project's value with a warning.
"""

from __future__ import annotations

import math
import re

from magic_context.config.files import ConfigWarning, get_path

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

ALLOWED: Final = "allowed"
RAISE_ONLY: Final = "raise-only"
LOWER_ONLY: Final = "lower-only"
USER_ONLY: Final = "user-tier-only"

# dotted key of config.model.MCConfig -> what the project tier may do with it (and, in a comment, why).
POLICY: Final[dict[str, str]] = {
    "enabled": USER_ONLY,  # a repository may not switch mc off (or on, against the user's choice)
    "ctx_reduce_enabled": ALLOWED,  # offers or hides the agent's ctx_reduce tool; no cost either way
    "cache_ttl": RAISE_ONLY,  # a shorter TTL rebuilds the head and misses the provider cache every pass
    "execute_threshold_percentage": RAISE_ONLY,  # a lower threshold busts the cache early and often
    "execute_threshold_tokens": RAISE_ONLY,  # same; only a user-set token threshold can be raised
    "protected_tags": RAISE_ONLY,  # more protection keeps more of the newest context
    "nudge_interval_tokens": RAISE_ONLY,  # a shorter interval floods the agent with reduce nudges
    "auto_drop_tool_age": RAISE_ONLY,  # a lower age drops tool output sooner
    "clear_reasoning_age": RAISE_ONLY,  # a lower age clears reasoning sooner
    "drop_tool_structure": ALLOWED,  # how a dropped tool call is shown
    "history_budget_percentage": LOWER_ONLY,  # a larger history block costs tokens on every request
    "temporal_awareness": ALLOWED,  # time markers in the served text
    "smart_drops": ALLOWED,  # which low-value parts the drop lanes pick
    "commit_cluster_trigger.enabled": LOWER_ONLY,  # switching it on starts more historian (LLM) runs
    "commit_cluster_trigger.min_clusters": RAISE_ONLY,  # fewer clusters would start more historian runs
    "caveman_text_compression.enabled": ALLOWED,  # how old text of this project is shortened
    "caveman_text_compression.min_chars": ALLOWED,
    "compaction.enabled": USER_ONLY,  # switching compaction off is switching mc off
    "fail_closed_blocking": USER_ONLY,  # a safety switch
    "system_prompt_injection.enabled": USER_ONLY,  # silences mc's instructions to the agent
    "system_prompt_injection.skip_signatures": USER_ONLY,  # a common string would silence them too
    "memory.enabled": LOWER_ONLY,  # memories are injected into every request
    "memory.injection_budget_tokens": LOWER_ONLY,
    "memory.auto_promote": LOWER_ONLY,  # promotion grows what is injected
    "memory.retrieval_count_promotion_threshold": RAISE_ONLY,
    "memory.auto_search.enabled": LOWER_ONLY,  # auto search injects results into the prompt
    "memory.auto_search.score_threshold": RAISE_ONLY,  # a lower bar injects more
    "memory.auto_search.min_prompt_chars": RAISE_ONLY,
    "memory.git_commit_indexing.enabled": LOWER_ONLY,  # indexing is work on the user's machine
    "memory.git_commit_indexing.since_days": LOWER_ONLY,
    "memory.git_commit_indexing.max_commits": LOWER_ONLY,
    "embedding.provider": USER_ONLY,  # where text is sent
    "embedding.endpoint": USER_ONLY,
    "embedding.model": USER_ONLY,
    "embedding.api_key_env": USER_ONLY,  # which secret is read
    "embedding.max_input_tokens": USER_ONLY,  # must match the user's embedding model
    "embedding.min_similarity": USER_ONLY,  # a cosine scale is the user's embedding model's, unknown to a repository
    "historian.provider": USER_ONLY,  # where the session is sent
    "historian.fallback": USER_ONLY,
    "historian.timeout_ms": LOWER_ONLY,  # a long timeout keeps a crashed historian's lease for ever
    "historian.max_retries": LOWER_ONLY,  # each retry is a paid LLM call
    "historian.temperature": USER_ONLY,  # the user's model settings
    "historian.two_pass": LOWER_ONLY,  # two passes double the LLM calls
    "historian.prompt": USER_ONLY,  # a prompt is an instruction to the user's LLM
    "historian.anthropic.base_url": USER_ONLY,
    "historian.anthropic.api_key_env": USER_ONLY,
    "historian.anthropic.model": USER_ONLY,
    "historian.anthropic.max_tokens": USER_ONLY,
    "historian.openai.base_url": USER_ONLY,
    "historian.openai.api_key_env": USER_ONLY,
    "historian.openai.model": USER_ONLY,
    "historian.openai.max_tokens": USER_ONLY,
    "historian.command.argv": USER_ONLY,  # a command runs on the user's machine
    "historian.command.timeout_ms": USER_ONLY,
    "dreamer.enabled": LOWER_ONLY,  # the dreamer runs LLM tasks
    "dreamer.inject_docs": LOWER_ONLY,  # injected text costs tokens
    "dreamer.max_runtime_minutes": LOWER_ONLY,
    "dreamer.tasks": USER_ONLY,  # which LLM tasks run and when (a map: the whole map)
    "dreamer.user_memories.enabled": LOWER_ONLY,
    "dreamer.user_memories.promotion_threshold": RAISE_ONLY,
    "output_reserve": USER_ONLY,  # a wrong reserve overflows the window
    "sqlite.cache_size_mb": USER_ONLY,  # the user's machine
    "sqlite.mmap_size_mb": USER_ONLY,
    "proxy.host": USER_ONLY,  # where requests and keys go
    "proxy.port": USER_ONLY,
    "proxy.upstream_anthropic": USER_ONLY,
    "proxy.upstream_openai": USER_ONLY,
    "proxy.max_body_mb": USER_ONLY,
    "proxy.connect_timeout_s": USER_ONLY,
    "proxy.read_timeout_s": USER_ONLY,
    "proxy.shutdown_grace_s": USER_ONLY,
}

# Defence in depth for keys the table does not know (a newer config, a typo): names that redirect
# mc are stripped wherever they appear. A test checks every such key of the table is user-tier-only.
UNTRUSTED_LEAVES: Final = frozenset({"command", "argv", "endpoint", "base_url", "url", "prompt", "skip_signatures",
                                     "provider", "fallback", "upstream", "host"})
UNTRUSTED_SUFFIXES: Final = ("_command", "_endpoint", "_url", "_prompt", "_env", "_provider")

# What a per-model map falls back to for a model it does not name: the config model's defaults
# (`config.model.MCConfig`, `config.hot.HOT_KEYS`; a test keeps the three equal). This is the value a
# project's entry for such a model is compared with. The execute threshold's default depends on the
# harness and the window (40%, raised in small windows: `transform.scheduler.default_threshold`), which is not known
# when the config is read; 40 lets a project raise any harness's default here, and the pass then keeps
# the harness's default as a floor for every model the user's config does not set (`pass_decide.measure`).
MAP_DEFAULTS: Final[dict[str, Any]] = {"cache_ttl": "5m", "execute_threshold_percentage": 40,
                                       "execute_threshold_tokens": None}
_SECTIONS: Final = frozenset(".".join(key.split(".")[:end]) for key in POLICY for end in range(1, key.count(".") + 1))
_UNITS_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")


def policy_of(dotted: str) -> str | None:
    """The table's class for a dotted key (a key inside a map takes the map's); None if unknown."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        found = POLICY.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def leaf_is_untrusted(dotted: str) -> bool:
    """Whether the key's own name (its last part, not its dotted path) redirects mc."""
    leaf = dotted.rpartition(".")[2].lower()
    return leaf in UNTRUSTED_LEAVES or leaf.endswith(UNTRUSTED_SUFFIXES) or "api_key" in leaf


def strip_untrusted(data: dict[str, Any], file: str, prefix: str = "") -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Copy of `data` without the user-tier-only keys, with one warning per stripped key."""
    clean: dict[str, Any] = {}
    warnings: list[ConfigWarning] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and (dotted in _SECTIONS or policy_of(dotted) is None):
            sub, sub_warnings = strip_untrusted(value, file, dotted + ".")  # a section, or a table mc does not know
            warnings.extend(sub_warnings)
            if sub:
                clean[key] = sub
        elif policy_of(dotted) == USER_ONLY or leaf_is_untrusted(dotted):
            warnings.append(ConfigWarning(file, dotted, "not allowed in a project config (set it in your user config)"))
        else:
            clean[key] = value
    return clean, warnings


def duration_ms(text: str) -> float:
    """'5m' -> 300000; 'never' -> infinity."""
    text = text.strip()
    if text == "never":
        return math.inf
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return float(match.group(1)) * _UNITS_MS[match.group(2)]


def _order(value: Any) -> float | None:
    """A value's place on its key's scale: numbers as is, switches off < on, durations in ms."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return duration_ms(value)
        except ValueError:
            return None
    return None


def _resolve(value: Any, model_key: str, fallback: Any) -> Any:
    """A per-model map's value for one model (its "default", else `fallback`); a scalar is every model's."""
    if isinstance(value, dict):
        return value.get(model_key, value.get("default", fallback))
    return value


def _violation(dotted: str, policy: str, value: Any, base: Any) -> str | None:
    """Why the project's `value` breaks the key's direction against the user's `base`, or None."""
    fallback = MAP_DEFAULTS.get(dotted)
    keys = set(value) if isinstance(value, dict) else {"default"}
    if isinstance(base, dict):
        keys |= set(base)
    for model_key in sorted(keys):
        if isinstance(value, dict) and model_key not in value and "default" not in value:
            continue  # the project does not set this model
        mine, theirs = _resolve(value, model_key, None), _resolve(base, model_key, fallback)
        where = "" if model_key == "default" else f" for {model_key}"
        if theirs is None:
            return f"a project config may only raise what your config sets (it sets nothing{where}); ignored"
        a, b = _order(mine), _order(theirs)
        if a is None or b is None:
            continue  # not orderable (validation reports it): the other models are still checked
        if policy == RAISE_ONLY and a < b:
            return f"a project config may only raise this ({mine!r} < your {theirs!r}{where}); ignored"
        if policy == LOWER_ONLY and a > b:
            return f"a project config may only lower this ({mine!r} > your {theirs!r}{where}); ignored"
    return None


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in data.items()}


def _delete(data: dict[str, Any], dotted: str) -> None:
    """Remove a dotted key and prune the tables it leaves empty."""
    head, _, rest = dotted.partition(".")
    if not rest:
        del data[head]  # present: the caller just read it
        return
    child = data.get(head)
    if isinstance(child, dict):
        _delete(child, rest)
        if not child:
            data.pop(head)


def enforce_direction(
    project: dict[str, Any], user_effective: dict[str, Any], file: str
) -> tuple[dict[str, Any], list[ConfigWarning]]:
    """Drop the project's raise-only values below, and lower-only values above, the user's effective ones."""
    clean = _copy(project)
    warnings: list[ConfigWarning] = []
    for dotted, policy in POLICY.items():
        if policy not in (RAISE_ONLY, LOWER_ONLY):
            continue
        value = get_path(clean, dotted)
        if value is None:
            continue
        problem = _violation(dotted, policy, value, get_path(user_effective, dotted))
        if problem is not None:
            warnings.append(ConfigWarning(file, dotted, problem))
            _delete(clean, dotted)
    return clean, warnings


__all__ = ["ALLOWED", "LOWER_ONLY", "POLICY", "RAISE_ONLY", "USER_ONLY", "duration_ms", "enforce_direction",
           "leaf_is_untrusted", "policy_of", "strip_untrusted"]
