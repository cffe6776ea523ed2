"""What the inbox conformance suite's tests share: calls released together, records as the receiver sees them, and
a handler that counts its runs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from airflow_chatter.inbox.identity import ReceivedMessage
from airflow_chatter.inbox.receiver import Delivery
from airflow_chatter.outbox.document import OutboxMessage

T = TypeVar("T")

_BARRIER_TIMEOUT_SECONDS = 60.0


def in_parallel(count: int, call: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``call(0..count-1)`` on ``count`` threads released together; each result or the error it raised."""
    barrier = threading.Barrier(count, timeout=_BARRIER_TIMEOUT_SECONDS)

    def run(i: int) -> T | BaseException:
        barrier.wait()
        try:
            return call(i)
        except Exception as error:  # noqa: BLE001 - the test inspects every outcome
            return error

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def message(
    message_id: str | None, *, key: str = "tenant-1", topic: str = "orders", offset: int = 0
) -> ReceivedMessage:
    """A record as the receiver sees it: ``message-id`` header (unless ``None``), Kafka key = the partition key."""
    headers: tuple[tuple[str, bytes | None], ...] = () if message_id is None else (("message-id", message_id.encode()),)
    return ReceivedMessage(topic=topic, partition=0, offset=offset, key=key.encode(), value=b"{}", headers=headers)


class CountingHandler:
    """A handler that writes one order document and one outbox message per delivery, and counts its calls."""

    def __init__(self, fail_times: int = 0) -> None:
        self.calls = 0
        self.fail_times = fail_times
        self._lock = threading.Lock()

    def __call__(self, delivery: Delivery) -> None:
        with self._lock:
            self.calls += 1
            fail = self.calls <= self.fail_times
        tenant = delivery.message.key.decode() if delivery.message.key else ""
        assert delivery.unit_of_work is not None
        delivery.unit_of_work.create({"id": f"order-{delivery.identity}", "tenantId": tenant, "by": delivery.receiver})
        delivery.send(OutboxMessage(f"shipped-{delivery.identity}", "shipments", "{}", "application/json"))
        if fail:
            raise RuntimeError("handler failed on purpose")
