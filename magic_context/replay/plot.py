"""`mc replay --plot`: served tokens per pass and cumulative cost per strategy, as one PNG.

matplotlib is an optional extra (`pip install 'magic-context[plot]'`) and is imported only here,
inside the functions, with the non-interactive Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magic_context.errors import BadInput
from magic_context.replay.runner import ReplayResult

INSTALL_HINT = "pip install 'magic-context[plot]'"


def require() -> Any:
    """The pyplot module, or BadInput naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BadInput("--plot needs matplotlib, which is not installed", fix=INSTALL_HINT) from None
    return plt


def write(result: ReplayResult, path: str | Path) -> Path:
    """Draw the two panels and save them to `path` (PNG)."""
    plt = require()
    path = Path(path)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    try:
        for run in result.runs:
            passes = range(1, len(run.tokens) + 1)
            top.plot(passes, run.tokens, label=run.name, linewidth=1.8 if run.name == "mc" else 1.0)
            bottom.plot(passes, run.cumulative_usd, label=run.name, linewidth=1.8 if run.name == "mc" else 1.0)
        top.axhline(result.context_limit, color="grey", linestyle="--", linewidth=0.8, label="window")
        top.set_ylabel("served tokens")
        top.set_title(f"{result.path.name}: window {result.context_limit:,} tokens, {result.pricing.label}")
        top.legend(loc="upper left", fontsize="small")
        bottom.set_ylabel("cumulative cost ($)")
        bottom.set_xlabel("pass (LLM call)")
        bottom.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        try:
            fig.savefig(path, dpi=110)
        except OSError as exc:
            raise BadInput(f"cannot write the plot to {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
    return path


__all__ = ["INSTALL_HINT", "require", "write"]
