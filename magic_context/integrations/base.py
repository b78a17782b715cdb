"""What every harness installer shares: scopes, results, the mc command, and installing an extension directory.

An integration is a directory `magic-context/` inside the harness's config location holding the bundled
plugin files plus `mc.json`: the mc command the plugin runs and a manifest of everything the install
created or edited elsewhere (a config entry, stub files, directories), so `uninstall` can put back the
previous state: an edited config file whose bytes are still what mc wrote is restored from its backup
(or deleted when mc created it); one the user changed since loses only mc's entry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from magic_context import __version__
from magic_context.doctor.registry import Status as CheckStatus
from magic_context.integrations import files, jsonc
from magic_context.integrations.files import Change, Plan
from magic_context.records import Factory, record
from magic_context.results import Result

INSTALL_DIR = "magic-context"
MANIFEST = "mc.json"
PLUGIN_FILES = ("index.js", "bridge.js")


class ScopeKind(StrEnum):
    """Where an install goes: one project, or the harness's global (user) config."""

    PROJECT = "project"
    GLOBAL = "global"


class Operation(StrEnum):
    """What `mc setup` did to a harness (`operation` in `mc setup --json`)."""

    INSTALL = "install"
    UNINSTALL = "uninstall"


@record(frozen=True)
class Scope:
    """Where an integration goes: one project (`root` = the project dir) or the user's global config."""

    kind: ScopeKind
    root: Path

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "path": str(self.root)}

    def describe(self) -> str:
        return f"project {self.root}" if self.kind == ScopeKind.PROJECT else "global config"


@record
class SetupResult:
    """The outcome of one install or uninstall (the same shape under --dry-run, where nothing was written)."""

    harness: str
    operation: Operation
    scope: Scope
    dry_run: bool
    changes: list[Change] = Factory(factory=list)
    notes: list[str] = Factory(factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {"harness": self.harness, "operation": self.operation, "scope": self.scope.as_dict(),
                "dry_run": self.dry_run, "changed": self.changed,
                "changes": [c.as_dict() for c in self.changes], "notes": list(self.notes)}


def report(results: list[SetupResult]) -> Result:
    """`mc setup`'s result: one entry per harness installed into (or removed from)."""
    return Result("setup", {"results": [r.as_dict() for r in results]})


@record(frozen=True)
class Detection:
    """A harness on this machine: its binary and version, and the scopes mc is installed in."""

    harness: str
    binary: str | None
    version: str | None
    tested_versions: tuple[str, ...]
    installed: tuple[Scope, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"harness": self.harness, "binary": self.binary, "version": self.version,
                "tested_versions": list(self.tested_versions), "installed": [s.as_dict() for s in self.installed]}


@record(frozen=True)
class Verification:
    """`verify`'s answer for one installed scope: ok / warn / fail, a detail line and the problems found."""

    harness: str
    scope: Scope
    status: CheckStatus
    detail: str
    items: tuple[str, ...] = ()


@record(frozen=True)
class ConfigEntry:
    """One value mc owns in a harness config file: element `value` of top-level array `key`."""

    path: Path
    key: str
    value: Any
    new_file: str  # the whole file when mc has to create it


def mc_command() -> list[str]:
    """The command a plugin runs to reach this mc: `magic-context` beside this Python, else `python -m magic_context`.

    `magic-context` rather than `mc`: Midnight Commander owns `mc` on many systems.
    """
    beside = Path(sys.executable).parent / ("magic-context.exe" if os.name == "nt" else "magic-context")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("magic-context")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "magic_context"]


def bundled(harness: str, name: str) -> bytes:
    """A plugin file shipped in the package: `<harness>/<name>`, or the shared `js/<name>`."""
    root = resources.files("magic_context.integrations")
    own = root / harness / name
    return own.read_bytes() if own.is_file() else (root / "js" / name).read_bytes()


def client_version(binary: str | None, timeout: float = 20.0) -> str | None:
    """The first token that looks like a version in `binary --version`, or None."""
    if not binary:
        return None
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    for token in (proc.stdout + " " + proc.stderr).replace("v", " ").split():
        if token[:1].isdigit() and "." in token:
            return token.strip(",;()")
    return None


def installed_in(install_dir: Callable[[Scope], Path], global_root: Path, project: Path | None) -> list[Scope]:
    """The scopes (this project, the global config) where an install manifest exists."""
    scopes = [Scope(ScopeKind.PROJECT, (project or Path.cwd()).resolve()), Scope(ScopeKind.GLOBAL, global_root)]
    return [s for s in scopes if read_manifest(install_dir(s)) is not None]


