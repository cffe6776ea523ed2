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
* each poll after a wait is a run of its own for ``max_throttle_wait_seconds`` (F-11), as a short drain's run is, and
  an empty poll is charged what it cost: its feed read and the renewal it wrote (``empty_poll_request_units``);
* it stops at a page boundary when ``should_stop`` says so (SIGTERM: the Airflow operator wires it), at
  ``max_seconds`` / ``max_documents``, or when its range splits (the engine hands over to the children, F-04).

``Follow.none()`` is the short drain: every hook answers "stop", so the engine behaves as it always did.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, StrictStr, ValidationError, WrapValidator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

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
#: The window of the lease's ``published_last_minute``.
_MINUTE_SECONDS = 60.0


def _unknown_if_invalid(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """A value of the wrong type reads as unknown (``None``), never as a value it is not."""
    try:
        return handler(value)
    except ValidationError:
        return None


_Int = Annotated[StrictInt | None, WrapValidator(_unknown_if_invalid)]
_Float = Annotated[StrictFloat | None, WrapValidator(_unknown_if_invalid)]
_Str = Annotated[StrictStr | None, WrapValidator(_unknown_if_invalid)]


class FollowCounts(BaseModel):
    """The live counts a following drain keeps on its lease (``FOLLOW_FIELD``) for the monitoring page: written
    with the lease, read back with ``model_validate`` (a field of the wrong type reads as ``None``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    owner: _Str = None
    last_poll_at: _Str = None
    polls: _Int = None
    empty_polls: _Int = None
    published: _Int = None
    documents: _Int = None
    published_last_minute: _Int = None
    lag_seconds: _Float = None


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
    #: (monotonic second, published so far) at most once a second over the last minute: published in the last minute.
    _published_at: deque[tuple[float, int]] = field(default_factory=deque)
    _lag_seconds: float | None = None

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
        continuation's age stays honest), carrying the live counts under ``follow`` for the UI. What the poll cost
        (its feed read and that renewal) is charged to it once both are done.
        """
        if not self.following:
            return None
        self._count_poll(tally, store, empty=True)
        if budget.exhausted(tally.documents) or self.stop_requested():
            self._charge_poll(tally, lease, empty=True)
            return None
        lease = self.with_counts(replace(lease, continuation=continuation), tally, store)
        if store.needs_renewal(lease):
            lease = store.checkpoint(lease, continuation, lease.suspension)
        self._charge_poll(tally, lease, empty=True)
        assert self.poll_seconds is not None
        # A stop or the budget ending the wait is seen by the engine's loop; the lease returned is the one last
        # written (its continuation, advanced in memory, is written with the release).
        self._wait(min(self.poll_seconds, _renewal_margin(lease, store.now())), budget)
        self._idle = True
        self._next_poll()
        return lease

    def with_counts(self, lease: Lease, tally: DrainCounts, store: LeaseStore) -> Lease:
        """``lease`` whose next write carries the live counts a UI shows for a following drain (a short drain's
        lease, unchanged): the poll counts, what was published in the last minute, the last document's lag, and
        the follower's owner name, so a reader tells a live follower from a lease another drain took since."""
        if not self.following:
            return lease
        now = self.monotonic()
        minute = self._published_at
        if not minute or now - minute[-1][0] >= 1.0:
            minute.append((now, tally.published))
        while minute and now - minute[0][0] > _MINUTE_SECONDS:
            minute.popleft()
        counts = FollowCounts(
            owner=store.owner,
            # Written right after a change-feed read (a renewal after an empty poll, a checkpoint after a page).
            last_poll_at=store.now().isoformat(),
            polls=tally.polls,
            empty_polls=tally.empty_polls,
            published=tally.published,
            documents=tally.documents,
            published_last_minute=tally.published - (minute[0][1] if minute else tally.published),
            lag_seconds=None if self._lag_seconds is None else round(self._lag_seconds, 3),
        )
        return replace(lease, document={**lease.document, FOLLOW_FIELD: counts.model_dump()})

    def admitted(self, lag_seconds: float) -> None:
        """A document was admitted ``lag_seconds`` after it was written (MET-01): the lag the UI shows."""
        self._lag_seconds = lag_seconds

    def mark_units(self, units: RequestUnits, telemetry: DrainTelemetry | None = None) -> None:
        """The drain's meter, read as a poll starts (what an empty poll cost is measured from), and its instruments."""
        self._units = units
        self._units_at_poll = units.total
        self._telemetry = telemetry
        if self.following and not self._published_at:
            self._published_at.append((self.monotonic(), 0))  # the drain starts: nothing published yet

    def _count_poll(self, tally: DrainCounts, store: LeaseStore, *, empty: bool) -> None:
        """Count one poll in the summary (what the lease's live counts show)."""
        tally.polls += 1
        tally.last_poll_at = store.now().isoformat()
        if empty:
            tally.empty_polls += 1

    def _charge_poll(self, tally: DrainCounts, lease: Lease, *, empty: bool) -> None:
        """What the poll cost since it started (``mark_units``), in the summary and the instruments (the one place
        both are kept): an empty poll's feed read and the lease renewal it wrote."""
        spent = round(self._spent() - self._units_at_poll, 2) if empty else 0.0
        if empty:
            tally.empty_poll_request_units = round(tally.empty_poll_request_units + spent, 2)
        if self._telemetry is not None:
            self._telemetry.record_poll(tally.source_identity or "", lease.token, empty=empty, request_units=spent)

    def _next_poll(self) -> None:
        """F-11: each poll after a wait is a run of its own for ``max_throttle_wait_seconds``, as a short drain's
        run is: the 429 waits of the polls before it do not add up over the hours a drain follows."""
        if self._units is not None:
            self._units.restart_throttle_wait()

    def _spent(self) -> float:
        return self._units.total if self._units is not None else 0.0

    def before_publish(self, store: LeaseStore, lease: Lease, tally: DrainCounts, documents: bool) -> None:
        """After an idle wait, confirm the lease is still ours before a new page is published (one point read)."""
        if not self._idle or not documents:
            return
        self._idle = False
        self._count_poll(tally, store, empty=False)
        self._charge_poll(tally, lease, empty=False)
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
        if not self._wait(min(due + _SLICE_SECONDS, _renewal_margin(lease, now)), budget):
            return False
        self._next_poll()
        return True

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


__all__ = ["FOLLOW_FIELD", "Follow", "FollowCounts", "StopRequest"]
