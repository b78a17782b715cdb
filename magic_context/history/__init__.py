"""Long-history pipeline: the historian's output (parse, validate), the decay curve and rendering.

Submodules are imported directly (`from magic_context.history.render import …`) so that the
transform pass only loads what it uses; everything here is stdlib-only at module level.
"""

from __future__ import annotations

__all__: list[str] = []
