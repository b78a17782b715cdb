"""Config problems are told once per invocation, naming file and key, through the real CLI (issue: cfgwarn).

A bad value falls back to its default; before, only `mc doctor` said so. Every other command now prints one
`mc: warning: FILE: KEY: PROBLEM` line per problem on stderr, leaves its exit code and stdout alone, and
`mc transform` (before every LLM call) keeps them in its pass report, which `mc status` shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from magic_context import paths
from tests.proxy_helpers import proxy_process

BAD_VALUE = 'embedding.min_similarity = "0.5"\n'  # a string where a number belongs
BAD_HOT_VALUE = 'execute_threshold_percentage = "40"\n'  # a key the transform pass itself reads


def _user_config(text: str) -> Path:
    user = paths.user_config_path()
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(text)
    return user


def _warnings(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("mc: warning: ")]


def _session(mc, project: Path, text: str = "hello from the config test", session: str = "cfg-1") -> None:
    body = {"harness": "anthropic", "session_id": session, "project_dir": str(project),
            "messages": [{"role": "user", "content": text}]}
    done = mc("transform", stdin=json.dumps(body))
    assert done.returncode == 0, done.stderr


def test_a_bad_value_is_told_once_by_each_command_and_changes_nothing_else(mc, tmp_path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    _session(mc, project)
    commands = [("status", "--json"), ("status",), ("search", "hello", "--project", str(project)),
                ("search", "hello", "--project", str(project), "--json"), ("memory", "list"),
                ("memory", "list", "--json")]
    _user_config("# a valid, empty config\n")
    valid = {args: mc(*args, cwd=project) for args in commands}
    for args, result in valid.items():
        assert result.returncode == 0, (args, result.stderr)
        assert _warnings(result.stderr) == [], args  # a valid config prints nothing

    user = _user_config(BAD_VALUE)
    for args in commands:
        result = mc(*args, cwd=project)
        assert result.returncode == valid[args].returncode, args  # exit code unchanged
        lines = _warnings(result.stderr)
        assert lines == [f"mc: warning: {user}: embedding.min_similarity: Input should be a valid number; "
                         "using the default"], (args, result.stderr)
        if "--json" in args:
            document = json.loads(result.stdout)  # stdout stays one parseable document
            assert document["errors"] == []
        elif args[0] != "status":  # status shows the problems in its own report (below); the rest is unchanged
            assert result.stdout == valid[args].stdout, args

    status = json.loads(mc("status", "--json", cwd=project).stdout)["data"]
    assert status["config"]["files"] == [str(user)]
    assert [w.split(": ")[1] for w in status["config"]["warnings"]] == ["embedding.min_similarity"]
    text = mc("status", cwd=project).stdout.decode()
    assert "config   1 problem(s)" in text and "embedding.min_similarity" in text
    searched = json.loads(mc("search", "hello", "--project", str(project), "--json", cwd=project).stdout)["data"]
    assert any("embedding.min_similarity" in w for w in searched["warnings"])


def test_the_trust_boundary_stripping_a_project_key_is_told(mc, tmp_path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    project_file = project / ".magic-context.toml"
    project_file.write_text('[proxy]\nupstream_anthropic = "http://attacker.invalid"\n')
    for args in (("memory", "list", "--project", str(project)), ("status", "--project", str(project))):
        result = mc(*args)
        assert result.returncode == 0, result.stderr
        lines = _warnings(result.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"mc: warning: {project_file}: proxy.upstream_anthropic: "), \
            (args, result.stderr)
        assert "not allowed in a project config" in lines[0]
    status = json.loads(mc("status", "--project", str(project), "--json").stdout)["data"]
    assert any("proxy.upstream_anthropic" in w for w in status["config"]["warnings"])


def test_doctor_lists_them_itself_without_a_second_copy_on_stderr(mc) -> None:
    _user_config(BAD_VALUE)
    result = mc("doctor")
    assert "embedding.min_similarity" in result.stdout.decode()
    assert _warnings(result.stderr) == []


def test_transform_keeps_them_in_the_pass_report_not_on_stderr(mc, tmp_path) -> None:
    user = _user_config(BAD_HOT_VALUE)
    body = {"harness": "anthropic", "session_id": "cfg-hot", "project_dir": str(tmp_path),
            "messages": [{"role": "user", "content": "hi"}]}
    result = mc("transform", "--report", stdin=json.dumps(body))
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, lines  # only the report the caller asked for: nothing per pass for the harness
    report = json.loads(lines[0])
    assert report["warnings"] == [f"{user}: execute_threshold_percentage: invalid value; using the default"]
    quiet = mc("transform", stdin=json.dumps(body))
    assert quiet.returncode == 0 and quiet.stderr == b""  # without --report: silent
    status = json.loads(mc("status", "--session", "cfg-hot", "--json").stdout)["data"]
    assert any("execute_threshold_percentage" in w for w in status["passes"][-1]["warnings"])
    assert any("execute_threshold_percentage" in w for w in status["config"]["warnings"])


def test_proxy_tells_them_once_at_start(tmp_path) -> None:
    user = _user_config(BAD_VALUE)
    with proxy_process() as proxy:
        assert proxy.proc.stderr is not None
        first = proxy.proc.stderr.readline().decode()  # written before the start-up line, not at exit
        assert first.startswith(f"mc: warning: {user}: embedding.min_similarity: ")
    assert "embedding.min_similarity" not in proxy.stderr.decode()  # and not again when it stops


def test_a_command_reading_only_the_transform_keys_still_tells_every_problem(mc, tmp_path) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(25)]
    body = {"harness": "anthropic", "session_id": "cfg-reduce", "project_dir": str(tmp_path), "messages": turns}
    assert mc("transform", stdin=json.dumps(body)).returncode == 0  # 25 tags: tag 1 is past the protected 20
    user = _user_config(BAD_HOT_VALUE + '[histroian]\nprovider = "command"\n')  # and a misspelled section
    result = mc("reduce", "1", "--session", "cfg-reduce", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)
    assert _warnings(result.stderr) == [  # the model's precise reason, not the hot reader's generic one
        f"mc: warning: {user}: execute_threshold_percentage: Input should be a valid number; using the default",
        f"mc: warning: {user}: histroian: unknown key; ignored"]
