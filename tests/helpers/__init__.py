"""Test-only helpers shared across the test folders (importable as `helpers.*`)."""
