"""The interactive setup flow (`mc setup`) and the harness integration files it installs."""