def detect(harness: str, binary_name: str, tested: tuple[str, ...], *, install_dir: Callable[[Scope], Path],
           global_root: Path, project: Path | None = None) -> Detection:
    """The harness binary on PATH, its version, and where mc is installed for it."""
    binary = shutil.which(binary_name)
    return Detection(harness, binary, client_version(binary), tested,
                     tuple(installed_in(install_dir, global_root, project)))


def read_manifest(install_dir: Path) -> dict[str, Any] | None:
    data = files.read_bytes(install_dir / MANIFEST)
    if data is None:
        return None
    try:
        manifest = json.loads(data)
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def missing_dirs(targets: Iterable[Path]) -> list[Path]:
    """Directories that do not exist yet above (or at) the targets, outermost first."""
    missing: list[Path] = []
    for target in targets:
        chain = []
        current = target
        while not current.exists() and current != current.parent:
            chain.append(current)
            current = current.parent
        for path in reversed(chain):
            if path not in missing:
                missing.append(path)
    return missing


def install_extension(harness: str, scope: Scope, install_dir: Path, *, config: ConfigEntry | None = None,
                      extras: Iterable[tuple[Path, bytes | None, str]] = (), dry_run: bool = False,
                      notes: list[str] | None = None) -> SetupResult:
    """Install (or refresh) the plugin directory, the config entry and the extra files; idempotent."""
    result = SetupResult(harness, Operation.INSTALL, scope, dry_run, notes=list(notes or []))
    previous = read_manifest(install_dir) or {}
    extras = [(Path(p), data, detail) for p, data, detail in extras if files.read_bytes(Path(p)) is None
              and not Path(p).is_dir()]
    created_dirs = missing_dirs([install_dir, *(p if data is None else p.parent for p, data, _ in extras)])

    plan = Plan()
    for name in PLUGIN_FILES:
        plan.write(install_dir / name, bundled(harness, name), "mc plugin")
    for path, data, detail in extras:
        if data is None:
            plan.mkdir(path, detail)
        else:
            plan.write(path, data, detail)
    config_record = previous.get("config")
    config_after: bytes | None = None
    if config is not None:
        before = files.read_bytes(config.path)
        text = before.decode("utf-8") if before is not None else None
        if text is None or config.value not in jsonc.array_values(text, config.key, source=str(config.path)):
            new_text = config.new_file if text is None else jsonc.append_to_array(
                text, config.key, config.value, source=str(config.path))
            config_after = new_text.encode("utf-8")
            created_dirs += [d for d in missing_dirs([config.path.parent]) if d not in created_dirs]
            plan.write(config.path, config_after, f"add {config.value!r} to `{config.key}`")
    result.changes += files.apply(plan, dry_run=dry_run, label=harness)

    if config is not None and config_after is not None:
        change = next((c for c in result.changes if c.path == str(config.path)), None)
        config_record = {"path": str(config.path), "key": config.key, "value": config.value,
                         "created": change is not None and change.action == "create",
                         "backup": change.backup if change else None, "sha256": files.sha256(config_after)}
    manifest = {
        "harness": harness, "mc_version": __version__, "command": mc_command(), "scope": scope.as_dict(),
        "files": [str(install_dir / name) for name in (*PLUGIN_FILES, MANIFEST)],
        "config": config_record,
        "extras": list({e["path"]: e for e in [
            *previous.get("extras", []),
            *({"path": str(p), "dir": data is None, "sha256": None if data is None else files.sha256(data)}
              for p, data, _ in extras)]}.values()),
        "created_dirs": [*previous.get("created_dirs", []),
                         *(str(d) for d in created_dirs if str(d) not in previous.get("created_dirs", []))],
    }
    plan = Plan()
    plan.write(install_dir / MANIFEST, _manifest_bytes(manifest), "mc command and install manifest")
    result.changes += files.apply(plan, dry_run=dry_run, label=harness)
    if not result.changed:
        result.notes.insert(0, f"already installed ({scope.describe()}); nothing changed")
    return result


