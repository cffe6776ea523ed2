"""Reusable conformance suites: subclass one per backend (see docs/testing.md)."""
