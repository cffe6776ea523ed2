"""F-11: a drain on a busy container. Its 429 budget is wall-clock time (overlapping waits once), a drain that
progresses never fails on 429s, and only a container that serves nothing for the whole ``max_throttle_wait_seconds``
stops it, naming the setting: time alone, unless the user sets ``max_throttle_retries``. Time is injected: it moves
only when the drain sleeps."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_chatter.adapters.memory import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import OperationCall, fail
from airflow_chatter.drain.telemetry import ATTR_SOURCE_IDENTITY, PACED_RATE, THROTTLE_WAIT, THROTTLED
from airflow_chatter.ports import BatchOperationResult, ChangeFeedPage, FeedRange, PartitionKey, Throttled
from airflow_chatter.ports.request_charges import report
from airflow_chatter.ports.throttle import ThrottleLimitExceeded, ThrottleLimits
from airflow_chatter.testing.handlers import first_of

from ._drain_support import Rig, outbox_doc


class Time:
    """Monotonic seconds that move only when the drain sleeps (thread-safe: the stamp lanes sleep too)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def clock(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def _seed(rig: Rig, count: int, tenants: int, first: int = 0) -> None:
    rig.seed(*(outbox_doc(f"m-{i}", f"t{i % tenants}") for i in range(first, first + count)))


def _statuses(rig: Rig) -> set[str]:
    return {doc["status"] for doc in rig.monitored.query("SELECT * FROM c WHERE IS_DEFINED(c.status)")}


def test_f11_eight_stamp_batches_throttled_at_once_spend_the_wait_budget_once_not_eight_times() -> None:
    """Eight stamp batches in flight each get a 429 of 1 s and wait it out together: the drain waited 1 s of wall
    clock, which its 2 s budget allows (the old sum, 8 s, stopped the drain and failed its page)."""
    rig = Rig()
    _seed(rig, 16, tenants=8)  # one page: 8 partition keys, a batch of 2 each
    time = Time()
    # The eight 1 s waits overlap: each lane sleeps until all eight sleep, then the clock moves 1 s once.
    together = threading.Barrier(8, action=lambda: time.sleep(1.0), timeout=10)

    def sleep(seconds: float) -> None:
        together.wait() if seconds == 1.0 else time.sleep(seconds)

    rig.monitored.handler = first_of(
        rig.monitored.handler, fail("execute_batch", error=Throttled("busy", retry_after_ms=1000), times=8)
    )
    engine = rig.engine(
        stamp_mode="batched", stamp_concurrency=8, max_throttle_wait_seconds=2.0, timing=(time.clock, sleep)
    )
    summary = rig.drain(engine)
    summary.raise_for_error()
    assert (summary.delivered, summary.confirmation_failures) == (16, 0)
    assert summary.throttled == 8, "every 429 is counted"
    assert summary.throttle_waited_seconds == pytest.approx(1.0), "eight overlapping 1 s waits are 1 s of waiting"
    assert summary.to_dict()["throttle_waited_seconds"] == pytest.approx(1.0)


def _every_other_request_throttled(rig: Rig, retry_after_ms: int) -> None:
    """Every request of the monitored container answers 429 once before it is served."""

    def throttle(call: OperationCall) -> BaseException | None:
        if call.applied or call.number % 2 == 0:
            return None
        return Throttled("busy", retry_after_ms=retry_after_ms)

    rig.monitored.handler = throttle


def test_f11_a_drain_that_progresses_never_fails_on_429s_however_long_it_waits_in_all() -> None:
    """A busy container (each request served after one 429 of 0.4 s): the drain waits far longer in all than its 1 s
    budget, but never 1 s without the container serving it, so it delivers everything and reports the wait."""
    rig = Rig()
    _seed(rig, 20, tenants=1)
    time = Time()
    engine = rig.engine(
        max_batch_size=2, stamp_mode="batched", max_throttle_wait_seconds=1.0, timing=(time.clock, time.sleep)
    )
    _every_other_request_throttled(rig, 400)
    summary = rig.drain(engine)
    summary.raise_for_error()
    rig.monitored.handler = None
    assert summary.delivered == 20 and _statuses(rig) == {"delivered"}
    assert summary.throttled >= 20 and not summary.throttle_limit_reached
    assert summary.throttle_waited_seconds == pytest.approx(0.4 * summary.throttled), "waited, one at a time"
    assert summary.throttle_waited_seconds > 1.0, "the budget bounds waiting without progress, not waiting in all"
    assert f"throttled={summary.throttled} throttle_waited={summary.throttle_waited_seconds:.1f}s" in (
        summary.log_line()
    )


def test_f11_a_container_that_serves_nothing_for_the_whole_wait_budget_stops_the_drain_naming_the_setting() -> None:
    rig = Rig()
    _seed(rig, 4, tenants=1)
    time = Time()
    engine = rig.engine(max_throttle_wait_seconds=1.0, max_throttle_retries=100, timing=(time.clock, time.sleep))
    (lease,) = engine.ensure_leases()
    rig.monitored.handler = lambda call: None if call.applied else Throttled("busy", retry_after_ms=300)
    summary = engine.drain_lease(lease.id)
    with pytest.raises(ThrottleLimitExceeded, match=r"max_throttle_wait_seconds=1.0\): raise max_throttle_wait_secon"):
        summary.raise_for_error()
    assert summary.throttle_limit_reached and summary.throttled == 4, "three 0.3 s waits, the fourth would pass 1 s"
    assert summary.throttle_waited_seconds == pytest.approx(0.9)
    assert summary.published == 0 and rig.lease(engine).continuation is None, "nothing read, nothing lost"


def _serving_nothing(rig: Rig, retry_after_ms: int) -> None:
    """The monitored container answers every request 429: it serves the drain nothing at all."""
    rig.monitored.handler = lambda call: None if call.applied else Throttled("busy", retry_after_ms=retry_after_ms)


def test_f11_a_drain_whose_container_serves_nothing_ends_after_its_wait_budget_of_time_however_many_429s() -> None:
    """Neither the source nor the connection sets ``max_throttle_retries``: a drain's bound is time alone. With
    Cosmos's retry-afters of ~1 s the drain meets 31 429s, 30 s of waiting, before it ends, not the 10 (9 retries,
    ~10 s) a count per request would allow; the error names the bound that ran out and the setting to change."""
    rig = Rig()
    _seed(rig, 4, tenants=1)
    time = Time()
    engine = rig.engine(timing=(time.clock, time.sleep))
    (lease,) = engine.ensure_leases()
    _serving_nothing(rig, 1000)
    summary = engine.drain_lease(lease.id)
    with pytest.raises(
        ThrottleLimitExceeded,
        match=r"served none of the requests for 30.0s .*\(max_throttle_wait_seconds=30.0\): raise max_throttle_wait",
    ):
        summary.raise_for_error()
    assert summary.throttle_limit_reached and summary.throttled == 31, "thirty 1 s waits, the 31st would pass 30 s"
    assert summary.throttle_waited_seconds == pytest.approx(30.0)
    assert summary.published == 0 and rig.lease(engine).continuation is None, "nothing read, nothing lost"


@pytest.mark.parametrize("set_on", ["source", "connection"])
def test_f11_a_max_throttle_retries_set_explicitly_still_ends_a_drain_at_that_count(set_on: str) -> None:
    """A user who sets ``max_throttle_retries`` (on the source or as the Cosmos connection's extra) bounds the 429s
    one request meets while the container serves nothing: 12 retries end the drain at the 13th 429, 12 s in."""
    rig = Rig()
    _seed(rig, 4, tenants=1)
    time = Time()
    timing = (time.clock, time.sleep)
    if set_on == "source":
        engine = rig.engine_with(max_throttle_retries=12, timing=timing)
    else:
        engine = rig.engine_with(throttle_limits=ThrottleLimits().overridden(12, None), timing=timing)
    (lease,) = engine.ensure_leases()
    _serving_nothing(rig, 1000)
    summary = engine.drain_lease(lease.id)
    with pytest.raises(ThrottleLimitExceeded, match=r"met 13 429s in a row .*\(max_throttle_retries=12\): raise max"):
        summary.raise_for_error()
    assert summary.throttled == 13 and summary.throttle_waited_seconds == pytest.approx(12.0)


class _Charging(MemoryDocumentContainer):
    """Reports 10 RU for every change-feed read and stamp it serves, as an adapter does from each response."""

    def read_change_feed(self, feed_range: FeedRange, **kwargs: Any) -> ChangeFeedPage:
        page = super().read_change_feed(feed_range, **kwargs)
        report(10.0)
        return page

    def execute_batch(self, partition_key: PartitionKey, operations: Any) -> list[BatchOperationResult]:
        results = super().execute_batch(partition_key, operations)
        report(10.0 * len(operations))
        return results


def test_f11_a_throttled_drain_paces_itself_and_reports_the_pace_429s_and_wait_in_summary_and_metrics() -> None:
    rig = Rig()
    rig.monitored = _Charging(partition_key_paths=rig.paths, clock=rig.clock)
    _seed(rig, 20, tenants=1)
    time = Time()
    engine = rig.engine(max_batch_size=4, stamp_mode="batched", timing=(time.clock, time.sleep))
    assert rig.drain(engine).paced_request_units_per_second is None, "no cap, no 429: not paced"
    _seed(rig, 20, tenants=1, first=20)
    _every_other_request_throttled(rig, 100)
    summary = rig.drain(engine)
    summary.raise_for_error()
    rate = summary.paced_request_units_per_second
    assert rate is not None and rate > 0 and summary.throttled > 0, "429s lowered the pace from unpaced"
    (gauge,) = rig.metrics.points(PACED_RATE)
    assert gauge.value == rate and gauge.attributes[ATTR_SOURCE_IDENTITY] == engine.source_identity
    (waited,) = rig.metrics.points(THROTTLE_WAIT)
    assert waited.value == pytest.approx(summary.throttle_waited_seconds)
    assert rig.metrics.counter(THROTTLED) == summary.throttled
