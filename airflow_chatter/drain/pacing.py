"""A token bucket over measured request charges: how a drain stays under ``max_request_units_per_second`` (F-11).

Why a bucket over *measured* charges rather than a request rate: a request's cost is only known from its answer
(a 1 KB patch costs ~10 RU, a batch of 15 ~150, a change-feed page depends on its size). So the bucket is spent
after the fact, by each request's reported charge, and may go into debt; a request waits *before* it is sent
until the debt is repaid at ``rate`` RU/s. Over a run the spent RU therefore never exceed
``rate × elapsed + burst`` plus the charges of the requests in flight at once (each sent when the bucket was out of
debt: up to ``stamp_concurrency`` stamps and a feed read), with ``burst`` = ``rate × burst_seconds``, default a tenth
of a second's worth. Over a run of seconds the average stays at the cap; a run shorter than that ends above it.

Thread-safe: the concurrent stamp writers of one drain share one bucket. The clock and the sleep are injectable so
tests drive time by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from airflow_chatter.errors import ConfigurationError

#: A debt this small is paid: float rounding must not leave a waiter sleeping for 1e-17 s, forever.
_PAID = 1e-6

#: Default burst, in seconds' worth of the rate.
DEFAULT_BURST_SECONDS = 0.1


class TokenBucket:
    """``rate`` request units per second, at most ``rate × burst_seconds`` banked; starts full."""

    def __init__(
        self,
        rate: float,
        *,
        burst_seconds: float = DEFAULT_BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise ConfigurationError("max_request_units_per_second", rate, "must be a positive number")
        self.rate = float(rate)
        self.capacity = self.rate * burst_seconds
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._stamp = clock()
        #: Seconds spent waiting so far (reported, not used for decisions).
        self.waited_seconds = 0.0

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._stamp
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._stamp = now

    def wait(self) -> float:
        """Block until the bucket is out of debt; return the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= -_PAID:
                    self.waited_seconds += waited
                    return waited
                delay = -self._tokens / self.rate
            self._sleep(delay)
            waited += delay

    def spend(self, request_units: float) -> None:
        """Take a measured charge out of the bucket (it may go into debt)."""
        if request_units <= 0:
            return
        with self._lock:
            self._refill()
            self._tokens -= request_units


__all__ = ["DEFAULT_BURST_SECONDS", "TokenBucket"]
