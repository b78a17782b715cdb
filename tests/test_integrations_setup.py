"""`mc setup --harness opencode|pi` on real temp dirs: byte-for-byte idempotence and uninstall, dry runs,
JSONC with comments, the OpenCode offline stub rules, the --json envelope, and the doctor check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from magic_context import integrations
from magic_context.doctor.checks import integration_checks
from magic_context.doctor.registry import DoctorContext, run_checks
from magic_context.integrations import base, opencode, pi
from magic_context.integrations.base import Scope

USER_CONFIG = b"""{
  // my OpenCode settings: mc must keep every byte of this
  "model": "anthropic/claude-sonnet-4-5",
  "plugin": [
    "opencode-foo@1.2.3", /* pinned */
  ],
}
"""


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for directories)."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A project and an isolated global config: XDG_CONFIG_HOME (OpenCode) and PI_CODING_AGENT_DIR (Pi)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi-agent"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no real harness binary: versions are not probed
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    return project


def test_opencode_install_edits_only_the_plugin_array_and_uninstall_restores_every_byte(world, tmp_path):
    (world / "opencode.jsonc").write_bytes(USER_CONFIG)
    before_project, before_global = tree(world), tree(tmp_path / "xdg") if (tmp_path / "xdg").exists() else {}
    scope = Scope("project", world)

    result = opencode.install(scope)

    entry = opencode.plugin_entry(scope)
    assert (world / "opencode.jsonc").read_bytes() == USER_CONFIG.replace(
        b'/* pinned */\n', f'/* pinned */\n    "{entry}",\n'.encode())  # its own line; comments stay put
    changed = {c.path for c in result.changes}
    assert str(world / ".opencode" / "magic-context" / "index.js") in changed
    assert str(world / ".opencode" / "package-lock.json") in changed  # offline stub, project config dir
    assert str(tmp_path / "xdg" / "opencode" / "package-lock.json") in changed  # and the global one
    backup = next(c.backup for c in result.changes if c.path == str(world / "opencode.jsonc"))
    assert Path(backup).read_bytes() == USER_CONFIG
    manifest = base.read_manifest(opencode.install_dir(scope))
    assert manifest["command"] == base.mc_command()

    after_install = tree(world)
    again = opencode.install(scope)
    assert again.changes == [] and "already installed" in again.notes[0]
    assert tree(world) == after_install

    removed = opencode.uninstall(scope)
    assert removed.changed
    assert tree(world) == before_project
    assert (tmp_path / "xdg").exists() is bool(before_global)
    assert opencode.uninstall(scope).changes == []


def test_opencode_entry_lands_inside_the_array(world):
    (world / "opencode.jsonc").write_bytes(USER_CONFIG)
    scope = Scope("project", world)
    opencode.install(scope)
    from magic_context.integrations import jsonc

    text = (world / "opencode.jsonc").read_text()
    assert jsonc.loads(text)["plugin"] == ["opencode-foo@1.2.3", opencode.plugin_entry(scope)]
    assert text.startswith(USER_CONFIG.decode().split('"opencode-foo@1.2.3",')[0])


def test_opencode_without_a_config_creates_one_inside_dot_opencode(world):
    before = tree(world)
    scope = Scope("project", world)
    opencode.install(scope)
    created = json.loads((world / ".opencode" / "opencode.json").read_text())
    assert created["plugin"] == [opencode.plugin_entry(scope)]
    assert not (world / "opencode.json").exists()
    opencode.uninstall(scope)
    assert tree(world) == before


def test_uninstall_after_the_user_edited_the_config_removes_only_mcs_entry(world):
    (world / "opencode.jsonc").write_bytes(USER_CONFIG)
    scope = Scope("project", world)
    opencode.install(scope)
    edited = (world / "opencode.jsonc").read_text().replace('"model": "anthropic/claude-sonnet-4-5"',
                                                           '"model": "openai/gpt-5"')
    (world / "opencode.jsonc").write_text(edited)
    result = opencode.uninstall(scope)
    assert (world / "opencode.jsonc").read_bytes() == USER_CONFIG.replace(b"anthropic/claude-sonnet-4-5",
                                                                         b"openai/gpt-5")
    assert any("changed since the install" in n for n in result.notes)


@pytest.mark.parametrize("harness", ["opencode", "pi"])
def test_dry_run_writes_nothing_and_reports_the_real_changes(world, tmp_path, harness):
    (world / "opencode.jsonc").write_bytes(USER_CONFIG)
    module = integrations.get(harness)
    scope = Scope("project", world)
    before = tree(tmp_path)
    planned = module.install(scope, dry_run=True)
    assert tree(tmp_path) == before
    done = module.install(scope)
    assert [(c.action, c.path) for c in planned.changes] == [(c.action, c.path) for c in done.changes]
    before = tree(tmp_path)
    assert module.uninstall(scope, dry_run=True).changed
    assert tree(tmp_path) == before


def test_pi_install_is_one_extension_directory(world):
    scope = Scope("project", world)
    before = tree(world)
    result = pi.install(scope)
    target = world / ".pi" / "extensions" / "magic-context"
    assert {c.path for c in result.changes} == {str(target / n) for n in ("index.js", "bridge.js", "mc.json")}
    assert (target / "index.js").read_bytes() == base.bundled("pi", "index.js")
    assert (target / "bridge.js").read_bytes() == base.bundled("pi", "bridge.js")
    assert pi.install(scope).changes == []
    pi.uninstall(scope)
    assert tree(world) == before


def test_pi_global_goes_to_the_agent_dir(world, tmp_path):
    scope = integrations.scope_for("pi", global_=True)
    assert scope.root == tmp_path / "pi-agent"
    pi.install(scope)
    assert (tmp_path / "pi-agent" / "extensions" / "magic-context" / "index.js").is_file()
    pi.uninstall(scope)
    assert not (tmp_path / "pi-agent").exists()


def test_opencode_global_uses_an_existing_config_json(world, tmp_path):
    config_dir = tmp_path / "xdg" / "opencode"
    config_dir.mkdir(parents=True)
    (config_dir / "config.json").write_text('{"theme": "dark"}\n')
    scope = integrations.scope_for("opencode", global_=True)
    opencode.install(scope)
    assert json.loads((config_dir / "config.json").read_text())["plugin"] == [opencode.plugin_entry(scope)]
    opencode.uninstall(scope)
    assert (config_dir / "config.json").read_text() == '{"theme": "dark"}\n'


def test_stub_is_not_laid_over_a_real_npm_install(tmp_path):
    real = tmp_path / "real"
    (real / "node_modules" / "@opencode-ai" / "plugin").mkdir(parents=True)
    (real / "package.json").write_text('{"dependencies": {"@opencode-ai/plugin": "1.18.33", "zod": "4"}}')
    assert opencode.stub_plan(real, "1.18.33") == ([], opencode.stub_plan(real, "1.18.33")[1])
    assert "leaves alone" in opencode.stub_plan(real, "1.18.33")[1]

    satisfied = tmp_path / "satisfied"
    (satisfied / "node_modules").mkdir(parents=True)
    (satisfied / "package-lock.json").write_text('{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1"}}}}')
    assert opencode.stub_plan(satisfied, None) == ([], None)

    importer = tmp_path / "importer"
    (importer / "plugins").mkdir(parents=True)
    (importer / "plugins" / "x.ts").write_text('import { tool } from "@opencode-ai/plugin"\n')
    laid, note = opencode.stub_plan(importer, None)
    assert laid == [] and "imports @opencode-ai/plugin" in note

    fresh = tmp_path / "fresh"
    laid, note = opencode.stub_plan(fresh, "1.18.33")
    assert note is None
    assert json.loads(dict((p.name, d) for p, d, _ in laid)["package-lock.json"]) == \
        {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}}}


def test_a_changed_stub_is_left_on_uninstall(world, tmp_path):
    scope = Scope("project", world)
    opencode.install(scope)
    lock = world / ".opencode" / "package-lock.json"
    lock.write_text('{"packages": {"": {"dependencies": {"@opencode-ai/plugin": "1.18.33", "x": "1"}}}}\n')
    result = opencode.uninstall(scope)
    assert lock.exists() and any(str(lock) in n for n in result.notes)


def test_setup_json_envelope_and_usage_errors(world, mc, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PI_CODING_AGENT_DIR": str(tmp_path / "pi-agent")}
    proc = mc("setup", "--harness", "pi", "--project", str(world), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    envelope = json.loads(proc.stdout)
    assert envelope["command"] == "setup" and envelope["errors"] == []
    (result,) = envelope["data"]["results"]
    assert result["harness"] == "pi" and result["operation"] == "install" and result["changed"] is True
    assert result["scope"] == {"kind": "project", "path": str(world.resolve())}
    assert {c["action"] for c in result["changes"]} == {"create"}

    proc = mc("setup", "--project", str(world), env=env)
    assert proc.returncode == 2 and "pass --harness opencode|pi|claude-code|codex" in proc.stderr.decode()
    proc = mc("setup", "--harness", "pi", "--project", str(world), "--global", env=env)
    assert proc.returncode == 2 and "exclude each other" in proc.stderr.decode()
    proc = mc("setup", "--harness", "cursor", env=env)
    assert proc.returncode == 2 and "unknown harness 'cursor'" in proc.stderr.decode()


def test_doctor_checks_each_installed_harness(world):
    opencode.install(Scope("project", world))
    pi.install(Scope("project", world))
    checks = integration_checks(world)
    assert [c.name for c in checks] == ["opencode_project", "pi_project"]
    outcomes = run_checks(checks, DoctorContext(project_dir=world))
    assert [o.result.status.value for o in outcomes] == ["warn", "warn"]  # plugins fine; harness not on PATH
    assert all("not on PATH" in o.result.detail for o in outcomes)

    manifest = world / ".pi" / "extensions" / "magic-context" / "mc.json"
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), command=["/nonexistent/mc"])))
    (world / ".opencode" / "opencode.json").write_text("{}")
    failed = run_checks(checks, DoctorContext(project_dir=world))
    assert [o.result.status.value for o in failed] == ["fail", "fail"]
    assert "does not list the plugin" in failed[0].result.detail
    assert "does not run" in failed[1].result.detail
