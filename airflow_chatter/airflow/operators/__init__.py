"""Operators: list leases, drain one lease, requeue undeliverable documents."""
