"""End-to-end tests with the real harness clients (see clients.txt and README "Development")."""
