"""`embedding.min_similarity`: the user's minimum cosine for search hits found by their vector alone (match =
semantic), in every lane — on real SQLite, through the real openai-compatible client against the loopback fake
(`/v1/embeddings`: words hashed into 64 counts, so the cosines below are known exactly), and through the real CLI
(`mc search --json` shows each vector hit's cosine; `mc status` / `mc doctor` the floor that applies). Bad values
fall back to the default with a warning naming the file and the key, as every config key does."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from fake_llm_server import bag_of_words
from historian_helpers import NOW, PiBuilder, store_pi
from search_helpers import add_memory, fold

from magic_context.config.load import load_config
from magic_context.config.model import MCConfig
from magic_context.errors import BadInput
from magic_context.search import engine, indexer, lanes

# Every word has its own bucket of the fake's 64 (asserted below), so a query of pseudo-words sharing a bucket with
# some of these words — and no word with any text, so FTS finds nothing — has a cosine we can compute.
FOLDED = ["alpha bravo charlie", "delta echo foxtrot", "golf juliet kilo", "lima mike oscar"]  # ordinals 0-3
TAIL = "tango uniform"  # ordinal 4: the live tail, never searched
COMPARTMENT = ("quebec romeo", "sierra")  # title, content: embedded as "quebec romeo\nsierra"
MEMORY = "hotel india victor"


def bucket(word: str) -> int:
    return int(np.argmax(bag_of_words(word)))


def _pseudo_words() -> list[str]:
    return [f"x{a}{b}{c}o" for a in "bcdfgkmnpstvz" for b in "aeiou" for c in "bcdfgkmnpstvz"]


def collider(word: str) -> str:
    """A pseudo-word in `word`'s bucket (FTS never matches it: no text holds it)."""
    return next(w for w in _pseudo_words() if bucket(w) == bucket(word))


def fillers(n: int, used: set[int]) -> list[str]:
    """`n` pseudo-words in buckets no text uses (they only lengthen the query vector, lowering every cosine)."""
    out: list[str] = []
    for w in _pseudo_words():
        if bucket(w) not in used and bucket(w) not in {bucket(x) for x in out}:
            out.append(w)
        if len(out) == n:
            return out
    raise AssertionError("not enough free buckets")


ALL_WORDS = [w for t in [*FOLDED, TAIL, *COMPARTMENT, MEMORY] for w in t.split()]
USED = {bucket(w) for w in ALL_WORDS}
# cosines 0.471 (message 1, the memory) and 0.236 (message 0, the compartment)
NEAR = " ".join(collider(w) for w in ("delta", "echo", "alpha", "quebec", "hotel", "india"))
# cosines 0.167 (message 0, the compartment, the memory): below the default 0.2
FAR = " ".join([*(collider(w) for w in ("alpha", "quebec", "hotel")), *fillers(9, USED)])


def cos(a: str, b: str) -> float:
    x, y = np.asarray(bag_of_words(a)), np.asarray(bag_of_words(b))
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def expected(query: str) -> dict[tuple[str, int | str], float]:
    """(source, ordinal | 'c' | 'm') → the query's cosine with each searchable item that has one."""
    items = {("message", i): cos(query, t) for i, t in enumerate(FOLDED)}
    items[("compartment", "c")] = cos(query, "\n".join(COMPARTMENT))
    items[("memory", "m")] = cos(query, MEMORY)
    return {k: v for k, v in items.items() if v > 0}


def remote(url: str, min_similarity: float | None = None) -> MCConfig:
    section: dict[str, object] = {"provider": "openai-compatible", "endpoint": url, "model": "toy"}
    if min_similarity is not None:
        section["min_similarity"] = min_similarity
    return MCConfig.model_validate({"embedding": section})


def indexed_session(conn: sqlite3.Connection, url: str) -> int:
    b = PiBuilder()
    for i, text in enumerate([*FOLDED, TAIL]):
        (b.user if i % 2 == 0 else b.say)(text)
    pk = store_pi(conn, b.messages, session_id="floor", project_id="dir:floor")
    fold(conn, pk, 0, 3, COMPARTMENT[0], content=COMPARTMENT[1])
    add_memory(conn, MEMORY, project_id="dir:floor")
    report = indexer.after_publish(conn, pk, remote(url), embed_now=True)
    assert report["indexed"] == 4 and report["embedded"] >= 3, report  # the folded messages
    return pk


def found(conn: sqlite3.Connection, pk: int, query: str, config: MCConfig) -> dict[tuple[str, int | str], float]:
    """(source, ordinal | 'c' | 'm') → the cosine each hit reports; every hit must be semantic-only."""
    result = engine.search(conn, query, session_pks=[pk], project_id="dir:floor", config=config, now_ms=NOW,
                           count_retrievals=False, hide_visible=False, limit=50)
    assert result.warnings == []
    out: dict[tuple[str, int | str], float] = {}
    for hit in result.hits:
        assert hit.match == "semantic", hit
        key = hit.ordinal if hit.source == "message" else hit.source[0]
        out[(hit.source, key)] = hit.extra["cosine"]
    return out


