"""Hooks: they only handle connections and hand back the core's adapters."""
