"""`python -m magic_context` runs the same entry point as the `mc` console script."""

from commands.main import main

if __name__ == "__main__":
    raise SystemExit(main())
