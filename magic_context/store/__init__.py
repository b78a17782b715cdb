"""SQLite storage: one `context.db` shared by every harness and project on the machine (DESIGN §4)."""
