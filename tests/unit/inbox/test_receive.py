"""The receive loop over the in-memory message source: no broker. Each delivery is committed after its unit of
work, the first failure stops the loop with it and every later delivery uncommitted, and a redelivery is a
duplicate."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.memory import MemoryDocumentContainer, MemoryMessageSource
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.receive import receive
from airflow_chatter.inbox.receiver import Delivery, IdempotentReceiver

TOPIC = "orders"


def _source(*message_ids: str) -> MemoryMessageSource:
    source = MemoryMessageSource()
    for mid in message_ids:
        source.append(TOPIC, b"{}", key=b"tenant-1", headers=(("message-id", mid.encode()),))
    return source


def _receiver(handled: list[str], fail_on: str | None = None) -> IdempotentReceiver:
    def handler(delivery: Delivery) -> None:
        if delivery.identity == fail_on:
            raise RuntimeError("downstream down")
        handled.append(delivery.identity)

    container = MemoryDocumentContainer(partition_key_paths=("/tenantId",))
    return IdempotentReceiver(handler, name="billing", container=container, partition_key_paths="/tenantId")


def test_every_delivery_is_handled_and_committed_until_caught_up() -> None:
    source, handled = _source("m-0", "m-1", "m-2"), []
    summary = receive(source, _receiver(handled), max_messages=10, max_seconds=5, topics=[TOPIC], group_id="g")
    assert handled == ["m-0", "m-1", "m-2"]
    assert source.committed == {(TOPIC, 0): 3}
    assert (summary.received, summary.processed, summary.stopped_by) == (3, 3, "caught_up")
    assert summary.committed_offsets == {f"{TOPIC}:0": 3}


def test_the_first_failing_delivery_stops_the_loop_and_stays_uncommitted_with_every_later_one() -> None:
    source, handled = _source("m-0", "m-1", "m-2"), []
    with pytest.raises(RuntimeError, match="downstream down"):
        receive(source, _receiver(handled, fail_on="m-1"), max_messages=10, max_seconds=5)
    assert source.committed == {(TOPIC, 0): 1}
    source.close()
    receiver = _receiver(handled)
    summary = receive(source, receiver, max_messages=10, max_seconds=5)
    assert handled == ["m-0", "m-1", "m-2"], "the failed delivery and the ones after it came again"
    assert source.committed == {(TOPIC, 0): 3} and summary.received == 2


def test_a_redelivered_message_is_a_duplicate_and_is_committed() -> None:
    source = _source("m-0", "m-0")
    summary = receive(source, _receiver([]), max_messages=10, max_seconds=5)
    assert (summary.processed, summary.duplicates) == (1, 1)
    assert source.committed == {(TOPIC, 0): 2}


def test_the_loop_stops_at_max_messages() -> None:
    source, handled = _source("m-0", "m-1", "m-2"), []
    summary = receive(source, _receiver(handled), max_messages=2, max_seconds=5)
    assert (handled, summary.stopped_by) == (["m-0", "m-1"], "max_messages")
    assert source.committed == {(TOPIC, 0): 2}


def test_the_loop_stops_at_max_seconds() -> None:
    ticks = iter([0.0, 10.0, 10.0])
    summary = receive(_source("m-0"), _receiver([]), max_messages=5, max_seconds=5, clock=lambda: next(ticks))
    assert (summary.received, summary.stopped_by) == (0, "max_seconds")


@pytest.mark.parametrize(("option", "value"), [("max_messages", 0), ("max_seconds", 0)])
def test_bounds_are_refused_naming_the_option(option: str, value: float) -> None:
    bounds = {"max_messages": 1, "max_seconds": 1.0, option: value}
    with pytest.raises(ConfigurationError, match=option):
        receive(_source(), _receiver([]), **bounds)  # type: ignore[arg-type]
