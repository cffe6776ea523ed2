"""The message-source port over a kafka-python ``KafkaConsumer``: records become ``ReceivedMessage`` values here,
and a commit becomes the group's next offset per partition.

The consumer comes subscribed with ``enable_auto_commit=False`` (``consumer.consumer_config``), so nothing is
acknowledged but what ``commit`` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_chatter.ports import MessageSource, ReceivedMessage


def received_message(record: Any) -> ReceivedMessage:
    """A kafka-python ``ConsumerRecord`` as the core reads it."""
    return ReceivedMessage(
        topic=record.topic,
        partition=int(record.partition),
        offset=int(record.offset),
        key=record.key,
        value=record.value,
        headers=tuple((str(k), v) for k, v in (record.headers or ())),
        timestamp_ms=getattr(record, "timestamp", None),
    )


def caught_up(consumer: Any, timeout_ms: int) -> bool:
    """True when the consumer has partitions and its position is at the end of every one of them.

    Each broker round trip is bounded by ``timeout_ms``; a timeout or an unknown offset means "not yet".
    """
    from kafka import errors as ke

    assigned = consumer.assignment()
    if not assigned:
        return False
    try:
        ends: Mapping[Any, int | None] = consumer.end_offsets(list(assigned), timeout_ms=timeout_ms)
        for tp, end in ends.items():
            position = consumer.position(tp, timeout_ms=timeout_ms)
            if end is None or position is None or position < end:
                return False
    except (ke.KafkaTimeoutError, ke.IllegalStateError):  # slow broker, or a rebalance took the partition
        return False
    return True


class KafkaMessageSource(MessageSource):
    """A subscribed ``KafkaConsumer`` as a ``MessageSource``; ``close`` leaves the group without committing."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def poll(self, max_records: int, timeout: float) -> Sequence[ReceivedMessage]:
        batch = self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        return [received_message(record) for records in batch.values() for record in records]

    def caught_up(self, timeout: float) -> bool:
        return caught_up(self.consumer, timeout_ms=int(timeout * 1000))

    def commit(self, messages: Iterable[ReceivedMessage]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        next_offsets: dict[tuple[str, int], int] = {}
        for m in messages:
            where = (m.topic, m.partition)
            next_offsets[where] = max(next_offsets.get(where, 0), m.offset + 1)
        if next_offsets:
            self.consumer.commit(
                {TopicPartition(t, p): OffsetAndMetadata(offset, "", -1) for (t, p), offset in next_offsets.items()}
            )

    def close(self) -> None:
        self.consumer.close(autocommit=False)


def assigned_source(
    consumer: Any, topic: str, *, fresh_since_ms: int | None = None, fresh_from_beginning: bool = False
) -> KafkaMessageSource:
    """``consumer`` (built with a ``group_id``, subscribed to nothing, auto-commit off) assigned every partition of
    ``topic``: it reads from its group's committed offsets without joining the group, so several readers of one
    group (triggerers) never take partitions from each other.

    A partition the group never committed on is committed first, so the group's position is stored before anything
    is read (nothing after it is skipped by a reader that restarts): at its beginning with ``fresh_from_beginning``
    (a topic the reader saw created), else at its first record written at or after ``fresh_since_ms`` (epoch ms),
    else at its end. ``LookupError`` when the topic has no partitions."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    if not partitions:
        raise LookupError(f"topic {topic!r} has no partitions (does it exist?)")
    consumer.assign(partitions)
    fresh = [tp for tp in partitions if consumer.committed(tp) is None]
    if fresh:
        starts: dict[Any, int] = (
            consumer.beginning_offsets(fresh) if fresh_from_beginning else consumer.end_offsets(fresh)
        )
        if fresh_since_ms is not None and not fresh_from_beginning:
            found = consumer.offsets_for_times({tp: fresh_since_ms for tp in fresh})
            starts = {tp: found[tp].offset if found.get(tp) is not None else end for tp, end in starts.items()}
        consumer.commit({tp: OffsetAndMetadata(starts[tp], "", -1) for tp in fresh})
    return KafkaMessageSource(consumer)


__all__ = ["KafkaMessageSource", "assigned_source", "caught_up", "received_message"]
