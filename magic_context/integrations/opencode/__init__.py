"""OpenCode: the plugin (`experimental.chat.messages.transform` → `mc transform`) and its installer.

Where it goes: `<config dir>/magic-context/` (`index.js`, `bridge.js`, `mc.json`), registered as a
`file://` URL in the `plugin` array of the scope's config file — the project's `opencode.jsonc` /
`opencode.json` (root or `.opencode/`), else a new `.opencode/opencode.json`; globally
`~/.config/opencode/opencode.json(c)`. Only that array element is added; every other byte stays.

The offline start-up stall (real-clients.md §3): OpenCode runs `npm install @opencode-ai/plugin` in
every config directory it uses (the project's `.opencode/` and the global `~/.config/opencode/`) and
waits ~70 s when the registry is unreachable. It skips the install when `node_modules/` exists and
`package-lock.json` lists every dependency. mc's plugin needs no package, so the installer lays that
stub (an empty `node_modules/` and a one-line lock) in each such directory that has neither yet and
whose other plugins do not import `@opencode-ai/plugin`; a real npm install there is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from magic_context.integrations import base, files, jsonc
from magic_context.integrations.base import ConfigEntry, Detection, Scope, SetupResult, Verification

NAME = "opencode"
BINARY = "opencode"
TESTED_VERSIONS = ("1.18.33",)
PLUGIN_PACKAGE = "@opencode-ai/plugin"
CONFIG_NAMES = ("opencode.jsonc", "opencode.json")
SCHEMA_URL = "https://opencode.ai/config.json"


def global_dir() -> Path:
    """OpenCode's global config directory (`$XDG_CONFIG_HOME/opencode`, default `~/.config/opencode`)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config") / "opencode"


def config_dir(scope: Scope) -> Path:
    return scope.root / ".opencode" if scope.kind == "project" else scope.root


def install_dir(scope: Scope) -> Path:
    return config_dir(scope) / base.INSTALL_DIR


def config_file(scope: Scope) -> Path:
    """The config file that carries the `plugin` entry: the first existing one, else a new one in the config dir."""
    candidates = [scope.root / n for n in CONFIG_NAMES] if scope.kind == "project" else []
    names = (*CONFIG_NAMES, "config.json") if scope.kind == "global" else CONFIG_NAMES
    candidates += [config_dir(scope) / n for n in names]
    return next((c for c in candidates if c.is_file()), config_dir(scope) / "opencode.json")


def plugin_entry(scope: Scope) -> str:
    return (install_dir(scope) / "index.js").absolute().as_uri()


def _config(scope: Scope) -> ConfigEntry:
    entry = plugin_entry(scope)
    new_file = json.dumps({"$schema": SCHEMA_URL, "plugin": [entry]}, indent=2) + "\n"
    return ConfigEntry(config_file(scope), "plugin", entry, new_file)


def stub_dirs(scope: Scope) -> list[Path]:
    """Every config directory OpenCode will run its npm install in for this scope."""
    return [config_dir(scope), global_dir()] if scope.kind == "project" else [config_dir(scope)]


def _imports_plugin_package(directory: Path) -> list[Path]:
    found = []
    for sub in ("plugin", "plugins", "tool", "tools"):
        for path in sorted((directory / sub).glob("*.[jt]s")) if (directory / sub).is_dir() else []:
            try:
                if PLUGIN_PACKAGE in path.read_text("utf-8", errors="replace"):
                    found.append(path)
            except OSError:
                continue
    return found


def _lock_lists_plugin(directory: Path) -> bool:
    try:
        lock = json.loads((directory / "package-lock.json").read_text("utf-8"))
        root = lock.get("packages", {}).get("", {})
    except (OSError, ValueError, AttributeError):
        return False
    return any(PLUGIN_PACKAGE in (root.get(k) or {}) for k in
               ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies"))


def stub_plan(directory: Path, version: str | None) -> tuple[list[tuple[Path, bytes | None, str]], str | None]:
    """(extras to create, note) for one config dir: lay the offline stub only where it is needed and safe."""
    node_modules, lock = directory / "node_modules", directory / "package-lock.json"
    if node_modules.is_dir() and _lock_lists_plugin(directory):
        return [], None  # a real install (or our stub) already satisfies OpenCode
    if node_modules.exists() or lock.exists() or (directory / "package.json").exists():
        return [], (f"{directory} holds an npm install mc leaves alone: OpenCode may install {PLUGIN_PACKAGE} "
                    "there at start-up (fine online; a ~70 s stall offline)")
    importers = _imports_plugin_package(directory)
    if importers:
        return [], (f"{importers[0]} imports {PLUGIN_PACKAGE}: no offline stub laid in {directory} "
                    "(OpenCode installs the package there at start-up)")
    body = json.dumps({"packages": {"": {"dependencies": {PLUGIN_PACKAGE: version or "*"}}}}, separators=(",", ":"))
    why = "offline stub: OpenCode skips its npm install"
    return [(node_modules, None, why), (lock, (body + "\n").encode(), why)], None


def detect(project: Path | None = None) -> Detection:
    return base.detect(NAME, BINARY, TESTED_VERSIONS, install_dir=install_dir, global_root=global_dir(),
                       project=project)


def install(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    version = base.client_version(shutil.which(BINARY))
    extras: list[tuple[Path, bytes | None, str]] = []
    notes: list[str] = []
    for directory in stub_dirs(scope):
        laid, note = stub_plan(directory, version)
        extras += laid
        if note:
            notes.append(note)
    if version and version not in TESTED_VERSIONS:
        notes.append(f"OpenCode {version} is not a version mc was tested with ({', '.join(TESTED_VERSIONS)})")
    return base.install_extension(NAME, scope, install_dir(scope), config=_config(scope), extras=extras,
                                  dry_run=dry_run, notes=notes)


def uninstall(scope: Scope, *, dry_run: bool = False) -> SetupResult:
    return base.uninstall_extension(NAME, scope, install_dir(scope), config=_config(scope), dry_run=dry_run)


def verify(scope: Scope) -> Verification:
    """Plugin files current, registered in the config, mc reachable, OpenCode version known to work."""
    problems, warnings = base.verify_extension(NAME, install_dir(scope))
    config = _config(scope)
    data = files.read_bytes(config.path)
    try:
        listed = data is not None and config.value in jsonc.array_values(data.decode("utf-8"), "plugin",
                                                                           source=str(config.path))
    except Exception as exc:  # an unparsable config is the user's to fix, and what doctor must say
        problems.append(str(exc))
        listed = True
    if not listed:
        problems.append(f"{config.path} does not list the plugin ({config.value}); rerun `mc setup --harness opencode`")
    warnings += base.version_warnings("OpenCode", shutil.which(BINARY), TESTED_VERSIONS)
    return base.verification(NAME, scope, problems, warnings)


__all__ = ["NAME", "TESTED_VERSIONS", "config_file", "detect", "global_dir", "install", "install_dir",
           "plugin_entry", "stub_plan", "uninstall", "verify"]
