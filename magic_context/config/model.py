"""The config model (pydantic): the original's keys and defaults (reference/original-system.md §6).

Imported only by cold commands (doctor, status, wizard, historian); the transform hot path
reads the few keys it needs through `config.hot`, which applies the same defaults and ranges
(a test asserts the two agree).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DURATION_RE = re.compile(r"^(?:never|\d+(?:\.\d+)?(?:ms|s|m|h|d))$")

Percent = Annotated[float, Field(ge=20, le=90)]
ProviderName = Literal["extractive", "anthropic", "openai", "command"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True)


def _check_duration(value: str) -> str:
    if not DURATION_RE.match(value.strip()):
        raise ValueError(f"{value!r} is not a duration like '30s', '5m', '1h' or 'never'")
    return value.strip()


class CommitClusterTrigger(_Section):
    enabled: bool = True
    min_clusters: int = Field(3, ge=1, le=50)


class CavemanCompression(_Section):
    enabled: bool = False
    min_chars: int = Field(500, ge=50)


class Compaction(_Section):
    enabled: bool = True


class SystemPromptInjection(_Section):
    enabled: bool = True
    skip_signatures: list[str] = Field(default_factory=lambda: ["<!-- magic-context: skip -->"])


class AutoSearch(_Section):
    enabled: bool = True
    score_threshold: float = Field(0.6, ge=0, le=1)
    min_prompt_chars: int = Field(20, ge=0)


class GitCommitIndexing(_Section):
    enabled: bool = False
    since_days: int = Field(365, ge=1)
    max_commits: int = Field(2000, ge=1)


class Memory(_Section):
    enabled: bool = True
    injection_budget_tokens: int = Field(4000, ge=500, le=20000)
    auto_promote: bool = True
    retrieval_count_promotion_threshold: int = Field(3, ge=1)
    auto_search: AutoSearch = Field(default_factory=AutoSearch)
    git_commit_indexing: GitCommitIndexing = Field(default_factory=GitCommitIndexing)


class Embedding(_Section):
    provider: Literal["local", "openai-compatible", "off"] = "local"
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    max_input_tokens: int = Field(512, ge=16)
    # The least cosine a search hit found by its vector alone (match = semantic) needs, in every lane. Unset: the
    # provider's default (the local model's calibrated floors, `search.lanes.LOCAL_SEMANTIC_ONLY_FLOOR`; 0.2 for
    # openai-compatible, whose model's cosine scale mc cannot know).
    min_similarity: float | None = Field(None, ge=-1, le=1, allow_inf_nan=False)


class HttpProvider(_Section):
    base_url: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    max_tokens: int = Field(8000, ge=256)


class CommandProvider(_Section):
    argv: list[str] = Field(default_factory=list)
    timeout_ms: int | None = Field(None, ge=1000)


class Historian(_Section):
    provider: ProviderName = "extractive"
    fallback: list[ProviderName] = Field(default_factory=lambda: list[ProviderName](["extractive"]))
    timeout_ms: int = Field(300_000, ge=1000)
    max_retries: int = Field(2, ge=0, le=10)
    temperature: float = Field(0.2, ge=0, le=2)
    two_pass: bool = False
    prompt: str | None = None
    anthropic: HttpProvider = Field(default_factory=lambda: HttpProvider(
        base_url="https://api.anthropic.com", api_key_env="ANTHROPIC_API_KEY"))
    openai: HttpProvider = Field(default_factory=lambda: HttpProvider(
        base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY"))
    command: CommandProvider = Field(default_factory=CommandProvider)


class DreamerTask(_Section):
    schedule: str = ""
    timeout_minutes: int = Field(20, ge=1)


class UserMemories(_Section):
    enabled: bool = True
    promotion_threshold: int = Field(3, ge=1)


class Dreamer(_Section):
    enabled: bool = False
    inject_docs: bool = True
    max_runtime_minutes: int = Field(120, ge=1)
    tasks: dict[str, DreamerTask] = Field(default_factory=dict)
    user_memories: UserMemories = Field(default_factory=UserMemories)


class Sqlite(_Section):
    cache_size_mb: int = Field(64, ge=1, le=4096)
    mmap_size_mb: int = Field(0, ge=0, le=65536)


class Proxy(_Section):
    """`mc proxy` (user tier only: the project tier may not redirect where requests go)."""

    host: str = "127.0.0.1"
    port: int = Field(8790, ge=0, le=65535)
    upstream_anthropic: str = "https://api.anthropic.com"
    upstream_openai: str = "https://api.openai.com"
    max_body_mb: int = Field(32, ge=1, le=1024)
    connect_timeout_s: float = Field(10.0, gt=0, le=600)
    read_timeout_s: float = Field(600.0, gt=0, le=3600)
    shutdown_grace_s: float = Field(120.0, ge=0, le=3600)

    @field_validator("upstream_anthropic", "upstream_openai")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/")


class MCConfig(_Section):
    """The whole configuration with every default filled in."""

    enabled: bool = True
    ctx_reduce_enabled: bool = True
    cache_ttl: str | dict[str, str] = "5m"
    # 40; when unset, raised in small windows by a token floor per workload (transform.scheduler.default_threshold).
    execute_threshold_percentage: Percent | dict[str, Percent] = 40
    execute_threshold_tokens: dict[str, Annotated[int, Field(ge=5000)]] | None = None
    protected_tags: int = Field(20, ge=1, le=100)
    nudge_interval_tokens: int = Field(10_000, ge=1000)
    auto_drop_tool_age: int = Field(100, ge=1)
    clear_reasoning_age: int = Field(50, ge=1)
    drop_tool_structure: bool = True
    history_budget_percentage: float = Field(0.10, ge=0.05, le=0.5)  # of the window, for <session-history>
    temporal_awareness: bool = True
    smart_drops: bool = False
    commit_cluster_trigger: CommitClusterTrigger = Field(default_factory=CommitClusterTrigger)
    caveman_text_compression: CavemanCompression = Field(default_factory=CavemanCompression)
    compaction: Compaction = Field(default_factory=Compaction)
    fail_closed_blocking: bool = True
    system_prompt_injection: SystemPromptInjection = Field(default_factory=SystemPromptInjection)
    memory: Memory = Field(default_factory=Memory)
    embedding: Embedding = Field(default_factory=Embedding)
    historian: Historian = Field(default_factory=Historian)
    dreamer: Dreamer = Field(default_factory=Dreamer)
    output_reserve: int | None = Field(None, ge=0)
    sqlite: Sqlite = Field(default_factory=Sqlite)
    proxy: Proxy = Field(default_factory=Proxy)

    @field_validator("cache_ttl")
    @classmethod
    def _ttl(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _check_duration(v) for k, v in value.items()}
        return _check_duration(value)


__all__ = ["MCConfig"]
