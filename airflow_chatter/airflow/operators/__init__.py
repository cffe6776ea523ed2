"""Operators, one per module: list leases, drain one lease, requeue undeliverable documents, receive a topic,
emit a run's topic asset events, and the stand-in of a broken source."""
