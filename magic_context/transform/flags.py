"""The `mc transform` flags, declared once (stdlib only: the hot path parses them by hand).

`transform.hook` parses argv from this table, `commands/transform.py` takes its Typer help from it, and
the README's command table is generated from the Typer command (`python -m commands._docs`); a test
checks the three agree.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Final

# flag -> (metavar, help); metavar None is a boolean switch.
FLAGS: Final = {
    "--harness": ("H", "opencode | pi | anthropic | openai | openai-responses (default: detected)."),
    "--session": ("ID", "Session id (default: from the input or a fingerprint)."),
    "--project": ("DIR", "Project directory (default: the current directory)."),
    "--model": ("PROVIDER/ID", "Model as PROVIDER/ID."),
    "--context-limit": ("N", "Context window in tokens."),
    "--report": (None, "Print the pass report as one JSON line on stderr."),
    "--dry-run": (None, "Compute and print, persist nothing."),
}
VALUE_FLAGS: Final = tuple(flag for flag, (metavar, _) in FLAGS.items() if metavar is not None)
BOOL_FLAGS: Final = tuple(flag for flag, (metavar, _) in FLAGS.items() if metavar is None)
USAGE: Final = "usage: mc transform " + " ".join(
    f"[{flag} {metavar}]" if metavar else f"[{flag}]" for flag, (metavar, _) in FLAGS.items())


def help_for(flag: str) -> str:
    return FLAGS[flag][1]


__all__ = ["BOOL_FLAGS", "FLAGS", "USAGE", "VALUE_FLAGS", "help_for"]
