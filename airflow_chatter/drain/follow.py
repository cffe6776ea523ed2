"""Follow mode: a drain that, once caught up, keeps its lease and polls its feed range for new pages.

A short drain returns at its first empty page, so its latency is the scheduler's. A following drain stays in the
engine's own page loop (``DrainEngine._drain_feed``): every page is still read, gated, published, stamped and
checkpointed exactly as a short drain does it; only what happens *between* pages lives here:

* at an empty page it waits ``follow_poll_seconds`` and reads again, advancing the continuation in memory (an empty
  page has nothing to confirm) and writing the lease only when it needs renewing (F-04), so an idle lease costs one
  feed read per poll and one lease write per half lease duration;
* before the first page after an idle wait is published it re-reads its lease (one point read) and stops with
  ``LeaseLostError`` when another drain took it meanwhile, so a stolen lease is noticed before the next publish;
* while its lease is suspended (SUS-04) it sleeps until the window's probe is due, renewing the lease, publishing
  nothing and reading nothing in between;
* it stops at a page boundary when ``should_stop`` says so (SIGTERM: the Airflow operator wires it), at
  ``max_seconds`` / ``max_documents``, or when its range splits (the engine hands over to the children, F-04).

``Follow.none()`` is the short drain: every hook answers "stop", so the engine behaves as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_chatter.drain.budget import DrainBudget
from airflow_chatter.drain.leases import Lease, LeaseLostError, LeaseStore
from airflow_chatter.drain.suspension import WINDOW, SuspensionState

if TYPE_CHECKING:
    from airflow_chatter.drain.request_units import RequestUnits
    from airflow_chatter.drain.summary import DrainCounts
    from airflow_chatter.drain.telemetry import DrainTelemetry

#: Longest single sleep: a stop request (a flag set by a signal handler) is seen within this.
_SLICE_SECONDS = 0.05
#: Lease document field the following drain keeps its live counts under (for the UI).
FOLLOW_FIELD = "follow"


class StopRequest:
    """A stop asked for from outside the drain: a signal handler, ``on_kill``, another thread.

    Setting it only assigns a flag, so it is safe inside a signal handler (no lock is taken there); the follow loop
    checks it between pages and every ``_SLICE_SECONDS`` while it waits.
    """

    def __init__(self) -> None:
        self._requested = False

    def request(self, *_signal: object) -> None:
        """Ask the drain to stop at its next page boundary (usable as a signal handler)."""
        self._requested = True

    def __call__(self) -> bool:
        return self._requested

    @property
    def requested(self) -> bool:
        return self()


@dataclass
class Follow:
    """How one drain follows its lease (``poll_seconds``; ``None``: it does not) and when it stops.

    ``should_stop`` is polled at page boundaries and while waiting; ``sleep`` and ``monotonic`` (the waits' clock)
    are injectable for tests.
    """

    poll_seconds: float | None = None
    should_stop: Callable[[], bool] = lambda: False
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    _idle: bool = False
    _units: RequestUnits | None = None
    _telemetry: DrainTelemetry | None = None
    _units_at_poll: float = 0.0

    @classmethod
    def none(cls) -> Follow:
        """A short drain: return at the first empty page (still stopping early when asked)."""
        return cls()

    @property
    def following(self) -> bool:
        return self.poll_seconds is not None

    def stop_requested(self) -> bool:
        return bool(self.should_stop())

    def caught_up(
        self, store: LeaseStore, lease: Lease, continuation: str, tally: DrainCounts, budget: DrainBudget
    ) -> Lease | None:
        """An empty page was read: count the poll, wait, and return the lease to read on with (``None``: stop).

        The continuation advances in memory; the lease is written only when it needs renewing (a checkpoint, so the
        continuation's age stays honest), carrying the live counts under ``follow`` for the UI.
        """
        if not self.following:
            return None
        self._poll(tally, lease, empty=True)
        if budget.exhausted(tally.documents) or self.stop_requested():
            return None
        lease = _with_counts(replace(lease, continuation=continuation), tally)
        if store.needs_renewal(lease):
            lease = store.checkpoint(lease, continuation, lease.suspension)
        assert self.poll_seconds is not None
        # A stop or the budget ending the wait is seen by the engine's loop; the lease returned is the one last
        # written (its continuation, advanced in memory, is written with the release).
        self._wait(min(self.poll_seconds, _renewal_margin(lease, store.now())), budget)
        self._idle = True
        return lease

    def mark_units(self, units: RequestUnits, telemetry: DrainTelemetry | None = None) -> None:
        """The drain's meter, read as a poll starts (what an empty poll cost is measured from), and its instruments."""
        self._units = units
        self._units_at_poll = units.total
        self._telemetry = telemetry

    def _poll(self, tally: DrainCounts, lease: Lease, *, empty: bool) -> None:
        """Count one poll, in the summary and the instruments (the one place both are kept)."""
        tally.polls += 1
        tally.last_poll_at = datetime.now(UTC).isoformat()
        spent = round(self._spent() - self._units_at_poll, 2) if empty else 0.0
        if empty:
            tally.empty_polls += 1
            tally.empty_poll_request_units = round(tally.empty_poll_request_units + spent, 2)
        if self._telemetry is not None:
            self._telemetry.record_poll(tally.source_identity or "", lease.token, empty=empty, request_units=spent)

    def _spent(self) -> float:
        return self._units.total if self._units is not None else 0.0

    def before_publish(self, store: LeaseStore, lease: Lease, tally: DrainCounts, documents: bool) -> None:
        """After an idle wait, confirm the lease is still ours before a new page is published (one point read)."""
        if not self._idle or not documents:
            return
        self._idle = False
        self._poll(tally, lease, empty=False)
        current = store.find(lease.id)
        if current is None or current.etag != lease.etag:
            raise LeaseLostError(lease.id, "publishing a page it read while following")

    def suspended(self, lease: Lease, budget: DrainBudget, now: datetime) -> bool:
        """A suspended lease refused the page: sleep toward its probe; ``False``: stop (a short drain, or asked to).

        Sleeps at most half of what is left of the lease per call, so the engine's loop renews it in time.
        """
        state: SuspensionState = lease.suspension
        if not self.following or state.armed_at is None:
            return False
        due = max(0.0, (state.armed_at + WINDOW - now).total_seconds())
        self._idle = True
        return self._wait(min(due + _SLICE_SECONDS, _renewal_margin(lease, now)), budget)

    def _wait(self, seconds: float, budget: DrainBudget) -> bool:
        """Sleep ``seconds`` in slices, bounded by the budget; ``False`` if a stop came or the time ran out."""
        end = self.monotonic() + seconds
        while (left := end - self.monotonic()) > 0:
            if self.stop_requested() or budget.exhausted(0):
                return False
            self.sleep(min(_SLICE_SECONDS, left))
        return not self.stop_requested() and not budget.exhausted(0)


def _renewal_margin(lease: Lease, now: datetime) -> float:
    """Seconds a wait may take and still leave the lease renewable: half of what is left of it (at least a slice)."""
    if lease.expires_at is None:
        return _SLICE_SECONDS
    return max(_SLICE_SECONDS, (lease.expires_at - now).total_seconds() / 2)


def _with_counts(lease: Lease, tally: DrainCounts) -> Lease:
    """``lease`` whose next write carries the live counts a UI shows for a following drain."""
    counts = {
        "last_poll_at": tally.last_poll_at,
        "polls": tally.polls,
        "empty_polls": tally.empty_polls,
        "published": tally.published,
        "documents": tally.documents,
    }
    return replace(lease, document={**lease.document, FOLLOW_FIELD: counts})


__all__ = ["FOLLOW_FIELD", "Follow", "StopRequest"]