def test_the_queries_are_what_the_test_assumes() -> None:
    assert len(USED) == len(ALL_WORDS), "the texts' words must sit in distinct buckets"
    assert not set(NEAR.split() + FAR.split()) & set(ALL_WORDS)
    near, far = expected(NEAR), expected(FAR)
    assert {k: round(v, 3) for k, v in near.items()} == {("message", 0): 0.236, ("message", 1): 0.471,
                                                        ("compartment", "c"): 0.236, ("memory", "m"): 0.471}
    assert {k: round(v, 3) for k, v in far.items()} == {("message", 0): 0.167, ("compartment", "c"): 0.167,
                                                       ("memory", "m"): 0.167}


def test_fts_alone_finds_nothing_for_either_query(conn, server) -> None:
    pk = indexed_session(conn, server.openai_base_url)
    off = MCConfig.model_validate({"embedding": {"provider": "off"}})
    for query in (NEAR, FAR):
        assert engine.search(conn, query, session_pks=[pk], project_id="dir:floor", config=off, now_ms=NOW,
                             hide_visible=False).hits == []


@pytest.mark.parametrize("floor", [None, -1.0, 0.1, 0.3, 0.5, 0.9])
def test_every_lane_keeps_exactly_the_semantic_only_hits_at_or_above_the_floor(conn, server, floor) -> None:
    """None is the openai-compatible default (0.2, as before the setting); the others are `min_similarity`."""
    pk = indexed_session(conn, server.openai_base_url)
    config = remote(server.openai_base_url, floor)
    least = lanes.MIN_MESSAGE_COSINE if floor is None else floor
    for query in (NEAR, FAR):
        hits = found(conn, pk, query, config)
        want = {k for k, c in expected(query).items() if c >= least}
        assert set(hits) == want, (query, floor, hits)
        for key, reported in hits.items():  # the cosine --json shows is the one the floor was compared with
            assert reported == pytest.approx(expected(query)[key], abs=0.01), key  # messages: int8 vectors


def test_above_and_below_in_each_lane(conn, server) -> None:
    """The same hits, named: each lane's hit comes back just under its cosine and is gone just over it."""
    pk = indexed_session(conn, server.openai_base_url)
    for key, cosine in expected(NEAR).items():
        assert key in found(conn, pk, NEAR, remote(server.openai_base_url, round(cosine - 0.02, 3))), key
        assert key not in found(conn, pk, NEAR, remote(server.openai_base_url, round(cosine + 0.02, 3))), key


def test_unset_keeps_todays_floors() -> None:
    local = lanes.effective_floors("local", None)
    assert local == {"message": 0.4, "compartment": 0.2, "memory": 0.3}  # calibrated (bench/search_floor.py)
    assert lanes.effective_floors("openai-compatible", None) == dict.fromkeys(("message", "compartment", "memory"),
                                                                              lanes.MIN_MESSAGE_COSINE)
    assert lanes.effective_floors("local", 0.55) == lanes.effective_floors("openai-compatible", 0.55) == \
        dict.fromkeys(("message", "compartment", "memory"), 0.55)
    assert lanes.effective_floors("off", 0.55) is None
    assert MCConfig().embedding.min_similarity is None


def test_lexical_hits_ignore_the_floor(conn, server) -> None:
    """The floor is for hits the vectors alone found: a word match comes back at any min_similarity."""
    pk = indexed_session(conn, server.openai_base_url)
    result = engine.search(conn, "delta echo", session_pks=[pk], project_id="dir:floor", now_ms=NOW,
                           config=remote(server.openai_base_url, 1.0), count_retrievals=False, hide_visible=False)
    assert [(h.source, h.ordinal, h.match) for h in result.hits if h.source == "message"] == [("message", 1, "hybrid")]


# --- config: the key's validation, tiers and the replay's --config check -------------------------------------------


def _user(isolated_dirs: dict[str, Path], text: str) -> Path:
    path = isolated_dirs["config"] / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("value", "reason"), [
    ('"high"', "valid number"), ("true", "valid number"), ("1.5", "less than or equal to 1"),
    ("-2", "greater than or equal to -1"), ("nan", "finite number"), ("inf", "finite number"),
    ("[0.5]", "valid number")])
def test_a_bad_value_falls_back_with_a_warning_naming_file_and_key(isolated_dirs, value: str, reason: str) -> None:
    path = _user(isolated_dirs, f'[embedding]\nprovider = "openai-compatible"\nmin_similarity = {value}\n')
    loaded = load_config(None)
    assert loaded.config.embedding.min_similarity is None  # the default: the provider's floor
    assert loaded.config.embedding.provider == "openai-compatible"  # the rest of the section still applies
    [warning] = loaded.warnings
    assert (warning.file, warning.key) == (str(path), "embedding.min_similarity")
    assert reason in warning.reason and warning.reason.endswith("using the default")
    assert str(warning).startswith(f"{path}: embedding.min_similarity: ")


