"""How many examples a property test draws: its own figure, scaled by ``$MC_HYPOTHESIS_SCALE`` (default 1).

``bench/mutation.sh`` sets the scale to 0.1 for the codec and pipeline tests: the random round trips then take
about half a second per mutant instead of five, which is what makes checking every codec mutant fit in an hour on
a shared machine. The hand-written example tests are what pin the codecs' behaviour; a mutant that survives the
scaled run is reviewed by hand (and re-run at full scale) before it is listed as equivalent. Every other run
draws the full figure.
"""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """``n`` scaled by ``$MC_HYPOTHESIS_SCALE``, at least 1."""
    raw = os.environ.get("MC_HYPOTHESIS_SCALE", "").strip()
    try:
        scale = float(raw) if raw else 1.0
    except ValueError as exc:
        raise ValueError(f"MC_HYPOTHESIS_SCALE must be a number, got {raw!r}") from exc
    return max(1, round(n * scale))
