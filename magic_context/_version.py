"""The single place the version lives (read by hatch at build time and by `mc --version`)."""

__version__ = "0.1.0"
