"""Servers with known behaviour, for tests and accuracy benchmarks (not a product surface)."""
