"""The fault-injection suite (docs/reliability.md): the drain under injected faults, nothing lost."""
