"""The receive loop: poll a bounded number of deliveries from a ``MessageSource``, hand each to the
``IdempotentReceiver`` and commit it only after its unit of work committed.

It is written once against the port (``airflow_chatter.ports.MessageSource``), so it runs on the Kafka adapter
(``adapters.kafka.source``) and on the in-memory source (``adapters.memory.source``) alike. ``bounded_poll`` is the
one bounded loop of both consumers: the receiver's ``receive`` here and the at-least-once ``consume_batch``
(``adapters.kafka.consumer``), so both stop the same way.

Nothing here imports Airflow or kafka-python.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.receiver import DeliveryOutcome, IdempotentReceiver, ReceiveSummary
from airflow_chatter.ports import MessageSource, ReceivedMessage

#: A poll never waits longer than this, so the time budget is checked often.
MAX_POLL_WAIT_S = 1.0
#: The least a caught-up check may wait for the source's answer.
MIN_CAUGHT_UP_WAIT_S = 0.1


@dataclass
class PollStop:
    """Why :func:`bounded_poll` stopped: ``max_messages``, ``max_seconds`` or ``caught_up``."""

    reason: str = ""


def bounded_poll(
    source: MessageSource, *, max_messages: int, deadline: float, clock: Callable[[], float], stop: PollStop
) -> Iterator[ReceivedMessage]:
    """Yield at most ``max_messages`` messages until ``deadline`` (on ``clock``), stopping early once caught up.

    Each poll waits at most ``MAX_POLL_WAIT_S``, and an empty poll ends the loop when the source has read to the end
    of every partition. ``stop`` says why it ended; an exception of the caller's per-message work ends it too, with
    nothing more polled.
    """
    taken = 0
    while True:
        if taken >= max_messages:
            stop.reason = "max_messages"
            return
        left = deadline - clock()
        if left <= 0:
            stop.reason = "max_seconds"
            return
        batch = source.poll(max_records=max_messages - taken, timeout=min(left, MAX_POLL_WAIT_S))
        if not batch:
            if source.caught_up(timeout=max(MIN_CAUGHT_UP_WAIT_S, deadline - clock())):
                stop.reason = "caught_up"
                return
            continue
        for message in batch:
            taken += 1
            yield message


def receive(
    source: MessageSource,
    receiver: IdempotentReceiver,
    *,
    max_messages: int,
    max_seconds: float,
    topics: Sequence[str] = (),
    group_id: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> ReceiveSummary:
    """Receive at most ``max_messages`` deliveries within about ``max_seconds``, stopping early once caught up.

    Each delivery is committed right after its unit of work committed (or it was found a duplicate). The first
    delivery that raises stops the loop: it and every later one stay uncommitted, so they come again; the error
    propagates. The caller closes the source.
    """
    if max_messages < 1:
        raise ConfigurationError("max_messages", max_messages, "must be at least 1")
    if max_seconds <= 0:
        raise ConfigurationError("max_seconds", max_seconds, "must be positive")
    summary = ReceiveSummary(receiver=receiver.name, group_id=group_id, topics=tuple(topics))
    started = clock()
    stop = PollStop()
    for message in bounded_poll(
        source, max_messages=max_messages, deadline=started + max_seconds, clock=clock, stop=stop
    ):
        dispatched = receiver.dispatched
        outcome = receiver.handle_delivery(message)
        # Only now is the delivery acknowledged: its writes and marker are committed.
        source.commit([message])
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


__all__ = ["MAX_POLL_WAIT_S", "PollStop", "bounded_poll", "receive"]
