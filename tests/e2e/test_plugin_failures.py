"""The OpenCode plugin and the Pi extension, as installed by the real installer, driven by node on the real
hook inputs the clients captured (../shared/data/requests/*-hook-1.json), against the real mc and against
stand-ins that fail in every way mc can: the harness must always get its messages back, except on a context
emergency, which must stop the call with mc's one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import clients
from e2e.stubs import EMERGENCY_LINE, stub_mc
from magic_context import integrations
from magic_context.integrations.base import Scope

pytestmark = pytest.mark.e2e

REQUESTS = Path(__file__).resolve().parents[3] / "shared" / "data" / "requests"
HOOK_INPUTS = {"opencode": "opencode-1.18.33-hook-1.json", "pi": "pi-0.73.1-hook-1.json"}
HARNESSES = list(HOOK_INPUTS)
REAL_MC = json.dumps([sys.executable, "-m", "magic_context"])


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install one harness's plugin into a temp project with the engine installer; returns (dir, project)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # OpenCode's global stub goes there

    def install(harness: str) -> tuple[Path, Path]:
        project = tmp_path / f"project-{harness}"
        project.mkdir()
        module = integrations.get(harness)
        scope = Scope("project", project)
        module.install(scope)
        return module.install_dir(scope), project

    return install


def hook_messages(harness: str) -> list:
    path = REQUESTS / HOOK_INPUTS[harness]
    if not path.is_file():
        pytest.fail(f"captured hook input missing: {path}")
    return json.loads(path.read_text())


def drive(harness: str, plugin_dir: Path, project: Path, *, command: str, messages: list | None = None,
          calls: int = 1, timeout_ms: int = 20000, reduce: str | None = None) -> dict:
    node = clients.require_node()
    messages = hook_messages(harness) if messages is None else messages
    session = messages[0]["info"]["sessionID"] if harness == "opencode" and messages else "ses_driver"
    payload = {"messages": messages, "directory": str(project), "calls": calls, "sessionId": session}
    if reduce is not None:
        payload["reduce"] = reduce
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(MAGIC_CONTEXT_MC=command, MAGIC_CONTEXT_HOOK_TIMEOUT_MS=str(timeout_ms))
    proc = subprocess.run([node, str(Path(__file__).with_name("drive_plugin.mjs")), harness, str(plugin_dir)],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr  # the plugin never crashed its host
    result = json.loads(proc.stdout)
    result["stderr"] = proc.stderr
    return result


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_mc_rewrites_the_captured_hook_input(harness, installed):
    plugin_dir, project = installed(harness)
    result = drive(harness, plugin_dir, project, command=REAL_MC, calls=2)
    first, second = result["calls"]
    assert first["outcome"] == "changed"
    assert second["messages"] == first["messages"]  # the replay is stable
    assert "<session-history>" in json.dumps(first["messages"], ensure_ascii=False)
    assert "## Magic Context" in result["system"][0]  # the guidance block lands in the system prompt
    assert result["logs"] == []


@pytest.mark.parametrize("harness", HARNESSES)
@pytest.mark.parametrize(("kind", "reason"), [
    ("crash", "exited 1"),
    ("bad-input", "exited 2"),
    ("garbage", "unparsable output"),
    ("no-messages", "without a messages array"),
    ("hang", "timed out"),
    ("spawn-error", "could not run"),
])
def test_every_failure_leaves_the_messages_unchanged_and_logs_once(harness, kind, reason, installed, tmp_path):
    plugin_dir, project = installed(harness)
    command = "/nonexistent/bin/mc" if kind == "spawn-error" else str(stub_mc(tmp_path, kind))
    result = drive(harness, plugin_dir, project, command=command, calls=2, timeout_ms=1500)
    for call in result["calls"]:
        assert call["outcome"] == "unchanged", call
        assert call["messages"] == hook_messages(harness)
    assert len(result["logs"]) == 1 and reason in result["logs"][0], result["logs"]
    assert result["system"] in (["You are OpenCode."], ["You are Pi."])  # no guidance without a pass


@pytest.mark.parametrize("harness", HARNESSES)
def test_malformed_plugin_input_reaches_mc_and_comes_back_unchanged(harness, installed):
    plugin_dir, project = installed(harness)
    session = {"info": {"sessionID": "ses_bad", "role": "user"}, "parts": "not-a-list"} if harness == "opencode" \
        else {"role": "user", "content": 42}
    result = drive(harness, plugin_dir, project, command=REAL_MC, messages=[session])
    assert result["calls"][0] == {"outcome": "unchanged", "messages": [session]}
    assert len(result["logs"]) == 1 and "exited 2" in result["logs"][0]


@pytest.mark.parametrize("harness", HARNESSES)
def test_context_emergency_stops_the_call_with_mcs_line(harness, installed, tmp_path):
    plugin_dir, project = installed(harness)
    result = drive(harness, plugin_dir, project, command=str(stub_mc(tmp_path, "emergency")))
    assert result["calls"][0] == {"outcome": "threw", "error": EMERGENCY_LINE}
    if harness == "pi":
        assert result["aborted"] is True  # Pi sends nothing once the turn is aborted
    else:
        assert EMERGENCY_LINE in result["stderr"]  # `opencode run` shows only a generic error for a hook's throw


@pytest.mark.parametrize("harness", HARNESSES)
def test_ctx_reduce_returns_mcs_text(harness, installed, isolated_dirs):
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("protected_tags = 1\n")
    plugin_dir, project = installed(harness)
    result = drive(harness, plugin_dir, project, command=REAL_MC, reduce="1")  # after one pass tagged the input
    assert result["tool"] == {"text": "Queued drop of §1§; it applies on the next cache-busting pass."}


@pytest.mark.parametrize("harness", HARNESSES)
def test_ctx_reduce_raises_mcs_error_line(harness, installed):
    plugin_dir, project = installed(harness)
    result = drive(harness, plugin_dir, project, command=REAL_MC, reduce="999")
    assert result["tool"] == {"error": "mc: error: cannot drop: unknown tags 999 — drop only older, active tags"}
