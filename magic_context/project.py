"""Project identity: `git:<root commit sha>` for a git work tree, else `dir:<sha256(path)[:12]>`.

Computed once when a session is first seen (it runs git), then read from the session row.
"""

from __future__ import annotations

import os

from magic_context import paths

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from magic_context.paths import StrPath


def identity(project_dir: StrPath) -> str:
    root = paths.project_root_dir(project_dir)
    if os.path.exists(os.path.join(root, ".git")):
        import subprocess  # only when a session is first seen: keep it off the steady-state import path

        try:
            proc = subprocess.run(
                ["git", "-C", root, "rev-list", "--max-parents=0", "HEAD"],
                capture_output=True, text=True, timeout=5, check=False,
            )
            shas = proc.stdout.split()
            if proc.returncode == 0 and shas:
                return f"git:{sorted(shas)[0]}"
        except (OSError, subprocess.SubprocessError):
            pass
    import hashlib

    return "dir:" + hashlib.sha256(root.encode("utf-8", "replace")).hexdigest()[:12]


__all__ = ["identity"]
