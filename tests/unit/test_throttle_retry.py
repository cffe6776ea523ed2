"""``ThrottleRetrying``: the bounded 429 retry of the callers that are not a drain (F-11), with its sleep recorded."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.request_units import ThrottleLimits
from airflow_chatter.ports import NotFound, ServiceUnavailable, Throttled
from airflow_chatter.throttle_retry import ThrottleRetrying


def _container(error: BaseException, **when: int) -> MemoryDocumentContainer:
    inner = MemoryDocumentContainer(partition_key_paths=("/pk",))
    inner.handler = fail("create", error=error, **when)
    return inner


def test_f11_a_429_is_retried_after_the_servers_retry_after_and_the_write_lands_once() -> None:
    inner = _container(Throttled("429", retry_after_ms=250), times=2)
    slept: list[float] = []
    ThrottleRetrying(inner, sleep=slept.append).create({"id": "a", "pk": "p"}, "p")
    assert slept == [0.25, 0.25] and inner.calls["create"] == 3
    assert inner.read("a", "p")["id"] == "a"


def test_f11_retries_stop_at_the_wait_limit_and_the_error_names_both_limits() -> None:
    inner = _container(Throttled("429", retry_after_ms=400))
    slept: list[float] = []
    container = ThrottleRetrying(inner, ThrottleLimits(9, 1.0), sleep=slept.append)
    with pytest.raises(Throttled, match="max_throttle_retries=9, max_throttle_wait_seconds=1.0") as raised:
        container.create({"id": "a", "pk": "p"}, "p")
    assert slept == [0.4, 0.4], "a third wait would pass the 1 s limit"
    assert raised.value.retry_after_ms == 400
    with pytest.raises(NotFound):
        inner.read("a", "p")


def test_f11_retries_stop_at_the_retry_limit_and_other_errors_are_not_retried() -> None:
    slept: list[float] = []
    with pytest.raises(Throttled, match="max_throttle_retries=1"):
        ThrottleRetrying(_container(Throttled("429")), ThrottleLimits(1, 30), sleep=slept.append).create(
            {"id": "a", "pk": "p"}, "p"
        )
    assert slept == [0.1], "a 429 naming no retry-after waits 0.1 s"
    unavailable = _container(ServiceUnavailable("503"))
    with pytest.raises(ServiceUnavailable):
        ThrottleRetrying(unavailable, sleep=slept.append).create({"id": "a", "pk": "p"}, "p")
    assert unavailable.calls["create"] == 1
