"""The built wheel installs exactly three top-level packages and both console scripts."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    wheels = list(out.glob("magic_context-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_top_level_packages(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert top == {"magic_context", "commands", "wizard"}
    assert "magic_context/_version.py" in names
    for plugin_file in ("opencode/index.js", "pi/index.js", "js/bridge.js"):  # the plugins ship as package data
        assert f"magic_context/integrations/{plugin_file}" in names
    assert not any(name.startswith("tests/") for name in names)


def test_console_scripts_and_version(wheel: Path) -> None:
    from magic_context import __version__

    archive = zipfile.ZipFile(wheel)
    entry_points = next(n for n in archive.namelist() if n.endswith("entry_points.txt"))
    text = archive.read(entry_points).decode()
    assert "mc = commands.main:main" in text
    assert "magic-context = commands.main:main" in text
    assert f"magic_context-{__version__}-" in wheel.name
