"""An injectable UTC wall clock.

The drain persists Drain Suspension state on lease documents (spec F-05), so time must survive a process restart:
it is UTC wall-clock time, never a monotonic reading. Components take a ``Clock`` so tests advance time instead of
sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

#: A zero-argument callable returning the current time as an aware UTC ``datetime``.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """Return the current time as an aware ``datetime`` in UTC (the default ``Clock``)."""
    return datetime.now(UTC)


__all__ = ["Clock", "utc_now"]
