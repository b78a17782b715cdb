"""mc engine: keeps an agent's session inside its context window (a library: never prints or exits)."""

from magic_context._version import __version__

__all__ = ["__version__"]
