"""Project identity: `git:<root commit sha>` for a git work tree, else `dir:<sha256(path)[:12]>`.

Computed once when a session is first seen (it runs git), then read from the session row.
"""

from __future__ import annotations

from pathlib import Path

from magic_context import paths


def identity(project_dir: Path) -> str:
    root = paths.project_root(project_dir)
    if (root / ".git").exists():
        import subprocess  # only when a session is first seen: keep it off the steady-state import path

        try:
            proc = subprocess.run(
                ["git", "-C", str(root), "rev-list", "--max-parents=0", "HEAD"],
                capture_output=True, text=True, timeout=5, check=False,
            )
            shas = proc.stdout.split()
            if proc.returncode == 0 and shas:
                return f"git:{sorted(shas)[0]}"
        except (OSError, subprocess.SubprocessError):
            pass
    import hashlib

    return "dir:" + hashlib.sha256(str(root).encode("utf-8", "replace")).hexdigest()[:12]


__all__ = ["identity"]
