"""File operations for installers: plan first, then apply (or only report, for --dry-run), with backups.

An installer describes what it wants (`Plan.write`, `Plan.mkdir`, `Plan.delete`, `Plan.rmdir`); `apply`
skips every step that would change nothing — which is what makes a second install a no-op — backs a
file up before it is overwritten or deleted, writes atomically (temp file + rename, mode kept), and
returns the changes it made (or would make) as `Change` records.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from enum import StrEnum
from pathlib import Path

from magic_context import paths
from magic_context.records import Factory, as_dict, record


class ChangeAction(StrEnum):
    """What `mc setup` did (or would do) to one path."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    MKDIR = "mkdir"
    RMDIR = "rmdir"


@record(frozen=True)
class Change:
    """One change on disk, as reported to the user (`--json` too)."""

    action: ChangeAction
    path: str
    detail: str = ""
    backup: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in as_dict(self).items() if v}


@record(frozen=True)
class _Op:
    kind: str
    path: Path
    data: bytes | None = None
    detail: str = ""


@record
class Plan:
    """The steps an install or uninstall wants, in order."""

    ops: list[_Op] = Factory(factory=list)

    def write(self, path: Path, data: bytes, detail: str = "") -> None:
        self.ops.append(_Op("write", Path(path), data, detail))

    def mkdir(self, path: Path, detail: str = "") -> None:
        self.ops.append(_Op("mkdir", Path(path), None, detail))

    def delete(self, path: Path, detail: str = "", *, backup: bool = True) -> None:
        """Delete a file; `backup=False` for files mc itself wrote (its plugin files, unchanged stubs)."""
        self.ops.append(_Op("delete" if backup else "delete-nobackup", Path(path), None, detail))

    def rmdir(self, path: Path, detail: str = "") -> None:
        """Remove a directory only if it is empty when this step runs."""
        self.ops.append(_Op("rmdir", Path(path), None, detail))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def backup_root() -> Path:
    """Where installers keep backups: `<data dir>/backups/`."""
    return paths.data_dir() / "backups"


def _backup(path: Path, stamp: str) -> Path:
    target = backup_root() / stamp / str(path.resolve()).lstrip(os.sep).replace(os.sep, "__")
    paths.ensure_private_dir(target.parent)
    target.write_bytes(path.read_bytes())
    paths.secure_file(target)
    return target


def _atomic_write(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _dir_empty_after(path: Path, deleted: set[Path]) -> bool:
    return path.is_dir() and all(child in deleted for child in path.iterdir())


def apply(plan: Plan, *, dry_run: bool = False, label: str = "mc") -> list[Change]:
    """Carry out `plan` (or only report it); returns the changes that were (or would be) made."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{label}-{os.getpid()}"
    changes: list[Change] = []
    made_dirs: set[Path] = set()
    deleted: set[Path] = set()
    for op in plan.ops:
        path = op.path
        if op.kind == "mkdir":
            if path.is_dir() or path in made_dirs:
                continue
            if not dry_run:
                path.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path)
            changes.append(Change(ChangeAction.MKDIR, str(path), op.detail))
        elif op.kind == "write":
            current = None if path in deleted else read_bytes(path)
            if current == op.data:
                continue
            backup = None
            if not dry_run:
                if current is not None:
                    backup = str(_backup(path, stamp))
                path.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(path, op.data or b"")
            deleted.discard(path)
            action = ChangeAction.CREATE if current is None else ChangeAction.UPDATE
            changes.append(Change(action, str(path), op.detail, backup))
        elif op.kind in ("delete", "delete-nobackup"):
            if path in deleted or not path.is_file():
                continue
            backup = None
            if not dry_run:
                if op.kind == "delete":
                    backup = str(_backup(path, stamp))
                path.unlink()
            deleted.add(path)
            changes.append(Change(ChangeAction.DELETE, str(path), op.detail, backup))
        elif op.kind == "rmdir":
            if path in deleted or not _dir_empty_after(path, deleted):
                continue
            if not dry_run:
                path.rmdir()
            deleted.add(path)
            changes.append(Change(ChangeAction.RMDIR, str(path), op.detail))
    return changes


__all__ = ["Change", "ChangeAction", "Plan", "apply", "backup_root", "read_bytes", "sha256"]
