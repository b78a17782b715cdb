"""What a memory may be: categories, statuses, sources, the de-dup key, TTLs, content limits (reference §1.2–§1.6).

Pure functions that validate user, agent and historian input and raise `BadInput` with a message
naming the field. Stdlib only (the historian publish uses them inside its transaction).
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum

from magic_context.errors import BadInput

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

#: What the historian, agents and `mc memory add` may write, in render order.
CATEGORIES: Final = ("PROJECT_RULES", "ARCHITECTURE", "CONSTRAINTS", "CONFIG_VALUES", "NAMING")
#: Older names: still read, rendered (A–Z after the five), imported and promoted.
LEGACY_CATEGORIES: Final = ("ARCHITECTURE_DECISIONS", "CONFIG_DEFAULTS", "USER_PREFERENCES", "USER_DIRECTIVES",
                            "ENVIRONMENT", "WORKFLOW_RULES", "KNOWN_ISSUES")


class MemoryStatus(StrEnum):
    """`memories.status` (expired and superseded are derived: `expires_at`, `superseded_by`)."""

    ACTIVE = "active"
    PERMANENT = "permanent"
    ARCHIVED = "archived"


class SourceType(StrEnum):
    """`memories.source_type`: who wrote a memory."""

    HISTORIAN = "historian"
    AGENT = "agent"
    DREAMER = "dreamer"
    USER = "user"


ACTIVE, PERMANENT, ARCHIVED = MemoryStatus.ACTIVE, MemoryStatus.PERMANENT, MemoryStatus.ARCHIVED
STATUSES: Final = tuple(MemoryStatus)
HISTORIAN, AGENT, DREAMER, USER = SourceType.HISTORIAN, SourceType.AGENT, SourceType.DREAMER, SourceType.USER
SOURCE_TYPES: Final = tuple(SourceType)
DEFAULT_IMPORTANCE: Final = 50
#: The render cap (`history.render.MEMORY_CONTENT_CAP_BYTES`): a longer memory could never be shown whole.
MAX_CONTENT_BYTES: Final = 64 * 1024
DAY_MS: Final = 86_400_000
#: Days a historian-made memory lives unless the historian sees it again (which renews it) or a person
#: vouches for it (edit, restore, permanent: the TTL is cleared). Categories not listed never expire.
#: KNOWN_ISSUES and WORKFLOW_RULES follow the original; CONFIG_VALUES is mc's: values drift.
HISTORIAN_TTL_DAYS: Final = {"KNOWN_ISSUES": 30, "WORKFLOW_RULES": 90, "CONFIG_VALUES": 180}
_TRAILING = re.compile(r"[\s.!;:,]+$")


def normalize(text: str) -> str:
    """The de-dup form: lower case, whitespace runs as one space, no leading bullet or trailing punctuation."""
    text = " ".join(text.split()).lower().lstrip("*-• ").strip()
    return _TRAILING.sub("", text)


def content_hash(text: str) -> str:
    """`memories.normalized_hash`: sha256 of `normalize(text)`, hex, first 32 digits."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()[:32]


def category(name: object, *, legacy: bool = False, field: str = "category") -> str:
    """The canonical (upper-case) category; legacy names only when `legacy` (import, promotion)."""
    text = str(name or "").strip().upper().replace("-", "_")
    allowed = CATEGORIES + LEGACY_CATEGORIES if legacy else CATEGORIES
    if text not in allowed:
        raise BadInput(f"{field}: unknown memory category {str(name)!r}", fix="use one of " + ", ".join(CATEGORIES))
    return text


def content(text: object, *, field: str = "content") -> str:
    """Stripped, non-empty content within `MAX_CONTENT_BYTES` (inner whitespace is kept)."""
    if not isinstance(text, str):
        raise BadInput(f"{field}: must be a string, got {type(text).__name__}")
    cleaned = text.strip()
    if not cleaned:
        raise BadInput(f"{field}: memory content is empty", fix="give the fact to remember as text")
    if len(cleaned.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise BadInput(f"{field}: memory content is {len(cleaned.encode('utf-8'))} bytes, over the "
                       f"{MAX_CONTENT_BYTES}-byte limit", fix="split it into smaller standalone facts")
    return cleaned


def importance(value: object, *, field: str = "importance") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise BadInput(f"{field}: importance must be an integer from 1 to 100, got {value!r}")
    return value


def status(value: object, *, field: str = "status") -> str:
    if value not in STATUSES:
        raise BadInput(f"{field}: unknown status {value!r}", fix="use one of " + ", ".join(STATUSES))
    return str(value)


def source_type(value: object, *, field: str = "source_type") -> str:
    if value not in SOURCE_TYPES:
        raise BadInput(f"{field}: unknown source type {value!r}", fix="use one of " + ", ".join(SOURCE_TYPES))
    return str(value)


def historian_expiry(category_name: str, now_ms: int) -> int | None:
    """When a historian-made memory of this category expires (None: never)."""
    days = HISTORIAN_TTL_DAYS.get(category_name)
    return now_ms + days * DAY_MS if days else None


__all__ = [
    "ACTIVE",
    "AGENT",
    "ARCHIVED",
    "CATEGORIES",
    "DEFAULT_IMPORTANCE",
    "DREAMER",
    "HISTORIAN",
    "HISTORIAN_TTL_DAYS",
    "LEGACY_CATEGORIES",
    "MAX_CONTENT_BYTES",
    "PERMANENT",
    "SOURCE_TYPES",
    "STATUSES",
    "USER",
    "MemoryStatus",
    "SourceType",
    "category",
    "content",
    "content_hash",
    "historian_expiry",
    "importance",
    "normalize",
    "source_type",
    "status",
]
