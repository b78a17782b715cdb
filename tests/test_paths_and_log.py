"""Path computation parity with platformdirs, log rotation and redaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from magic_context import log, paths


@pytest.mark.parametrize("xdg", [None, "/tmp/xdg-home-test"])
def test_default_dirs_match_platformdirs(monkeypatch: pytest.MonkeyPatch, xdg: str | None) -> None:
    import platformdirs

    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        if xdg:
            monkeypatch.setenv(var, xdg + "/" + var.lower())
        else:
            monkeypatch.delenv(var, raising=False)
    assert str(paths.default_data_dir()) == platformdirs.user_data_dir("magic-context")
    assert str(paths.default_config_dir()) == platformdirs.user_config_dir("magic-context")


def test_env_overrides(isolated_dirs) -> None:
    assert paths.data_dir() == isolated_dirs["data"]
    assert paths.config_dir() == isolated_dirs["config"]
    assert paths.db_path() == isolated_dirs["data"] / "context.db"
    assert set(paths.all_paths()) == {"data_dir", "config_dir", "database", "user_config", "log_file"}


def test_project_root_is_git_root(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    assert paths.project_root(tmp_path / "repo" / "a" / "b") == (tmp_path / "repo").resolve()
    (tmp_path / "plain").mkdir()
    assert paths.project_root(tmp_path / "plain") == (tmp_path / "plain").resolve()


def test_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    text = (
        "key sk-ant-api03-abcdefghijklmnopqrstuvwx and Authorization: Bearer abc.def.ghijklmnop "
        "api_key=supersecretvalue tok-1234567890 pw hunter2hunter2 ghp_abcdefghijklmnopqrstuvwxyz0123"
    )
    redacted = log.redact(text)
    for secret in ("sk-ant-api03-abcdefghijklmnopqrstuvwx", "abc.def.ghijklmnop", "supersecretvalue",
                   "tok-1234567890", "hunter2hunter2", "ghp_abcdefghijklmnopqrstuvwxyz0123"):
        assert secret not in redacted
    assert "[REDACTED]" in redacted
    assert log.redact("nothing to hide here") == "nothing to hide here"


def test_log_writes_redacted_private_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-0123456789abcdefghij")
    log.warning("calling with sk-proj-0123456789abcdefghij")
    text = paths.log_path().read_text()
    assert "sk-proj" not in text and "[REDACTED]" in text
    assert oct(os.stat(paths.log_path()).st_mode & 0o777) == "0o600"


def test_log_rotates_keeping_one_predecessor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(log, "MAX_LOG_BYTES", 200)
    target = tmp_path / "logs" / "mc.log"
    for i in range(30):
        log.write("info", f"line {i} " + "x" * 20, path=target)
    assert target.stat().st_size <= 200
    assert (tmp_path / "logs" / "mc.log.1").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["mc.log", "mc.log.1"]
