"""Reusable conformance suites: subclass one per backend (see docs/development.md)."""
