"""Request units per drain, by kind; 429s retried within limits; pacing under a cap (F-11).

A drain sees its containers through :class:`MeteredContainer`, one per container and kind of work:

* every call runs with a charge sink set for its thread (``airflow_chatter.request_charges``), so the adapter's
  per-request ``response_hook`` adds that request's own charge to :class:`RequestUnits` under its kind
  (``feed`` for change-feed reads, ``stamps`` for status writes, ``leases`` for the lease container, ``other``
  for the rest: properties, feed-range listings);
* with a :class:`~airflow_chatter.drain.pacing.TokenBucket` every call first waits until the drain is under its
  ``max_request_units_per_second``, and every charge is spent from the bucket;
* a 429 (``Throttled``) is retried after the server's ``retry-after`` (or a short back-off when it names none),
  counted, within :class:`ThrottleLimits` (retries per request, total seconds waited per drain, or per poll while
  following). Past them the 429 is raised as :class:`ThrottleLimitExceeded` (still a 429): the page it hit fails
  closed, the checkpoint stays at the last confirmed page, and the summary says the drain stopped on the throttle
  limit.

The project's clients (``adapters/cosmos/client.py``) turn the SDK's own 429 retries off, so every 429 is seen here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from typing_extensions import override

from airflow_chatter.delegating_container import DelegatingContainer
from airflow_chatter.drain.pacing import TokenBucket
from airflow_chatter.ports import DocumentContainer, Throttled
from airflow_chatter.request_charges import charged_to

FEED = "feed"
STAMPS = "stamps"
LEASES = "leases"
OTHER = "other"
KINDS = (FEED, STAMPS, LEASES, OTHER)

#: Back-off for a 429 that names no retry-after.
DEFAULT_RETRY_AFTER_SECONDS = 0.1
#: The 429 limits where neither the source nor its Cosmos connection sets one.
DEFAULT_MAX_THROTTLE_RETRIES = 9
DEFAULT_MAX_THROTTLE_WAIT_SECONDS = 30.0

_T = TypeVar("_T")


class ThrottleLimitExceeded(Throttled):
    """A 429 outlasted the retry limits: a drain stops at the page it hit, nothing lost; any other caller
    (``airflow_chatter.throttle_retry``) fails with it."""


@dataclass(frozen=True)
class ThrottleLimits:
    """``max_retries`` per request (0: none); ``max_wait_seconds`` in all per drain, or, for a following drain, per
    poll: from one poll after a wait to the next, the pages it finds included (``RequestUnits.restart_throttle_wait``).

    Set on the Cosmos connection (extras of the same names, the hook builds these) and on the source; the source's
    own values win (:meth:`overridden`), and what neither sets is the default, 9 retries and 30 s.
    """

    max_retries: int = DEFAULT_MAX_THROTTLE_RETRIES
    max_wait_seconds: float = DEFAULT_MAX_THROTTLE_WAIT_SECONDS

    def overridden(self, max_retries: int | None, max_wait_seconds: float | None) -> ThrottleLimits:
        """These limits with each value the source sets (not ``None``) in place of this one."""
        return ThrottleLimits(
            self.max_retries if max_retries is None else max_retries,
            self.max_wait_seconds if max_wait_seconds is None else max_wait_seconds,
        )


class RequestUnits:
    """The charges of one drain, by kind, and its 429s; thread-safe (the stamp writers share it).

    One per engine, :meth:`reset` when a drain starts (an engine drains its leases one after another).
    """

    def __init__(self, bucket: TokenBucket | None = None) -> None:
        self._lock = threading.Lock()
        self._by_kind: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.bucket = bucket
        self.throttled = 0
        self.throttle_waited_seconds = 0.0
        self.throttle_limit_reached = False

    def sink(self, kind: str) -> Callable[[float], None]:
        def add(charge: float) -> None:
            with self._lock:
                self._by_kind[kind] += charge
            bucket = self.bucket
            if bucket is not None:
                bucket.spend(charge)

        return add

    def reset(self) -> None:
        """Start a new drain: zero the charges, the 429 count and the wait spent against the limits."""
        with self._lock:
            self._by_kind = dict.fromkeys(KINDS, 0.0)
            self.throttled = 0
            self.throttle_waited_seconds = 0.0
            self.throttle_limit_reached = False

    def by_kind(self) -> dict[str, float]:
        with self._lock:
            return dict(self._by_kind)

    @property
    def total(self) -> float:
        with self._lock:
            return sum(self._by_kind.values())

    def restart_throttle_wait(self) -> None:
        """A following drain's next poll: the wait spent against ``max_throttle_wait_seconds`` starts from zero
        (each poll is a run of its own, follow.py); the 429s counted so far stay in the summary."""
        with self._lock:
            self.throttle_waited_seconds = 0.0

    def count_throttle(self, waited: float) -> None:
        with self._lock:
            self.throttled += 1
            self.throttle_waited_seconds += waited


#: The kind a monitored container's request is charged to, by port method; every other request is ``other``.
_KIND_OF = {"read_change_feed": FEED, "patch": STAMPS, "execute_batch": STAMPS}


class MeteredContainer(DelegatingContainer):
    """A container whose every request is charged to ``units`` (by kind), paced, and retried on 429.

    ``kind`` fixes the kind for every call (the lease container), or ``None`` to tell by operation (the monitored
    container: change-feed reads, stamps, other). ``sleep`` is injectable for tests.
    """

    def __init__(
        self,
        inner: DocumentContainer,
        units: RequestUnits,
        limits: ThrottleLimits,
        *,
        kind: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(inner)
        self._units = units
        self._limits = limits
        self._sleep = sleep
        if kind is None:
            self._sinks = {k: units.sink(k) for k in (FEED, STAMPS, OTHER)}
        else:
            self._sinks = dict.fromkeys((FEED, STAMPS, OTHER), units.sink(kind))

    def _call(self, kind: str, call: Callable[[], _T]) -> _T:
        units = self._units
        retries = 0
        while True:
            if units.bucket is not None:
                units.bucket.wait()
            try:
                with charged_to(self._sinks[kind]):
                    return call()
            except Throttled as throttled:
                delay = (
                    throttled.retry_after_ms / 1000.0
                    if throttled.retry_after_ms is not None
                    else DEFAULT_RETRY_AFTER_SECONDS
                )
                if (
                    retries >= self._limits.max_retries
                    or units.throttle_waited_seconds + delay > self._limits.max_wait_seconds
                ):
                    units.count_throttle(0.0)
                    units.throttle_limit_reached = True
                    raise ThrottleLimitExceeded(
                        f"request throttled (429) past the retry limits ({retries} retries of max_throttle_retries="
                        f"{self._limits.max_retries}, {units.throttle_waited_seconds:.1f}s waited of "
                        f"max_throttle_wait_seconds={self._limits.max_wait_seconds}; set on the source or its Cosmos "
                        f"connection); the drain stops at this page, nothing lost: {throttled}",
                        retry_after_ms=throttled.retry_after_ms,
                    ) from throttled
                units.count_throttle(delay)
                retries += 1
                self._sleep(delay)

    @override
    def forward(self, operation: str, call: Callable[[], _T]) -> _T:
        return self._call(_KIND_OF.get(operation, OTHER), call)


__all__ = [
    "DEFAULT_MAX_THROTTLE_RETRIES",
    "DEFAULT_MAX_THROTTLE_WAIT_SECONDS",
    "FEED",
    "KINDS",
    "LEASES",
    "OTHER",
    "STAMPS",
    "MeteredContainer",
    "RequestUnits",
    "ThrottleLimitExceeded",
    "ThrottleLimits",
]
