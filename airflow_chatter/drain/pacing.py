"""A drain's pace: a token bucket over measured request charges, at the cap and at what the container serves (F-11).

Why a bucket over *measured* charges rather than a request rate: a request's cost is only known from its answer
(a 1 KB patch costs ~10 RU, a batch of 15 ~150, a change-feed page depends on its size). So the bucket is spent
after the fact, by each request's reported charge, and may go into debt; a request waits *before* it is sent
until the debt is repaid at ``rate`` RU/s. Over a run the spent RU therefore never exceed
``rate × elapsed + burst`` plus the charges of the requests in flight at once (each sent when the bucket was out of
debt: up to ``stamp_concurrency`` stamps and a feed read), with ``burst`` = ``rate × burst_seconds``, default a tenth
of a second's worth.

Where the rate comes from:

* ``max_request_units_per_second`` (the cap), when set, is the highest it ever goes: with no 429 the drain runs at
  the cap, as it always did;
* **self-pacing** (additive increase, multiplicative decrease): a 429 means the container serves less than the
  drain asks, so the rate drops to :data:`DECREASE_FACTOR` × the current rate (at most once per
  :data:`DECREASE_INTERVAL_SECONDS`, so the 8 stamps throttled together count as one signal); unpaced until then,
  or paced at more than twice what it was served over the last :data:`SERVED_WINDOW_SECONDS`, it drops to
  :data:`DECREASE_FACTOR` × what it was served instead. While no 429 comes the rate climbs again by
  :data:`INCREASE_FRACTION` of the rate it dropped to, per second, up to the cap. With no cap and no 429 yet, the
  drain is not paced at all (``rate`` is ``None``). The rate settles just under what the container serves; the
  business writes sharing the container keep what is left.

Thread-safe: the concurrent stamp writers of one drain share one pacer. The clock and the sleep are injectable so
tests drive time by hand.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from airflow_chatter.errors import ConfigurationError

#: A debt this small is paid: float rounding must not leave a waiter sleeping for 1e-17 s, forever.
_PAID = 1e-6

#: Default burst, in seconds' worth of the rate.
DEFAULT_BURST_SECONDS = 0.1
#: A 429 sets the rate to this share of what the container served (or of the rate, when lower).
DECREASE_FACTOR = 0.9
#: 429s closer together than this are one signal: the requests in flight at once meet the same full second.
DECREASE_INTERVAL_SECONDS = 1.0
#: With no 429, the rate climbs by this share of the rate it last dropped to, per second.
INCREASE_FRACTION = 0.05
#: What the container served is measured over this trailing window.
SERVED_WINDOW_SECONDS = 2.0
#: The shortest span a served rate is measured over (a first 429 right after the first answer).
_MIN_SPAN_SECONDS = 0.05
#: The lowest self-paced rate: a container that serves next to nothing still gets asked now and then.
MIN_RATE = 1.0


class Pacer:
    """``cap`` request units per second at most (``None``: no cap), lower while the container answers 429.

    ``rate`` is the current pace (``None``: not paced); at most ``rate × burst_seconds`` is banked; starts full.
    """

    def __init__(
        self,
        cap: float | None = None,
        *,
        burst_seconds: float = DEFAULT_BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or not cap > 0):
            raise ConfigurationError("max_request_units_per_second", cap, "must be a positive number")
        self.cap = float(cap) if cap is not None else None
        self.rate: float | None = self.cap
        self._burst_seconds = burst_seconds
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.rate * burst_seconds if self.rate is not None else 0.0
        self._stamp = clock()
        self._served: deque[tuple[float, float]] = deque()
        self._first_served: float | None = None
        self._decreased_at: float | None = None
        self._step = 0.0  # RU/s added per second without a 429
        #: Seconds spent waiting for the pace so far (reported, not used for decisions).
        self.waited_seconds = 0.0

    def _refill(self, now: float) -> None:
        elapsed = now - self._stamp
        if elapsed > 0 and self.rate is not None:
            if self._step and (self.cap is None or self.rate < self.cap):
                self.rate += self._step * elapsed
                if self.cap is not None:
                    self.rate = min(self.rate, self.cap)
            self._tokens = min(self.rate * self._burst_seconds, self._tokens + elapsed * self.rate)
        self._stamp = now

    def wait(self) -> float:
        """Block until the bucket is out of debt; return the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                self._refill(self._clock())
                if self.rate is None or self._tokens >= -_PAID:
                    self.waited_seconds += waited
                    return waited
                delay = -self._tokens / self.rate
            self._sleep(delay)
            waited += delay

    def spend(self, request_units: float) -> None:
        """Take a measured charge (a request the container served) out of the bucket (it may go into debt)."""
        if request_units <= 0:
            return
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._tokens -= request_units
            self._served.append((now, request_units))
            if self._first_served is None:
                self._first_served = now

    def throttled(self) -> None:
        """The container answered 429: lower the rate toward what it served (once per decrease interval)."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            if self._decreased_at is not None and now - self._decreased_at < DECREASE_INTERVAL_SECONDS:
                return
            served = self._served_rate(now)
            base = self.rate
            if served and (base is None or base > 2 * served):
                base = served  # unpaced, or paced far above what the drain got: start from what it was served
            if base is None:
                return  # nothing served yet and no pace: nothing to lower from (the 429's retry-after waits)
            self.rate = max(MIN_RATE, base * DECREASE_FACTOR)
            self._step = self.rate * INCREASE_FRACTION
            self._tokens = min(self._tokens, self.rate * self._burst_seconds)
            self._decreased_at = now

    def _served_rate(self, now: float) -> float:
        while self._served and self._served[0][0] < now - SERVED_WINDOW_SECONDS:
            self._served.popleft()
        if not self._served or self._first_served is None:
            return 0.0
        # A drain younger than the window has served for less than the window: divide by what it has.
        span = max(min(SERVED_WINDOW_SECONDS, now - self._first_served), _MIN_SPAN_SECONDS)
        return sum(charge for _, charge in self._served) / span


__all__ = [
    "DECREASE_FACTOR",
    "DECREASE_INTERVAL_SECONDS",
    "DEFAULT_BURST_SECONDS",
    "INCREASE_FRACTION",
    "MIN_RATE",
    "SERVED_WINDOW_SECONDS",
    "Pacer",
]
