"""Stand-ins for `mc` that fail in one specific way, for the plugins' failure paths (real clients and node)."""

from __future__ import annotations

import stat
from pathlib import Path

EMERGENCY_LINE = "mc: error: context emergency: 97% of 200000 tokens used and nothing could be folded — run mc wrapup"

_SCRIPTS = {
    "emergency": f'cat >/dev/null\necho "{EMERGENCY_LINE}" >&2\nexit 4\n',
    "crash": 'cat >/dev/null\necho "Traceback (most recent call last): boom" >&2\nexit 1\n',
    "garbage": 'cat >/dev/null\necho "this is not json"\nexit 0\n',
    "no-messages": 'cat >/dev/null\necho \'{"nothing": true}\'\nexit 0\n',
    "hang": "cat >/dev/null\nsleep 30\n",
    "bad-input": 'cat >/dev/null\necho "mc: error: stdin is not valid JSON" >&2\nexit 2\n',
}


def stub_mc(directory: Path, kind: str) -> Path:
    """An executable shell script behaving like a failing `mc` of the given kind."""
    path = directory / f"mc-{kind}"
    path.write_text("#!/bin/sh\n" + _SCRIPTS[kind])
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


__all__ = ["EMERGENCY_LINE", "stub_mc"]
