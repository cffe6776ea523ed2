"""The one 429 policy: a throttled request is retried after the server's retry-after, within a budget of time (F-11).

The project's Cosmos clients hand every 429 to their caller (``adapters/cosmos/client.py``), so that it is counted
and bounded here, once, for every caller. :class:`ThrottleRetrying` wraps a container: the drain stacks it over its
metering container (``drain/request_units.py``: each attempt charged and paced), and the callers that are not a drain
(the receiver's Inbox Markers and Unit of Work, the idempotent HTTP hook's store, the deferrable sensor's trigger)
see their containers through it as well. A 429 means the request was not executed, so every request may be retried.

What the retries spend is a :class:`ThrottleBudget`, injected:

* **time, not a sum.** The budget counts the wall-clock time its requests spent waiting: while any of them waits,
  the clock runs once, however many wait at once (the up to 8 stamp batches of a drain in flight together);
* **progress restarts it.** A request the container served restarts the window (:meth:`ThrottleBudget.served`):
  ``max_throttle_wait_seconds`` bounds the waiting *since the container last served one of the budget's requests*.
  A drain shares one budget across its requests, so a drain that progresses, however slowly, never runs out; only a
  container that serves nothing for the whole ``max_throttle_wait_seconds`` ends it with
  :class:`ThrottleLimitExceeded`, whose message names the setting to change and the bound that ran out;
* **a drain's bound is time alone.** Where neither the source nor its Cosmos connection sets
  ``max_throttle_retries``, a drain's budget counts no retries: with retry-afters of about 1 s, 9 retries would end a
  drain after ~10 s of a container serving nothing, well before its 30 s of wait. A ``max_throttle_retries`` set
  explicitly still bounds the 429s one request meets in that window.

Any other caller gets a fresh budget per request (:meth:`ThrottleLimits.per_request`): what the SDK's own retry did,
per request, 9 retries and 30 s where the connection sets neither.

Nothing here imports an SDK or Airflow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type
from typing_extensions import override

from airflow_chatter.ports.container import DocumentContainer, Throttled
from airflow_chatter.ports.delegating import DelegatingContainer

#: Back-off for a 429 that names no retry-after.
DEFAULT_RETRY_AFTER_SECONDS = 0.1
#: The shortest wait for a 429: a drain counts no retries by default, so a retry-after of 0 must still spend time,
#: or a container that serves nothing would never run the wait budget out.
MIN_RETRY_AFTER_SECONDS = 0.001
#: 429s one request may meet, per request, for a caller that is not a drain, where its connection sets no limit
#: (a drain's default bound is time alone: :class:`ThrottleLimits`).
DEFAULT_MAX_THROTTLE_RETRIES = 9
#: Seconds of 429 waits without service, where neither the source nor its Cosmos connection sets a limit.
DEFAULT_MAX_THROTTLE_WAIT_SECONDS = 30.0

_T = TypeVar("_T")


class ThrottleLimitExceeded(Throttled):
    """The container served none of a budget's requests for the whole wait budget (or, where ``max_throttle_retries``
    is set, one request met more 429s meanwhile): a drain stops at the page it hit, nothing lost; any other caller
    fails with it."""


@dataclass(frozen=True)
class ThrottleLimits:
    """``max_retries``: 429s one request may meet since the container last served the budget (0: none; ``None``:
    not set, no count); ``max_wait_seconds``: wall-clock seconds the budget may spend waiting on 429s since then.

    Set on the Cosmos connection (extras of the same names, the hook builds these) and on the source; the source's
    own values win (:meth:`overridden`). What neither sets: 30 s, and no retry count for a drain (its bound is time
    alone); a caller that is not a drain takes :meth:`per_request`, 9 retries per request.
    """

    max_retries: int | None = None
    max_wait_seconds: float = DEFAULT_MAX_THROTTLE_WAIT_SECONDS

    def overridden(self, max_retries: int | None, max_wait_seconds: float | None) -> ThrottleLimits:
        """These limits with each value the source sets (not ``None``) in place of this one."""
        return ThrottleLimits(
            self.max_retries if max_retries is None else max_retries,
            self.max_wait_seconds if max_wait_seconds is None else max_wait_seconds,
        )

    def per_request(self) -> ThrottleLimits:
        """These limits for a budget of one request (a caller that is not a drain): an unset ``max_retries`` is
        :data:`DEFAULT_MAX_THROTTLE_RETRIES`, what the SDK's own retry allowed a request."""
        return self.overridden(DEFAULT_MAX_THROTTLE_RETRIES, None) if self.max_retries is None else self


