"""Shared test helpers: every module a test imports from besides its own (tests/README.md)."""
