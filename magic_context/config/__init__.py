"""Configuration: user `config.toml` + untrusted project `.magic-context.toml` (DESIGN §4)."""
