"""The idempotent receiver's Kafka loop: poll a bounded number of deliveries, hand each to the core
``IdempotentReceiver`` and commit its offset only after its unit of work committed.

It lives in the kafka adapter because it drives a kafka-python ``KafkaConsumer``; the core receiver
(``airflow_chatter.inbox.receiver``) sees only ``ReceivedMessage`` values (``airflow_chatter.ports``, the one value of a
consumed record, which the at-least-once consumer hands its handlers too). The poll bound and the caught-up check are
the at-least-once consumer's (``consumer.py``), so both loops stop the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from airflow_chatter.adapters.kafka.consumer import PollStop, bounded_poll
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.receiver import DeliveryOutcome, IdempotentReceiver, ReceiveSummary
from airflow_chatter.ports import ReceivedMessage


def receive(
    consumer: Any,
    receiver: IdempotentReceiver,
    *,
    max_messages: int,
    max_seconds: float,
    topics: Sequence[str] = (),
    group_id: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> ReceiveSummary:
    """Receive at most ``max_messages`` deliveries within about ``max_seconds``, stopping early once caught up.

    ``consumer`` is a ``KafkaConsumer`` subscribed with ``enable_auto_commit=False``. Each delivery's offset is
    committed right after its unit of work committed (or it was found a duplicate). The first delivery that raises
    stops the loop: its offset and every later one stay uncommitted, so they come again; the error propagates. The
    caller closes the consumer (``close(autocommit=False)``).
    """
    if max_messages < 1:
        raise ConfigurationError("max_messages", max_messages, "must be at least 1")
    if max_seconds <= 0:
        raise ConfigurationError("max_seconds", max_seconds, "must be positive")
    summary = ReceiveSummary(receiver=receiver.name, group_id=group_id, topics=tuple(topics))
    started = clock()
    deadline = started + max_seconds
    stop = PollStop()
    for record in bounded_poll(consumer, max_messages=max_messages, deadline=deadline, clock=clock, stop=stop):
        message = ReceivedMessage.from_record(record)
        dispatched = receiver.dispatched
        outcome = receiver.handle_delivery(message)
        # Only now is the delivery acknowledged: its writes and marker are committed.
        consumer.commit(
            {TopicPartition(message.topic, message.partition): OffsetAndMetadata(message.offset + 1, "", -1)}
        )
        summary.received += 1
        if outcome is DeliveryOutcome.DUPLICATE:
            summary.duplicates += 1
        else:
            summary.processed += 1
        summary.dispatched += receiver.dispatched - dispatched
        summary.committed_offsets[f"{message.topic}:{message.partition}"] = message.offset + 1
    summary.stopped_by = stop.reason
    summary.seconds = clock() - started
    return summary


__all__ = ["receive"]
