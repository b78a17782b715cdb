"""Health checks as a registry of small checks, each with an optional fixer (`mc doctor`)."""
