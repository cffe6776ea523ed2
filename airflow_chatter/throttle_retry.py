"""``ThrottleRetrying``: a container that retries 429s within bounds, for the callers that are not a drain.

The project's Cosmos clients hand every 429 to their caller (F-11), so that the drain counts and limits them
(``drain/request_units.py``). A caller with no 429 handling of its own would fail on the first one where the SDK
used to retry it: the receiver's Inbox Markers and Unit of Work (``ChatterInboxHook``), the idempotent HTTP hook's
store, the deferrable sensor's trigger. They see their containers through this wrapper instead: a 429 is retried
after the server's retry-after (0.1 s when it names none), at most ``max_retries`` times and ``max_wait_seconds``
of waiting per request, the Cosmos connection's ``max_throttle_retries`` / ``max_throttle_wait_seconds`` (default
9 and 30 s, what the SDK did by itself). Past them the 429 is raised as ``ThrottleLimitExceeded`` (still a
``Throttled``) naming both limits. A 429 means the request was not executed, so every request may be retried.

Nothing here imports an SDK or Airflow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type
from typing_extensions import override

from airflow_chatter.delegating_container import DelegatingContainer
from airflow_chatter.drain.request_units import DEFAULT_RETRY_AFTER_SECONDS, ThrottleLimitExceeded, ThrottleLimits
from airflow_chatter.ports import DocumentContainer, Throttled

_T = TypeVar("_T")


def _delay(state: RetryCallState) -> float:
    """The retry-after of the 429 the last attempt got, in seconds."""
    error = state.outcome.exception() if state.outcome is not None else None
    after = error.retry_after_ms if isinstance(error, Throttled) else None
    return after / 1000.0 if after is not None else DEFAULT_RETRY_AFTER_SECONDS


class ThrottleRetrying(DelegatingContainer):
    """Every request to ``inner`` retried on 429 within ``limits`` (per request); see the module docstring."""

    def __init__(
        self,
        inner: DocumentContainer,
        limits: ThrottleLimits | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(inner)
        self.limits = limits or ThrottleLimits()
        self._sleep = sleep

    def _stop(self, state: RetryCallState) -> bool:
        limits = self.limits
        return state.attempt_number > limits.max_retries or state.idle_for + _delay(state) > limits.max_wait_seconds

    @override
    def forward(self, operation: str, call: Callable[[], _T]) -> _T:
        retrying = Retrying(
            retry=retry_if_exception_type(Throttled),
            wait=_delay,
            stop=self._stop,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(call)
        except Throttled as throttled:
            limits = self.limits
            raise ThrottleLimitExceeded(
                f"{operation} throttled (429) past the retry limits (max_throttle_retries={limits.max_retries}, "
                f"max_throttle_wait_seconds={limits.max_wait_seconds}; set on the Cosmos connection): {throttled}",
                retry_after_ms=throttled.retry_after_ms,
            ) from throttled


__all__ = ["ThrottleRetrying"]
