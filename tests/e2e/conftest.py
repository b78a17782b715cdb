"""Fixtures of the end-to-end tests: a loopback fake provider and a throwaway offline client environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer

from e2e.offline import client_env


@pytest.fixture
def fake_provider():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "README.md").write_text("A project an agent works on.\n")
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The client's environment (HOME, XDG dirs, offline switches) plus the test's isolated mc dirs."""
    return client_env(tmp_path / "client")
