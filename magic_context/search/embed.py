"""Embedding providers (§4, §11): `off`, `local` (wordllama, bundled in its wheel) and `openai-compatible`.

Vectors are L2-normalized float32, stored as raw little-endian blobs keyed by a model id that names the
provider, model and endpoint (never the key). Any provider failure raises `EmbeddingUnavailable`; callers
fall back to FTS and record the failure (`record_failure`) for `mc status` / `mc doctor`.

`local` loads wordllama's bundled `l2_supercat_256` weights with `disable_download=True` and the
package directory as its cache, so nothing is fetched (the default `load()` looks for the tokenizer in
the wrong folder and would try the hub). The model is loaded once per process.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from typing import Any, Final

from magic_context.errors import MCError

FAILURE_KEY: Final = "embedding_failure"
LOCAL_MODEL: Final = "wordllama-l2_supercat-256"
OPENAI_TIMEOUT_S: Final = 10.0
BATCH: Final = 64
MAX_CHARS: Final = 4000  # per text sent to a provider (about 1000 tokens)
MESSAGE_DIMS: Final = 128  # message vectors of the local model (bench: 128 dims recall as well as 256)

_local_model: Any = None


class EmbeddingUnavailable(MCError):
    """The configured embedding provider cannot embed right now (not installed, down, bad answer)."""


class EmbeddingNotInstalled(EmbeddingUnavailable):
    """`local` without the optional `magic-context[embeddings]` extra: search is FTS-only, quietly."""


class Embedder:
    """One configured provider; `embed` returns an (n, dims) float32 array of unit vectors."""

    def __init__(self, provider: str, model: str, model_id: str, *, endpoint: str | None = None,
                 api_key: str | None = None) -> None:
        self.provider, self.model, self.model_id = provider, model, model_id
        self.endpoint, self.api_key = endpoint, api_key

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        clipped = [(t or " ")[:MAX_CHARS] for t in texts]
        if self.provider == "local":
            out = _local_embed(clipped)
        else:
            out = np.vstack([self._remote(clipped[i:i + BATCH]) for i in range(0, len(clipped), BATCH)])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (out / norms).astype(np.float32)

    def embed_messages(self, texts: Sequence[str]) -> Any:
        """Vectors for message search: the local model's first `MESSAGE_DIMS` (Matryoshka) dims, renormalized —
        half the bytes to load per query at the same recall on the bench; other models as `embed`."""
        return self.message_view(self.embed(texts))

    def message_view(self, vectors: Any) -> Any:
        import numpy as np

        if self.provider != "local" or vectors.ndim != 2 or vectors.shape[1] <= MESSAGE_DIMS:
            return vectors
        cut = vectors[:, :MESSAGE_DIMS]
        norms = np.linalg.norm(cut, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (cut / norms).astype(np.float32)

    def _remote(self, texts: list[str]) -> Any:
        import httpx
        import numpy as np

        url = (self.endpoint or "").rstrip("/") + "/embeddings"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            reply = httpx.post(url, json={"model": self.model, "input": texts}, headers=headers,
                               timeout=OPENAI_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {url} unreachable: {type(exc).__name__}",
                                       fix="start the endpoint or set embedding.provider = 'off'") from exc
        if reply.status_code != 200:
            raise EmbeddingUnavailable(f"embedding endpoint {url} answered HTTP {reply.status_code}",
                                       fix="check embedding.model and the endpoint's logs")
        try:
            data = sorted(reply.json()["data"], key=lambda d: d.get("index", 0))
            vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {url} sent no usable vectors",
                                       fix="it must speak the OpenAI /v1/embeddings format") from exc
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EmbeddingUnavailable(f"embedding endpoint {url} sent {len(vectors)} vectors for {len(texts)} texts")
        return vectors


def _local_embed(texts: list[str]) -> Any:
    global _local_model  # noqa: PLW0603 - one loaded model per process (load costs ~0.5 s)
    if _local_model is None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as exc:
            raise EmbeddingNotInstalled("the local embedding model is not installed",
                                       fix="pip install 'magic-context[embeddings]' or set embedding.provider = "
                                           "'off'") from exc
        try:
            _local_model = WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True)
        except Exception as exc:  # wordllama raises plain exceptions for missing files
            raise EmbeddingUnavailable(f"the local embedding model failed to load: {exc}",
                                       fix="reinstall 'magic-context[embeddings]'") from exc
    return _local_model.embed(texts)


def model_id(provider: str, model: str, endpoint: str | None = None, api_key_present: bool = False) -> str:
    """`embedding-provider:` + md5 of the lower-cased identity JSON (§4.2); `embedding-provider:off` when off."""
    if provider == "off":
        return "embedding-provider:off"
    identity = {"provider": provider, "model": model, "endpoint": (endpoint or "").rstrip("/"),
                "apiKeyPresent": api_key_present}
    text = " ".join(json.dumps(identity, separators=(",", ":")).lower().split())
    return "embedding-provider:" + hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def from_config(config: Any) -> Embedder | None:
    """The configured embedder, or None when `embedding.provider` is `off`."""
    section = config.embedding
    if section.provider == "off":
        return None
    if section.provider == "local":
        return Embedder("local", LOCAL_MODEL, model_id("local", LOCAL_MODEL))
    key = os.environ.get(section.api_key_env) if section.api_key_env else None
    model = section.model or "text-embedding-3-small"
    if not section.endpoint:
        raise EmbeddingUnavailable("embedding.provider is 'openai-compatible' but embedding.endpoint is not set",
                                   fix="set embedding.endpoint, e.g. http://127.0.0.1:11434/v1")
    return Embedder("openai-compatible", model, model_id("openai-compatible", model, section.endpoint, bool(key)),
                    endpoint=section.endpoint, api_key=key)


def pack(vector: Any) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def unpack_many(blobs: Sequence[bytes], dims: int) -> Any:
    import numpy as np

    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)


def cosine(query: Any, matrix: Any) -> Any:
    """Cosine of a unit query against unit rows (0 where dimensions differ)."""
    import numpy as np

    if matrix.shape[0] == 0 or matrix.shape[1] != query.shape[0]:
        return np.zeros(matrix.shape[0], dtype=np.float32)
    return matrix @ query


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def record_failure(conn: sqlite3.Connection, exc: Exception, where: str, *, now_ms: int | None = None) -> None:
    """Remember the latest embedding failure (shown by `mc status` and `mc doctor`), stamped with the caller's
    clock (a replay's database is then the same on every run) or, when none is passed, the wall clock; never
    raises."""
    from magic_context.store import search_index

    now = now_ms if now_ms is not None else int(time.time() * 1000)
    message = exc.one_line() if isinstance(exc, MCError) else f"{type(exc).__name__}: {exc}"
    value = json.dumps({"at": now, "where": where, "message": message})
    try:
        search_index.set_state(conn, FAILURE_KEY, value, now)
    except (sqlite3.Error, MCError):
        pass


def clear_failure(conn: sqlite3.Connection) -> None:
    from magic_context.store import search_index

    try:
        if search_index.get_state(conn, FAILURE_KEY) is not None:
            search_index.set_state(conn, FAILURE_KEY, None, 0)
    except (sqlite3.Error, MCError):
        pass


def last_failure(conn: sqlite3.Connection) -> dict[str, Any] | None:
    from magic_context.store import search_index

    try:
        value = search_index.get_state(conn, FAILURE_KEY)
    except (sqlite3.Error, MCError):
        return None
    return json.loads(value) if value else None


__all__ = ["Embedder", "EmbeddingNotInstalled", "EmbeddingUnavailable", "clear_failure", "cosine", "from_config",
           "last_failure", "model_id", "pack", "record_failure", "text_hash", "unpack_many"]
