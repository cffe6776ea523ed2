"""Sensors: the pending-outbox sensor (deferrable, or poke / reschedule)."""
