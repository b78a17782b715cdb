"""Find the pinned real harness clients (tests/e2e/clients.txt) that `.ci/install-clients` installed.

Search order: `$MC_E2E_CLIENTS/<package>@<version>/node_modules/.bin/<binary>` (default cache
`${XDG_CACHE_HOME:-~/.cache}/mc-e2e-clients`), then `<binary>` on PATH. A client that is missing skips
its tests on a developer's machine and fails them under CI (`CI=true`), where `.ci/run` installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PINS_FILE = Path(__file__).with_name("clients.txt")
CACHE_ENV = "MC_E2E_CLIENTS"


@dataclass(frozen=True)
class Pin:
    package: str
    version: str
    binary: str


@dataclass(frozen=True)
class Client:
    name: str
    path: Path
    version: str | None
    pin: Pin


def pins() -> dict[str, Pin]:
    """Binary name → pinned package and version."""
    found = {}
    for line in PINS_FILE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            spec, binary = line.split()
            package, _, version = spec.rpartition("@")
            found[binary] = Pin(package, version, binary)
    return found


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "mc-e2e-clients"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@cache
def find(name: str) -> Client | None:
    pin = pins()[name]
    candidates = [cache_dir() / f"{pin.package}@{pin.version}" / "node_modules" / ".bin" / pin.binary]
    on_path = shutil.which(pin.binary)
    if on_path:
        candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return Client(name, path, _version(path), pin)
    return None


def _version(path: Path) -> str | None:
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    words = (proc.stdout or proc.stderr).split()
    return next((w for w in words if w[:1].isdigit()), None)


def require(name: str) -> Client:
    """The client, or skip (developer machine) / fail (CI) naming how to install it."""
    client = find(name)
    if client is None:
        message = f"{name} is not installed; run `bash .ci/install-clients` (cache: {cache_dir()})"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return client


def require_node() -> str:
    """`node` on PATH (the plugins' own tests drive them with it), or skip / fail under CI."""
    node = shutil.which("node")
    if node is None:
        message = "node is not on PATH; run `bash .ci/install-clients` (it installs Debian's nodejs)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return node


__all__ = ["CACHE_ENV", "Client", "Pin", "cache_dir", "find", "in_ci", "pins", "require", "require_node"]
