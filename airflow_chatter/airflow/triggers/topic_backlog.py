"""The event trigger that starts a receiver when messages arrive: an ``AssetWatcher`` on a topic runs it in the
triggerer, and each event it fires becomes an asset event that schedules the receiver DAG.

It is a shared-stream trigger in ack mode (Airflow 3.3): every watcher of one topic on one connection (whatever the
receiver's group) shares one ``TopicArrivals`` (``airflow_chatter.inbox.arrivals``): one consumer per topic in the
triggerer, in the watcher group ``chatter-topic-watch.<topic>`` (never a receiver's group), whose offsets are
committed only past batches whose events Airflow has persisted.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Hashable
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_chatter.airflow.triggers._shared import MAX_BACKOFF_POLLS, AcknowledgedStreamProducer, standalone
from airflow_chatter.airflow.triggers.pending import check_poll_interval, serialized

__all__ = ["MAX_BACKOFF_POLLS", "WATCH_GROUP_PREFIX", "ChatterTopicBacklogTrigger", "watch_group_id"]

#: The watcher's consumer group is this plus the topic: its committed offsets are the stream's position.
WATCH_GROUP_PREFIX = "chatter-topic-watch."
#: How long one poll of the watcher's consumer waits for records, at most (seconds).
POLL_TIMEOUT_SECONDS = 1.0
#: A new watcher group starts at the records written this long before its stream started: a message published
#: while the watcher was being deployed (its trigger assigned, its consumer not open yet) is announced, while a
#: topic's older history is left to the receiver's next run instead of firing an event per poll for all of it.
FRESH_LOOKBACK_SECONDS = 600


def watch_group_id(topic: str) -> str:
    return f"{WATCH_GROUP_PREFIX}{topic}"


def _producer(kwargs: dict[str, Any]) -> AcknowledgedStreamProducer:
    """The producer of the stream named by ``kwargs`` (a trigger's serialized kwargs); it uses only key fields."""
    topic, conn_id = kwargs["topic"], kwargs["kafka_conn_id"]
    #: Whether this stream found the topic missing: then everything on it once it exists arrived after the watcher
    #: started, and a fresh watcher group starts at the partitions' beginnings (the first records are announced).
    missing = [False]
    since_ms = int((time.time() - FRESH_LOOKBACK_SECONDS) * 1000)

    def open_source() -> Any:
        try:
            return _open_source(conn_id, topic, fresh_since_ms=since_ms, fresh_from_beginning=missing[0])
        except LookupError:
            missing[0] = True
            raise

    def open_core() -> Any:
        from airflow_chatter.inbox.arrivals import TopicArrivals

        return TopicArrivals(open_source, topic, poll_timeout=POLL_TIMEOUT_SECONDS)

    return AcknowledgedStreamProducer(open_core, poll_interval=kwargs["poll_interval"], name=f"topic {topic}")


def _open_source(conn_id: str, topic: str, *, fresh_since_ms: int | None, fresh_from_beginning: bool) -> Any:
    from kafka import KafkaConsumer

    from airflow_chatter.adapters.kafka.source import assigned_source
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    config = ChatterKafkaHook(conn_id).consumer_config(watch_group_id(topic))  # auto-commit is off
    consumer = KafkaConsumer(**config)
    try:
        return assigned_source(
            consumer, topic, fresh_since_ms=fresh_since_ms, fresh_from_beginning=fresh_from_beginning
        )
    except BaseException:
        consumer.close(autocommit=False)
        raise


class ChatterTopicBacklogTrigger(BaseEventTrigger):
    """Watch one topic for arriving records; fire when a batch arrives.

    The event is ``{"status": "records", "topic", "group_id", "partitions": {partition: count}, "records"}``: the
    records of one poll of the topic's shared consumer. The receiver that runs then reads its own group's committed
    offsets, so it reads exactly what it would have read on a cron; the watcher never touches that group. A new
    watcher group starts at the records of the last ``FRESH_LOOKBACK_SECONDS`` (all of a topic it saw created);
    older ones are not announced (the receiver's next run reads them).

    :param topic: the topic the receiver consumes.
    :param group_id: the receiver's consumer group (named in the event; the watcher does not use it).
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

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return serialized(self, "topic", "group_id", "kafka_conn_id", "poll_interval")

    def shared_stream_key(self) -> Hashable:
        """Watchers of one topic on one connection share one consumer, whatever their receivers' groups."""
        return "chatter-topic", self.kafka_conn_id, self.topic, self.poll_interval

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> AcknowledgedStreamProducer:
        return _producer(kwargs)

    def event_for(self, batch: Any) -> TriggerEvent:
        """This receiver's event for one batch of arrivals."""
        return TriggerEvent(  # type: ignore[no-untyped-call]
            {
                "status": "records",
                "topic": self.topic,
                "group_id": self.group_id,
                "partitions": {str(p): count for p, count in batch.partitions},
                "records": batch.records,
            }
        )

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        # INVARIANT: each event is yielded before the next batch is pulled, so Airflow binds it to its batch (the
        # offsets are committed only after the event was persisted); pinned by test_topic_stream_trigger.py.
        async for batch in shared_stream:
            yield self.event_for(batch)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Without the shared-stream manager (a triggerer that could not share it): a consumer of its own."""
        async for event in standalone(_producer(self.serialize()[1]), self.event_for):
            yield event
