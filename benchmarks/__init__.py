"""Benchmarks: speed is measured here, never asserted in a test (DESIGN.md, "How we write code" 8)."""
