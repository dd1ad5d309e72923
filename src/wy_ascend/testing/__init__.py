"""Test-support room: cases, properties, the regression store and replay (used by fuzz/ and the CLI)."""