def uninstall_extension(harness: str, scope: Scope, install_dir: Path, *, config: ConfigEntry | None = None,
                        dry_run: bool = False) -> SetupResult:
    """Undo `install_extension`: restore or clean the config, remove what the install created."""
    result = SetupResult(harness, Operation.UNINSTALL, scope, dry_run)
    manifest = read_manifest(install_dir) or {}
    plan = Plan()
    record = manifest.get("config")
    if record and record.get("path"):
        _plan_config_restore(plan, record, result)
    elif config is not None:  # no manifest: take out mc's entry if it is there
        _plan_entry_removal(plan, config.path, config.key, config.value)
    for extra in reversed(manifest.get("extras", [])):
        path = Path(extra["path"])
        data = files.read_bytes(path)
        if extra.get("dir"):
            plan.rmdir(path, "mc stub (empty)")
        elif data is not None and files.sha256(data) == extra.get("sha256"):
            plan.delete(path, "mc stub", backup=False)
        elif data is not None:
            result.notes.append(f"left {path}: it changed since mc created it")
    for name in PLUGIN_FILES:  # mc's own files: a copy would only duplicate the package
        plan.delete(install_dir / name, "mc plugin", backup=not _is_bundled(harness, install_dir / name))
    plan.delete(install_dir / MANIFEST, "mc command and install manifest", backup=False)
    plan.rmdir(install_dir)
    for directory in reversed(manifest.get("created_dirs", [])):
        plan.rmdir(Path(directory), "created by the install (empty)")
    result.changes += files.apply(plan, dry_run=dry_run, label=f"{harness}-uninstall")
    if not result.changed:
        result.notes.insert(0, f"not installed ({scope.describe()}); nothing changed")
    return result


def verify_extension(harness: str, install_dir: Path) -> tuple[list[str], list[str]]:
    """(problems, warnings) of an installed plugin directory: files current, its mc command working."""
    problems: list[str] = []
    warnings: list[str] = []
    manifest = read_manifest(install_dir)
    if manifest is None:
        return [f"{install_dir / MANIFEST} is missing or unreadable; rerun `mc setup --harness {harness}`"], warnings
    for name in PLUGIN_FILES:
        data = files.read_bytes(install_dir / name)
        if data is None:
            problems.append(f"{install_dir / name} is missing; rerun `mc setup --harness {harness}`")
        elif data != bundled(harness, name):
            warnings.append(f"{install_dir / name} differs from this mc's version; "
                            f"rerun `mc setup --harness {harness}`")
    command = manifest.get("command")
    if not isinstance(command, list) or not command:
        problems.append(f"{install_dir / MANIFEST} names no mc command")
    else:
        try:
            proc = subprocess.run([*map(str, command), "--version"], capture_output=True, text=True, timeout=30,
                                  check=False)
            if proc.returncode != 0:
                problems.append(f"the plugin's mc ({' '.join(command)}) exits {proc.returncode}")
        except (OSError, subprocess.SubprocessError) as exc:
            problems.append(f"the plugin's mc ({' '.join(command)}) does not run: {exc}")
    return problems, warnings


def version_warnings(label: str, binary: str | None, tested: tuple[str, ...]) -> list[str]:
    if binary is None:
        return [f"{label} is not on PATH"]
    version = client_version(binary)
    if version is None:
        return [f"could not read {label}'s version ({binary} --version)"]
    if version not in tested:
        return [f"{label} {version} is not a version mc was tested with ({', '.join(tested)})"]
    return []


def verification(harness: str, scope: Scope, problems: list[str], warnings: list[str]) -> Verification:
    if problems:
        return Verification(harness, scope, CheckStatus.FAIL, f"{scope.describe()}: {problems[0]}",
                            tuple(problems + warnings))
    if warnings:
        return Verification(harness, scope, CheckStatus.WARN, f"{scope.describe()}: {warnings[0]}", tuple(warnings))
    return Verification(harness, scope, CheckStatus.OK, f"{scope.describe()}: plugin current, mc runs", ())


def _is_bundled(harness: str, path: Path) -> bool:
    return files.read_bytes(path) == bundled(harness, path.name)


def _plan_config_restore(plan: Plan, record: dict[str, Any], result: SetupResult) -> None:
    path = Path(record["path"])
    current = files.read_bytes(path)
    if current is None:
        return
    if files.sha256(current) == record.get("sha256"):
        if record.get("created"):
            plan.delete(path, "created by the install")
            return
        backup = files.read_bytes(Path(record["backup"])) if record.get("backup") else None
        if backup is not None:
            plan.write(path, backup, "restored from the backup taken at install")
            return
    else:
        result.notes.append(f"{path} changed since the install: removed only mc's entry")
    _plan_entry_removal(plan, path, record["key"], record["value"])


def _plan_entry_removal(plan: Plan, path: Path, key: str, value: Any) -> None:
    current = files.read_bytes(path)
    if current is None:
        return
    text = current.decode("utf-8")
    if value in jsonc.array_values(text, key, source=str(path)):
        plan.write(path, jsonc.remove_from_array(text, key, value, source=str(path)).encode("utf-8"),
                   f"remove {value!r} from `{key}`")


__all__ = ["INSTALL_DIR", "MANIFEST", "ConfigEntry", "Detection", "Operation", "Scope", "ScopeKind", "SetupResult",
           "Verification",
           "bundled", "client_version", "detect", "install_extension", "installed_in", "mc_command", "missing_dirs",
           "read_manifest", "uninstall_extension", "verification", "verify_extension", "version_warnings"]
