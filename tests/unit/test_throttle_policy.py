"""The one 429 policy (``airflow_chatter.ports.throttle``, F-11): ``ThrottleRetrying`` over a ``ThrottleBudget`` of
wall-clock time, with the clock and the sleep injected (time moves only when a test sleeps)."""

from __future__ import annotations

import threading

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.ports import NotFound, ServiceUnavailable, Throttled
from airflow_chatter.ports.throttle import ThrottleBudget, ThrottleLimitExceeded, ThrottleLimits, ThrottleRetrying


class Time:
    """Monotonic seconds that move only when slept; records every sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _container(error: BaseException, **when: int) -> MemoryDocumentContainer:
    inner = MemoryDocumentContainer(partition_key_paths=("/pk",))
    inner.handler = fail("create", error=error, **when)
    return inner


def test_f11_a_429_is_retried_after_the_servers_retry_after_and_the_write_lands_once() -> None:
    inner = _container(Throttled("429", retry_after_ms=250), times=2)
    time = Time()
    ThrottleRetrying(inner, sleep=time.sleep, clock=time.clock).create({"id": "a", "pk": "p"}, "p")
    assert time.slept == [0.25, 0.25] and inner.calls["create"] == 3
    assert inner.read("a", "p")["id"] == "a"


def test_f11_retries_stop_at_the_wait_limit_and_the_error_names_the_setting_to_change() -> None:
    inner = _container(Throttled("429", retry_after_ms=400))
    time = Time()
    container = ThrottleRetrying(inner, ThrottleLimits(9, 1.0), sleep=time.sleep, clock=time.clock)
    with pytest.raises(ThrottleLimitExceeded, match=r"=1.0\): raise max_throttle_wait_seconds"):
        container.create({"id": "a", "pk": "p"}, "p")
    assert time.slept == [0.4, 0.4], "a third wait would pass the 1 s limit"
    with pytest.raises(NotFound):
        inner.read("a", "p")


def test_f11_retries_stop_at_the_retry_limit_and_other_errors_are_not_retried() -> None:
    time = Time()
    with pytest.raises(Throttled, match="max_throttle_retries=1"):
        ThrottleRetrying(
            _container(Throttled("429")), ThrottleLimits(1, 30), sleep=time.sleep, clock=time.clock
        ).create({"id": "a", "pk": "p"}, "p")
    assert time.slept == [0.1], "a 429 naming no retry-after waits 0.1 s"
    unavailable = _container(ServiceUnavailable("503"))
    with pytest.raises(ServiceUnavailable):
        ThrottleRetrying(unavailable, sleep=time.sleep, clock=time.clock).create({"id": "a", "pk": "p"}, "p")
    assert unavailable.calls["create"] == 1


def test_f11_a_callers_that_is_not_a_drain_gets_a_fresh_budget_per_request() -> None:
    """Each request of a caller with no shared budget may wait the whole limit: what the SDK's own retry did."""
    inner = _container(Throttled("429", retry_after_ms=600), times=1)
    time = Time()
    container = ThrottleRetrying(inner, ThrottleLimits(9, 1.0), sleep=time.sleep, clock=time.clock)
    container.create({"id": "a", "pk": "p"}, "p")
    inner.handler = fail("create", error=Throttled("429", retry_after_ms=600), times=1)
    container.create({"id": "b", "pk": "p"}, "p")
    assert time.slept == [0.6, 0.6], "1.2 s in all, but 0.6 s per request"


def test_f11_a_caller_that_is_not_a_drain_stops_at_9_retries_per_request_where_no_limit_is_set() -> None:
    """A per-request budget keeps the SDK's default where the connection sets no ``max_throttle_retries``: the tenth
    429 of a request ends it, ~9 s of 1 s retry-afters, well inside 30 s; the next request starts again."""
    inner = _container(Throttled("429", retry_after_ms=1000))
    time = Time()
    container = ThrottleRetrying(inner, ThrottleLimits(), sleep=time.sleep, clock=time.clock)
    for n in range(2):
        with pytest.raises(ThrottleLimitExceeded, match=r"met 10 429s in a row .*\(max_throttle_retries=9\)"):
            container.create({"id": f"d{n}", "pk": "p"}, "p")
    assert time.slept == [1.0] * 18 and inner.calls["create"] == 20


@pytest.mark.parametrize(("retry_after_ms", "wait", "limit"), [(250, 0.25, 30.0), (0, 0.001, 0.5)])
def test_f11_a_shared_budget_with_no_retry_limit_set_is_bounded_by_time_alone(
    retry_after_ms: int, wait: float, limit: float
) -> None:
    """A drain's budget (shared) where ``max_throttle_retries`` is unset counts no retries: one request waits out
    120 retry-afters of 0.25 s before the default 30 s run out; a retry-after of 0 still spends 1 ms, so it ends."""
    time = Time()
    budget = ThrottleBudget(ThrottleLimits().overridden(None, limit), clock=time.clock, sleep=time.sleep)
    inner = _container(Throttled("429", retry_after_ms=retry_after_ms))
    with pytest.raises(ThrottleLimitExceeded, match=rf"\(max_throttle_wait_seconds={limit}\): raise max_throttle_wait"):
        ThrottleRetrying(inner, budget=budget).create({"id": "a", "pk": "p"}, "p")
    assert set(time.slept) == {wait} and budget.throttled == len(time.slept) + 1 > 100
    assert budget.waited_seconds == pytest.approx(limit, abs=wait)


def test_f11_overlapping_waits_count_once_in_the_budget_a_shared_budget_is_wall_clock_time() -> None:
    """Eight requests throttled together, each waiting 1 s at the same time, spend 1 s of the budget, not 8."""
    now = [0.0]
    barrier = threading.Barrier(8, action=lambda: now.__setitem__(0, now[0] + 1.0), timeout=10)
    budget = ThrottleBudget(ThrottleLimits(9, 2.0), clock=lambda: now[0], sleep=lambda _: barrier.wait())
    inner = MemoryDocumentContainer(partition_key_paths=("/pk",))
    inner.handler = fail("create", error=Throttled("429", retry_after_ms=1000), times=8)
    container = ThrottleRetrying(inner, budget=budget)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            container.create({"id": f"d{n}", "pk": f"p{n}"}, f"p{n}")
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert errors == [], "8 s of summed waits would have passed the 2 s limit"
    assert budget.throttled == 8 and budget.waited_seconds == pytest.approx(1.0)
    assert inner.calls["create"] == 16


def test_f11_a_served_request_restarts_the_wait_window_so_progress_never_runs_the_budget_out() -> None:
    time = Time()
    budget = ThrottleBudget(ThrottleLimits(2, 1.0), clock=time.clock, sleep=time.sleep)
    inner = MemoryDocumentContainer(partition_key_paths=("/pk",))
    container = ThrottleRetrying(inner, budget=budget)
    for n in range(5):  # every request meets two 429s of 0.4 s: 4 s in all, 0.8 s between two served requests
        inner.handler = fail("create", error=Throttled("429", retry_after_ms=400), times=2)
        container.create({"id": f"d{n}", "pk": "p"}, "p")
    assert budget.waited_seconds == pytest.approx(4.0) and budget.window_seconds == 0.0
    assert (budget.throttled, budget.limit_reached) == (10, False)
