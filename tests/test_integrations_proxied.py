"""`mc setup --harness claude-code|codex` on real temp dirs: what the edit writes, byte-for-byte idempotence
and uninstall, the user's own base URL kept as the proxy's upstream, an edit made after the install, bad
files, dry runs, the --json envelope and the doctor check (the proxy must answer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer
from proxy_helpers import proxy_in_thread, settings_for

from magic_context import integrations
from magic_context.doctor.checks import integration_checks
from magic_context.errors import BadInput
from magic_context.integrations import claude_code, codex
from magic_context.integrations.base import Scope

PROXY = "http://127.0.0.1:8790"  # mc's default proxy.host / proxy.port
CODEX_CONFIG = b"""# my Codex settings: comments and layout stay
model = "gpt-5-codex"   # the model I use
model_provider = "corp"

[model_providers.corp]
name = "Corp gateway"
base_url = "https://llm.corp.example/v1"
env_key = "CORP_KEY"
http_headers = { "X-Team" = "infra" }

[features]
plugins = false
"""


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A project, a HOME, a CODEX_HOME; no client binary on PATH (versions are not probed)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    (tmp_path / "home").mkdir()
    project = tmp_path / "project"
    project.mkdir()
    return project


def project_scope(project: Path) -> Scope:
    return integrations.scope_for("claude-code", project=project)


def test_claude_code_project_install_and_byte_exact_uninstall(world):
    settings = world / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = b'{\n    "permissions": {"allow": ["Bash(ls:*)"]},\n    "env": {"MY_VAR": "1"}\n}\n'
    settings.write_bytes(original)

    result = claude_code.install(project_scope(world))
    env = json.loads(settings.read_text())["env"]
    assert env == {"MY_VAR": "1", "ANTHROPIC_BASE_URL": PROXY,
                   "ANTHROPIC_CUSTOM_HEADERS": f"x-mc-project-dir: {world.resolve()}"}
    assert json.loads(settings.read_text())["permissions"] == {"allow": ["Bash(ls:*)"]}
    change = next(c for c in result.changes if c.path == str(settings))
    assert change.action == "update" and Path(change.backup).read_bytes() == original
    installed = settings.read_bytes()
    assert not claude_code.install(project_scope(world)).changed  # idempotent
    assert settings.read_bytes() == installed

    removed = claude_code.uninstall(project_scope(world))
    assert removed.changed and settings.read_bytes() == original
    assert not claude_code.install_dir(project_scope(world)).exists()
    assert not claude_code.uninstall(project_scope(world)).changed


def test_claude_code_keeps_the_users_base_url_and_headers(world):
    settings = world / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gw.corp.example/anthropic/",
                                            "ANTHROPIC_CUSTOM_HEADERS": "X-Team: infra"}}))
    claude_code.install(project_scope(world))
    env = json.loads(settings.read_text())["env"]
    assert env["ANTHROPIC_BASE_URL"] == PROXY
    assert env["ANTHROPIC_CUSTOM_HEADERS"].splitlines() == [
        "X-Team: infra", f"x-mc-project-dir: {world.resolve()}", "x-mc-upstream: https://gw.corp.example/anthropic"]
    # A re-run never takes mc's own values for the user's.
    claude_code.install(project_scope(world))
    assert json.loads(settings.read_text())["env"] == env

    # The user edits the file after the install: the uninstall takes out only mc's values.
    edited = json.loads(settings.read_text())
    edited["model"] = "claude-sonnet-4-5"
    settings.write_text(json.dumps(edited))
    removed = claude_code.uninstall(project_scope(world))
    assert any("changed since the install" in note for note in removed.notes)
    assert json.loads(settings.read_text()) == {"model": "claude-sonnet-4-5", "env": {
        "ANTHROPIC_BASE_URL": "https://gw.corp.example/anthropic/", "ANTHROPIC_CUSTOM_HEADERS": "X-Team: infra"}}


def test_claude_code_global_install_creates_and_removes_the_file(world, monkeypatch, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-dir"))
    scope = integrations.scope_for("claude-code", global_=True)
    assert scope.root == tmp_path / "claude-dir"
    dry = claude_code.install(scope, dry_run=True)
    assert dry.changed and not (tmp_path / "claude-dir").exists()
    claude_code.install(scope)
    written = json.loads((tmp_path / "claude-dir" / "settings.json").read_text())
    assert written == {"env": {"ANTHROPIC_BASE_URL": PROXY}}  # no project header for a global install
    claude_code.uninstall(scope)
    assert not (tmp_path / "claude-dir").exists()  # the file and the directory the install created


def test_claude_code_refuses_a_broken_settings_file(world):
    settings = world / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    with pytest.raises(BadInput, match=r"settings\.json is not valid JSON"):
        claude_code.install(project_scope(world))
    assert settings.read_text() == "{ not json"


def test_codex_install_wraps_the_users_provider_and_uninstalls_byte_exact(world):
    config = Path(codex.config_file())
    config.parent.mkdir(parents=True)
    config.write_bytes(CODEX_CONFIG)
    with pytest.raises(BadInput, match="has no project install"):
        integrations.scope_for("codex", project=world)
    scope = integrations.scope_for("codex")
    assert scope.kind == "global"

    result = codex.install(scope)
    assert result.changed
    text = config.read_text()
    assert text.startswith("# my Codex settings: comments and layout stay\n")
    assert 'model = "gpt-5-codex"   # the model I use' in text
    import tomllib

    doc = tomllib.loads(text)
    assert doc["model_provider"] == "magic-context"
    assert doc["model_providers"]["corp"]["base_url"] == "https://llm.corp.example/v1"  # the user's, untouched
    assert doc["model_providers"]["magic-context"] == {
        "name": "magic-context (mc proxy)", "base_url": f"{PROXY}/v1", "wire_api": "responses", "env_key": "CORP_KEY",
        "http_headers": {"X-Team": "infra", "x-mc-upstream": "https://llm.corp.example/v1"}}
    installed = config.read_bytes()
    assert not codex.install(scope).changed and config.read_bytes() == installed

    codex.uninstall(scope)
    assert config.read_bytes() == CODEX_CONFIG


def test_codex_on_the_builtin_openai_provider_and_a_later_edit(world):
    config = Path(codex.config_file())
    config.parent.mkdir(parents=True)
    config.write_text('model = "gpt-5"\n')
    scope = integrations.scope_for("codex")
    result = codex.install(scope)
    assert any("OPENAI_API_KEY" in note for note in result.notes)
    import tomllib

    provider = tomllib.loads(config.read_text())["model_providers"]["magic-context"]
    assert provider["env_key"] == "OPENAI_API_KEY" and "http_headers" not in provider  # the proxy's default upstream

    config.write_text(config.read_text().replace('model = "gpt-5"', 'model = "gpt-5.5"'))
    removed = codex.uninstall(scope)
    assert any("changed since the install" in note for note in removed.notes)
    assert tomllib.loads(config.read_text()) == {"model": "gpt-5.5"}


def test_codex_refuses_a_broken_config(world):
    config = Path(codex.config_file())
    config.parent.mkdir(parents=True)
    config.write_text("model = [unclosed\n")
    with pytest.raises(BadInput, match=r"config\.toml is not valid TOML"):
        codex.install(integrations.scope_for("codex"))


def test_setup_json_envelope_for_both(world, mc, tmp_path):
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex-home"), "PATH": "/usr/bin:/bin"}
    proc = mc("setup", "--harness", "claude-code", "--harness", "codex", "--project", str(world), "--json", env=env)
    assert proc.returncode == 2 and "drop --project" in proc.stderr.decode()
    proc = mc("setup", "--harness", "codex", "--json", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["data"]["results"]
    assert result["harness"] == "codex" and result["dry_run"] and result["changed"]
    assert not (tmp_path / "codex-home" / "config.toml").exists()


def test_doctor_fails_while_the_proxy_is_down_and_passes_once_it_answers(world):
    with FakeLLMServer() as fake, proxy_in_thread(settings_for(fake.url)) as url:
        port = int(url.rsplit(":", 1)[1])
        from magic_context import paths

        paths.config_dir().mkdir(parents=True, exist_ok=True)
        (paths.config_dir() / "config.toml").write_text(f"[proxy]\nport = {port}\n")
        claude_code.install(project_scope(world))
        (check,) = [c for c in integration_checks(world) if c.name == "claude-code_project"]
        verdict = claude_code.verify(project_scope(world))
        assert verdict.status == "warn" and verdict.items == ("Claude Code is not on PATH",)  # no binary here
        assert check.name == "claude-code_project"
    down = claude_code.verify(project_scope(world))
    assert down.status == "fail" and "mc proxy does not answer" in down.detail and "mc proxy --daemon" in down.detail
    (world / ".claude" / "settings.json").write_text("{}")
    gone = claude_code.verify(project_scope(world))
    assert any("not mc proxy" in item for item in gone.items)
