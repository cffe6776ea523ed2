"""Request units per drain, by kind, and the drain's pace (F-11).

A drain sees its containers through :class:`MeteredContainer`, one per container and kind of work:

* every call runs with a charge sink set for its thread (``airflow_chatter.ports.request_charges``), so the
  adapter's per-request ``response_hook`` adds that request's own charge to :class:`RequestUnits` under its kind
  (``feed`` for change-feed reads, ``stamps`` for status writes, ``leases`` for the lease container, ``other``
  for the rest: properties, feed-range listings);
* every call carries the source's ``request_priority`` (``airflow_chatter.ports.request_priority``; low by
  default, so the services writing to the container keep their throughput first);
* every call first waits for the drain's :class:`~airflow_chatter.drain.pacing.Pacer` (under the cap, and under
  what the container serves once it answers 429), and every charge is spent from it.

The 429s are retried by the one policy, ``ThrottleRetrying`` (``airflow_chatter.ports.throttle``), stacked over the
metering container with the drain's own :class:`~airflow_chatter.ports.throttle.ThrottleBudget` (held here): each
attempt is metered and paced, each 429 lowers the pace. The project's clients (``adapters/cosmos/client.py``) turn
the SDK's own 429 retries off, so every 429 is seen there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from typing_extensions import override

from airflow_chatter.drain.pacing import Pacer
from airflow_chatter.ports import DocumentContainer
from airflow_chatter.ports.delegating import DelegatingContainer
from airflow_chatter.ports.request_charges import charged_to
from airflow_chatter.ports.request_priority import LOW, RequestPriority, prioritized
from airflow_chatter.ports.throttle import ThrottleBudget, ThrottleLimits, ThrottleRetrying

FEED = "feed"
STAMPS = "stamps"
LEASES = "leases"
OTHER = "other"
KINDS = (FEED, STAMPS, LEASES, OTHER)

_T = TypeVar("_T")


class RequestUnits:
    """The charges of one drain, by kind, its pace and its 429 budget; thread-safe (the stamp writers share it).

    One per engine, :meth:`reset` when a drain starts (an engine drains its leases one after another); the pace it
    learned carries over to the next lease (the same container). ``clock`` and ``sleep`` (monotonic seconds) are
    the pacer's and the budget's, injectable for tests.
    """

    def __init__(
        self,
        limits: ThrottleLimits | None = None,
        *,
        cap: float | None = None,
        priority: RequestPriority = LOW,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._by_kind: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.priority = priority
        self.pacer = Pacer(cap, clock=clock, sleep=sleep)
        self.throttle = ThrottleBudget(
            limits or ThrottleLimits(), clock=clock, sleep=sleep, on_throttle=lambda: self.pacer.throttled()
        )

    def sink(self, kind: str) -> Callable[[float], None]:
        def add(charge: float) -> None:
            with self._lock:
                self._by_kind[kind] += charge
            self.pacer.spend(charge)

        return add

    def reset(self) -> None:
        """Start a new drain: zero the charges, the 429 count and the wait spent against the limits."""
        with self._lock:
            self._by_kind = dict.fromkeys(KINDS, 0.0)
        self.throttle.reset()

    def by_kind(self) -> dict[str, float]:
        with self._lock:
            return dict(self._by_kind)

    @property
    def total(self) -> float:
        with self._lock:
            return sum(self._by_kind.values())

    @property
    def throttled(self) -> int:
        """429s answered to this drain's requests."""
        return self.throttle.throttled

    @property
    def throttle_waited_seconds(self) -> float:
        """Wall-clock seconds this drain spent waiting on 429s (overlapping waits once)."""
        return self.throttle.waited_seconds

    @property
    def throttle_limit_reached(self) -> bool:
        return self.throttle.limit_reached

    @property
    def paced_rate(self) -> float | None:
        """The RU/s the drain is paced to now (``None``: not paced: no cap and no 429 yet)."""
        return self.pacer.rate

    def restart_throttle_wait(self) -> None:
        """A following drain's next poll: the wait window starts again (each poll is a run of its own, follow.py);
        the 429s counted so far stay in the summary."""
        self.throttle.served()

    def retrying(self, container: DocumentContainer, *, kind: str | None = None) -> DocumentContainer:
        """``container`` as the drain sees it: 429s retried within this drain's budget over each attempt metered."""
        return ThrottleRetrying(MeteredContainer(container, self, kind=kind), budget=self.throttle)


#: The kind a monitored container's request is charged to, by port method; every other request is ``other``.
_KIND_OF = {"read_change_feed": FEED, "patch": STAMPS, "execute_batch": STAMPS}


class MeteredContainer(DelegatingContainer):
    """A container whose every request is paced, sent at the drain's priority and charged to ``units`` (by kind).

    ``kind`` fixes the kind for every call (the lease container), or ``None`` to tell by operation (the monitored
    container: change-feed reads, stamps, other).
    """

    def __init__(self, inner: DocumentContainer, units: RequestUnits, *, kind: str | None = None) -> None:
        super().__init__(inner)
        self._units = units
        if kind is None:
            self._sinks = {k: units.sink(k) for k in (FEED, STAMPS, OTHER)}
        else:
            self._sinks = dict.fromkeys((FEED, STAMPS, OTHER), units.sink(kind))

    @override
    def forward(self, operation: str, call: Callable[[], _T]) -> _T:
        self._units.pacer.wait()
        with charged_to(self._sinks[_KIND_OF.get(operation, OTHER)]), prioritized(self._units.priority):
            return call()


__all__ = [
    "FEED",
    "KINDS",
    "LEASES",
    "OTHER",
    "STAMPS",
    "MeteredContainer",
    "RequestUnits",
]