class ThrottleBudget:
    """The 429 waits of one caller (a drain, or one request), as wall-clock time; thread-safe.

    ``clock`` (monotonic seconds) and ``sleep`` are injectable, so a test drives time by hand. ``on_throttle`` is
    told of every 429 (the drain's self-pacing lowers its rate there, ``drain/pacing.py``).
    """

    def __init__(
        self,
        limits: ThrottleLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_throttle: Callable[[], None] | None = None,
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.sleep = sleep
        self._on_throttle = on_throttle
        self._lock = threading.Lock()
        self._waiting = 0
        self._since: float | None = None  # when the current stretch of waiting began (or the window, inside it)
        self._waited = 0.0  # closed stretches, in all
        self._window = 0.0  # closed stretches since the container last served a request
        #: Counts the requests the container served; a request's retries are counted since it last changed.
        self.served_count = 0
        #: 429s answered to the budget's requests.
        self.throttled = 0
        #: Whether a request was refused for the limits (``ThrottleLimitExceeded``).
        self.limit_reached = False

    def reset(self) -> None:
        """Start over: a new drain (nothing waited, nothing counted)."""
        with self._lock:
            self._waited = self._window = 0.0
            self._since = self.clock() if self._waiting else None
            self.throttled = 0
            self.limit_reached = False

    def served(self) -> None:
        """The container served one of the budget's requests: the wait window starts again."""
        with self._lock:
            self.served_count += 1
            if self._since is not None:
                now = self.clock()
                self._waited += now - self._since
                self._since = now
            self._window = 0.0

    @property
    def waited_seconds(self) -> float:
        """Wall-clock seconds during which at least one request waited on a 429, in all."""
        with self._lock:
            return self._waited + self._open()

    @property
    def window_seconds(self) -> float:
        """Wall-clock seconds waited on 429s since the container last served one of the budget's requests."""
        with self._lock:
            return self._window + self._open()

    def admits(self, retries: int, delay: float) -> bool:
        """Count a 429; whether its request may wait ``delay`` and retry, having been retried ``retries`` times."""
        with self._lock:
            self.throttled += 1
            counted = self.limits.max_retries is None or retries < self.limits.max_retries
            admitted = counted and self._window + self._open() + delay <= self.limits.max_wait_seconds
            if not admitted:
                self.limit_reached = True
        if self._on_throttle is not None:
            self._on_throttle()
        return admitted

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds`` for a 429; the budget's clock runs once while any of its requests waits."""
        with self._lock:
            if self._waiting == 0:
                self._since = self.clock()
            self._waiting += 1
        try:
            self.sleep(seconds)
        finally:
            with self._lock:
                self._waiting -= 1
                if self._waiting == 0 and self._since is not None:
                    stretch = self.clock() - self._since
                    self._waited += stretch
                    self._window += stretch
                    self._since = None

    def _open(self) -> float:
        return self.clock() - self._since if self._since is not None else 0.0


def _delay(state: RetryCallState) -> float:
    """The retry-after of the 429 the last attempt got, in seconds."""
    error = state.outcome.exception() if state.outcome is not None else None
    after = error.retry_after_ms if isinstance(error, Throttled) else None
    return max(after / 1000.0, MIN_RETRY_AFTER_SECONDS) if after is not None else DEFAULT_RETRY_AFTER_SECONDS


def _exceeded(operation: str, limits: ThrottleLimits, retries: int, budget: ThrottleBudget) -> str:
    """Why a 429 was not retried, naming the setting to change."""
    if limits.max_retries is not None and retries >= limits.max_retries:
        why = (
            f"{operation} met {retries + 1} 429s in a row while the container served nothing else "
            f"(max_throttle_retries={limits.max_retries}): raise max_throttle_retries"
        )
    else:
        why = (
            f"the container served none of the requests for {budget.window_seconds:.1f}s of 429 waits, "
            f"{operation} included (max_throttle_wait_seconds={limits.max_wait_seconds}): raise "
            "max_throttle_wait_seconds"
        )
    return (
        f"throttled (429): {why} on the source or its Cosmos connection, or the container's provisioned RU/s; "
        "a drain stops at this page, nothing lost"
    )


class ThrottleRetrying(DelegatingContainer):
    """Every request to ``inner`` retried on 429 within ``budget`` (shared), or within ``limits`` per request
    (:meth:`ThrottleLimits.per_request`: an unset retry limit is 9).

    ``sleep`` and ``clock`` serve the per-request budgets; a shared budget carries its own.
    """

    def __init__(
        self,
        inner: DocumentContainer,
        limits: ThrottleLimits | None = None,
        *,
        budget: ThrottleBudget | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(inner)
        self.limits = budget.limits if budget is not None else (limits or ThrottleLimits()).per_request()
        self.budget = budget
        self._sleep = sleep
        self._clock = clock

    @override
    def forward(self, operation: str, call: Callable[[], _T]) -> _T:
        budget = self.budget or ThrottleBudget(self.limits, clock=self._clock, sleep=self._sleep)
        retries = [0, budget.served_count]  # this request's retries, since the container last served the budget

        def stop(state: RetryCallState) -> bool:
            if budget.served_count != retries[1]:
                retries[:] = [0, budget.served_count]
            if not budget.admits(retries[0], _delay(state)):
                return True
            retries[0] += 1
            return False

        retrying = Retrying(
            retry=retry_if_exception_type(Throttled), wait=_delay, stop=stop, sleep=budget.wait, reraise=True
        )
        try:
            result = retrying(call)
        except Throttled as throttled:
            raise ThrottleLimitExceeded(
                _exceeded(operation, self.limits, retries[0], budget), retry_after_ms=throttled.retry_after_ms
            ) from throttled
        budget.served()
        return result


__all__ = [
    "DEFAULT_MAX_THROTTLE_RETRIES",
    "DEFAULT_MAX_THROTTLE_WAIT_SECONDS",
    "DEFAULT_RETRY_AFTER_SECONDS",
    "MIN_RETRY_AFTER_SECONDS",
    "ThrottleBudget",
    "ThrottleLimitExceeded",
    "ThrottleLimits",
    "ThrottleRetrying",
]
