"""`mc replay` runs mc with the config it is asked about: --config FILE, the user's config.toml, or none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SESSIONS, run_mc

from magic_context.errors import BadInput
from magic_context.replay import replay
from magic_context.replay.runner import resolve_config

SUBAGENT = SESSIONS / "claude-code" / "bookminder-subagent-a12564cd.jsonl"


def _mc(data: dict) -> dict:
    return next(s for s in data["strategies"] if s["name"] == "mc")


def test_user_config_is_honoured_and_no_user_config_ignores_it(isolated_dirs: dict[str, Path]) -> None:
    isolated_dirs["config"].mkdir(parents=True)
    user = isolated_dirs["config"] / "config.toml"
    user.write_text("execute_threshold_percentage = 55\n", encoding="utf-8")

    mine = replay(SUBAGENT, context_limit=20_000, strategies=["mc"]).to_dict()
    assert mine["config"] == {"source": "user", "file": str(user), "warnings": []}
    assert _mc(mine)["threshold_percent"] == 55

    clean = replay(SUBAGENT, context_limit=20_000, strategies=["mc"], user_config=False).to_dict()
    assert clean["config"] == {"source": "defaults", "file": None, "warnings": []}
    assert _mc(clean)["threshold_percent"] == 50  # the built-in default: 40% raised to 10 000 tokens of 20 000
    assert user.read_text(encoding="utf-8") == "execute_threshold_percentage = 55\n"  # never written


def test_config_flag_wins_over_the_user_config(isolated_dirs: dict[str, Path], tmp_path: Path) -> None:
    isolated_dirs["config"].mkdir(parents=True)
    (isolated_dirs["config"] / "config.toml").write_text("execute_threshold_percentage = 55\n", encoding="utf-8")
    candidate = tmp_path / "candidate.toml"
    candidate.write_text("execute_threshold_percentage = 60\n", encoding="utf-8")
    proc = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc,native",
                  "--config", str(candidate), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    data = json.loads(proc.stdout)["data"]
    assert data["config"] == {"source": "flag", "file": str(candidate), "warnings": []}
    assert _mc(data)["threshold_percent"] == 60


def test_config_flag_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        resolve_config(tmp_path / "missing.toml", True)
    broken = tmp_path / "broken.toml"
    broken.write_text("execute_threshold_percentage = = 40\n", encoding="utf-8")
    proc = run_mc("replay", str(SUBAGENT), "--config", str(broken))
    assert proc.returncode != 0
    assert "broken.toml" in proc.stderr.decode() and "not valid TOML" in proc.stderr.decode()


def test_no_user_config_when_none_exists(isolated_dirs: dict[str, Path]) -> None:
    assert resolve_config(None, True) == (None, "defaults")


@pytest.mark.parametrize(("text", "needle"), [
    ("[compaction]\nexecute_threshold_percentage = 30\n", "compaction.execute_threshold_percentage: unknown key —"),
    ("execute_threshold_percentage = 300\n", "execute_threshold_percentage: "),
])
def test_config_flag_refuses_a_key_mc_would_ignore(tmp_path: Path, text: str, needle: str) -> None:
    """A candidate file whose key mc ignores (misplaced, misspelt, out of range) would replay the defaults under
    the file's name: the comparison the user asked for would silently not happen."""
    candidate = tmp_path / "candidate.toml"
    candidate.write_text(text, encoding="utf-8")
    proc = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--config", str(candidate))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and needle in err and "candidate.toml" in err and "Traceback" not in err, err


def test_problems_in_the_user_config_are_told_once_under_its_own_name(isolated_dirs: dict[str, Path]) -> None:
    """Regression (#13 acceptance): the replay ran on a temporary copy of config.toml, so an unknown key and an
    out-of-range value were told under the copy's vanished name (in-process) and missing from `--json`, while
    the report said "mc config: … (yours)". Now: stderr once each under the user's file, the text report says
    how many were ignored, and `--json` lists them in `config.warnings`."""
    isolated_dirs["config"].mkdir(parents=True)
    user = isolated_dirs["config"] / "config.toml"
    user.write_text("bogus_key = 1\nexecute_threshold_percentage = 150\n", encoding="utf-8")
    expected = [f"{user}: execute_threshold_percentage: Input should be less than or equal to 90; using the default",
                f"{user}: bogus_key: unknown key; ignored"]
    for extra in ((), ("--subprocess",)):
        proc = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc", "--json", *extra)
        assert proc.returncode == 0, proc.stderr.decode()
        data = json.loads(proc.stdout)["data"]
        assert data["config"] == {"source": "user", "file": str(user), "warnings": expected}
        assert _mc(data)["threshold_percent"] == 50  # the default ran, as the warning says
        told = [line for line in proc.stderr.decode().splitlines() if line.startswith("mc: warning:")]
        assert told == [f"mc: warning: {w}" for w in expected], told
    text = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc,native",
                  env={"COLUMNS": "300"})
    assert text.returncode == 0, text.stderr.decode()
    assert f"mc config: {user} (yours; 2 settings ignored, run with the default)" in text.stdout.decode()
    assert "mc-replay-" not in text.stderr.decode() and text.stderr.decode().count("bogus_key") == 1


@pytest.mark.parametrize("flag", ["--no-user-config", "--config"])
def test_replay_without_the_user_config_tells_none_of_its_problems(isolated_dirs: dict[str, Path], tmp_path: Path,
                                                                    flag: str) -> None:
    """Regression: `--no-user-config` / `--config FILE` replayed without config.toml, yet the CLI's boundary
    still checked that file after the command and printed its problems, as if they had changed the replay."""
    isolated_dirs["config"].mkdir(parents=True)
    (isolated_dirs["config"] / "config.toml").write_text("bogus_key = 1\n", encoding="utf-8")
    candidate = tmp_path / "candidate.toml"
    candidate.write_text("execute_threshold_percentage = 60\n", encoding="utf-8")
    args = [flag, str(candidate)] if flag == "--config" else [flag]
    proc = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc", "--json", *args)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["data"]["config"]["warnings"] == []
    assert "bogus_key" not in proc.stderr.decode(), proc.stderr.decode()
    mine = run_mc("replay", str(SUBAGENT), "--context-limit", "20000", "--strategies", "mc", "--json")
    assert "mc: warning:" in mine.stderr.decode() and "bogus_key" in mine.stderr.decode()  # with yours: told
