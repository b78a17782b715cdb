"""`config.toml_cache`: a config file's parsed document is reused by its bytes, so a transform process need not
import `tomllib` (and `typing` with it) on every pass; an edited file is parsed again, what JSON cannot hold
exactly is never cached, a corrupt cache is ignored, and a refused input writes no cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from magic_context.config import files, hot, toml_cache


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing read from disk (the cache is process-wide, like the records cache)."""
    monkeypatch.setattr(toml_cache, "_cache", toml_cache._Cache())


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _stored() -> dict:
    return json.loads(Path(toml_cache.cache_file()).read_text())


def test_a_parsed_file_is_served_from_the_cache_by_its_bytes_and_an_edit_is_parsed_again(isolated_dirs,
                                                                                         monkeypatch) -> None:
    user = _write(isolated_dirs["config"] / "config.toml", "cache_ttl = \"10m\"\n[compaction]\nenabled = false\n")
    assert hot.load_hot()["compaction.enabled"] is False
    toml_cache.save()
    assert list(_stored().values()) == ['{"cache_ttl":"10m","compaction":{"enabled":false}}']

    monkeypatch.setattr(toml_cache, "_cache", toml_cache._Cache())  # a new process: read from disk
    import tomllib

    def refuse(_text: str) -> dict:
        raise AssertionError("a cached file was parsed again")

    real = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", refuse)
    first = files.read_toml(user)
    assert first == ({"cache_ttl": "10m", "compaction": {"enabled": False}}, [])
    first[0]["compaction"]["enabled"] = True  # callers may edit what they get: the next read is a fresh object
    assert files.read_toml(user)[0]["compaction"] == {"enabled": False}
    monkeypatch.setattr(tomllib, "loads", real)

    _write(user, "[compaction]\nenabled = true\n")  # other bytes: parsed, and kept beside the old entry
    assert hot.load_hot()["compaction.enabled"] is True
    toml_cache.save()
    assert len(_stored()) == 2


def test_only_what_json_holds_exactly_is_cached(isolated_dirs) -> None:
    """TOML dates and times, non-finite floats and integers beyond 64 bits are parsed every time, so their
    types survive (orjson writes a date as text and nan as null, and refuses a big integer)."""
    import datetime

    texts = {"a date": ("when = 2026-12-02\n", {"when": datetime.date(2026, 12, 2)}),
             "nan": ("x = nan\n", None), "big": ("n = 36893488147419103232\n", {"n": 2 ** 65})}
    for name, (text, expected) in texts.items():
        path = _write(isolated_dirs["config"] / f"{name}.toml", text)
        parsed, problems = files.read_toml(path)
        assert not problems
        if expected is None:
            assert parsed["x"] != parsed["x"]  # nan
        else:
            assert parsed == expected
    assert toml_cache._cache.unsaved is False
    toml_cache.save()
    assert not Path(toml_cache.cache_file()).exists()


def test_a_corrupt_cache_is_ignored_and_replaced_and_the_cache_keeps_the_newest_entries(isolated_dirs) -> None:
    cache = _write(Path(toml_cache.cache_file()), "{not json")
    for n in range(toml_cache.MAX_ENTRIES + 2):
        assert files.read_toml(_write(isolated_dirs["config"] / "config.toml", f"protected_tags = {n + 1}\n")) == \
            ({"protected_tags": n + 1}, [])
    toml_cache.save()
    stored = json.loads(cache.read_text())
    assert [json.loads(v)["protected_tags"] for v in stored.values()] == \
        list(range(3, toml_cache.MAX_ENTRIES + 3))  # the newest MAX_ENTRIES, oldest first
    cache.write_text('{"k": 1, "j": "[1]"}')  # wrong shapes: ignored
    toml_cache._cache = toml_cache._Cache()
    assert toml_cache.lookup(b"protected_tags = 1\n") is None


def test_a_transform_process_parses_a_config_file_once_and_a_refused_input_writes_no_cache(mc, isolated_dirs) -> None:
    _write(isolated_dirs["config"] / "config.toml", "[compaction]\nenabled = false\n")
    bad = mc("transform", stdin=b"{not json")
    assert bad.returncode == 2 and not isolated_dirs["data"].exists()  # exit 2 writes nothing, the cache neither

    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}], "session_id": "s", "project_dir": "/tmp"})
    for run in ("first", "second"):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c",
                               "import sys; from commands.main import main; sys.exit(main())", "transform"],
                              input=payload.encode(), capture_output=True, check=False)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        assert "§" not in proc.stdout.decode()  # compaction off: no tags, either way
        imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
        assert ("tomllib" in imported) is (run == "first"), run
        if run == "second":
            assert not {"typing", "string", "contextlib"} & imported
