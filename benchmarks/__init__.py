"""Scripts that print measured ratios (docs/benchmarks.md), each run as a module from the checkout:
``.venv/bin/python -m benchmarks.<name>``."""
