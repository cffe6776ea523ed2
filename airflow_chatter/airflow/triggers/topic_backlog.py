"""The event trigger that starts a receiver when messages arrive: an ``AssetWatcher`` on a topic runs it in the
triggerer, and each event it fires becomes an asset event that schedules the receiver DAG."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_chatter.airflow.triggers.pending import check_poll_interval

#: After a poll fails (broker unreachable), the next one waits this many poll intervals, at most.
MAX_BACKOFF_POLLS = 12


class ChatterTopicBacklogTrigger(BaseEventTrigger):
    """Watch one topic for records past a consumer group's committed offsets; fire when there are any.

    Read-only: the consumer it polls with never joins the group and never commits (``enable_auto_commit`` off,
    no subscription), so the receiver that runs afterwards reads exactly what it would have read on a cron. The
    event is ``{"status": "records", "topic", "group_id", "partitions": {partition: count}, "records"}``. Once it
    fired, it fires again only after the uncommitted offsets change (the receiver committed, or more records
    arrived): offsets, not counts, so a record that arrives just after the receiver committed the previous one fires
    although the count is again 1.

    :param topic: the topic the receiver consumes.
    :param group_id: the receiver's consumer group.
    :param kafka_conn_id: the ``chatter_kafka`` connection.
    :param poll_interval: seconds between polls (1 to 600; default 2: a poll is a few broker reads, no Cosmos RU).
    """

    def __init__(
        self, *, topic: str, group_id: str, kafka_conn_id: str = "chatter_kafka_default", poll_interval: float = 2.0
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.topic = topic
        self.group_id = group_id
        self.kafka_conn_id = kafka_conn_id
        self.poll_interval = check_poll_interval(poll_interval)
        self._consumer: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topic": self.topic,
                "group_id": self.group_id,
                "kafka_conn_id": self.kafka_conn_id,
                "poll_interval": self.poll_interval,
            },
        )

    def _open(self) -> Any:
        from kafka import KafkaConsumer

        from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

        config = ChatterKafkaHook(self.kafka_conn_id).consumer_config(self.group_id)  # auto-commit is off
        return KafkaConsumer(**config)

    def _poll(self) -> dict[int, tuple[int, int]]:
        from airflow_chatter.adapters.kafka.backlog import uncommitted_ranges

        if self._consumer is None:
            self._consumer = self._open()
        return uncommitted_ranges(self._consumer, self.topic)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        failures = 0
        last: dict[int, tuple[int, int]] = {}
        while True:
            try:
                backlog = await asyncio.to_thread(self._poll)
                failures = 0
            except Exception as error:  # noqa: BLE001 - logged and retried: the watcher must keep watching
                failures += 1
                await self.cleanup()
                self.log.warning(
                    "Backlog watch of %s failed (%s: %s); retrying", self.topic, type(error).__name__, error
                )
                await asyncio.sleep(self.poll_interval * min(failures, MAX_BACKOFF_POLLS))
                continue
            if backlog and backlog != last:
                yield TriggerEvent(  # type: ignore[no-untyped-call]
                    {
                        "status": "records",
                        "topic": self.topic,
                        "group_id": self.group_id,
                        "partitions": {str(p): end - start for p, (start, end) in backlog.items()},
                        "records": sum(end - start for start, end in backlog.values()),
                    }
                )
            last = backlog
            await asyncio.sleep(self.poll_interval)

    async def cleanup(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await asyncio.to_thread(consumer.close, autocommit=False)