@pytest.mark.parametrize(("value", "parsed"), [("-1", -1.0), ("0", 0.0), ("0.55", 0.55), ("1", 1.0), ("1.0", 1.0)])
def test_the_range_ends_and_integers_are_accepted(isolated_dirs, value: str, parsed: float) -> None:
    _user(isolated_dirs, f"[embedding]\nmin_similarity = {value}\n")
    loaded = load_config(None)
    assert loaded.warnings == [] and loaded.config.embedding.min_similarity == parsed
    assert math.copysign(1, loaded.config.embedding.min_similarity) == math.copysign(1, parsed)


def test_a_project_may_not_set_it(isolated_dirs, tmp_path: Path) -> None:
    _user(isolated_dirs, "[embedding]\nmin_similarity = 0.5\n")
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".magic-context.toml").write_text("[embedding]\nmin_similarity = 0.95\n")
    loaded = load_config(project)
    assert loaded.config.embedding.min_similarity == 0.5
    assert [(w.key, w.reason) for w in loaded.warnings] == [
        ("embedding.min_similarity", "not allowed in a project config (set it in your user config)")]


def test_replay_config_accepts_the_key_and_rejects_a_bad_value(tmp_path: Path) -> None:
    from magic_context.replay.runner import resolve_config

    good = tmp_path / "good.toml"
    good.write_text('[embedding]\nprovider = "off"\nmin_similarity = 0.6\n')
    assert resolve_config(good, True) == (good, "flag")
    bad = tmp_path / "bad.toml"
    bad.write_text("[embedding]\nmin_similarity = 2\n")
    with pytest.raises(BadInput) as caught:
        resolve_config(bad, True)
    assert f"--config {bad}: embedding.min_similarity: Input should be less than or equal to 1" in str(caught.value)


# --- the real CLI: search --json shows cosines, status and doctor the floor that applies ---------------------------


def test_cli_search_status_and_doctor_show_the_floor(mc, conn, server, isolated_dirs) -> None:
    indexed_session(conn, server.openai_base_url)
    config = f'[embedding]\nprovider = "openai-compatible"\nendpoint = "{server.openai_base_url}"\nmodel = "toy"\n'
    _user(isolated_dirs, config)

    def search() -> dict[tuple[str, int | str], float]:
        run = mc("search", NEAR, "--session", "floor", "--limit", "50", "--json")
        assert run.returncode == 0, run.stderr.decode()
        return {(h["source"], h.get("ordinal", h["source"][0])): h["cosine"]
                for h in json.loads(run.stdout)["data"]["results"]}

    def status() -> tuple[dict[str, object], str]:
        data = json.loads(mc("status", "--session", "floor", "--json").stdout)["data"]["search"]["embedding"]
        return data, mc("status", "--session", "floor").stdout.decode()

    before = search()
    assert set(before) == set(expected(NEAR)) and min(before.values()) < 0.3  # unset: 0.2
    data, text = status()
    assert data["min_similarity"] == dict.fromkeys(("message", "compartment", "memory"), 0.2)
    assert data["min_similarity_from"] == "default"
    assert "semantic-only hits need cosine >= 0.2 (default)" in text

    _user(isolated_dirs, config + "min_similarity = 0.3\n")
    after = search()
    assert set(after) == {k for k, c in before.items() if c >= 0.3} and after  # the 0.236 hits are gone
    data, text = status()
    assert data["min_similarity"] == dict.fromkeys(("message", "compartment", "memory"), 0.3)
    assert data["min_similarity_from"] == "embedding.min_similarity"
    assert "semantic-only hits need cosine >= 0.3 (embedding.min_similarity)" in text
    doctor = {c["name"]: c for c in json.loads(mc("doctor", "--json").stdout)["data"]["checks"]}
    assert doctor["embeddings"]["status"] == "ok"
    assert "semantic-only hits need cosine >= 0.3 (embedding.min_similarity)" in doctor["embeddings"]["detail"]

    path = _user(isolated_dirs, config + 'min_similarity = "strict"\n')
    assert set(search()) == set(before)  # a bad value: the default again, never an error
    doctor = {c["name"]: c for c in json.loads(mc("doctor", "--json").stdout)["data"]["checks"]}
    assert doctor["config"]["status"] == "warn"
    assert any(item.startswith(f"{path}: embedding.min_similarity: Input should be a valid number")
               for item in doctor["config"]["items"]), doctor["config"]


def test_status_shows_the_local_defaults(mc, conn, isolated_dirs) -> None:
    from search_helpers import session_with_history

    session_with_history(conn, session_id="ses-local")
    _user(isolated_dirs, '[embedding]\nprovider = "local"\n')
    data = json.loads(mc("status", "--session", "ses-local", "--json").stdout)["data"]["search"]["embedding"]
    assert data["min_similarity"] == {"message": 0.4, "compartment": 0.2, "memory": 0.3}
    assert data["min_similarity_from"] == "default"
    if data["installed"]:
        assert ("semantic-only hits need cosine >= 0.4 message, 0.2 compartment, 0.3 memory (default)"
                in mc("status", "--session", "ses-local").stdout.decode())
