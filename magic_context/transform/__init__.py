"""The transform pass pipeline (`mc transform`): stdlib + sqlite3 + orjson only (DESIGN §3)."""
