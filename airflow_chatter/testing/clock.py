"""A clock tests move by hand, for every component that takes a ``Clock`` (airflow_chatter.clock).

Drain Suspension windows, lease expiry and TTL are all wall-clock rules; a test advances this clock instead of
sleeping, so it is exact and fast.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: A whole second, so ``_ts`` (integer seconds) arithmetic in tests is exact.
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class ManualClock:
    """A UTC clock that only moves when told to: ``clock()`` is ``clock.now``; ``advance(seconds)`` moves it."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError(f"ManualClock needs an aware datetime, got naive {start!r}")
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
