"""The read side: the drain engine, its source options and identity, leases, Drain Suspension and telemetry."""
