"""Reading the topic back: a bounded, at-least-once consume loop over kafka-python (spec F-07).

The consuming half of the relay, for downstream jobs (the example DAG
``dags/example_chatter_consume_orders.py``):

* **Same connection, same bounds.** ``consumer_config`` turns the one ``KafkaSettings`` model (already
  validated: servers, security, SASL, SSL CA, pinned ``api_version``, request timeout) into ``KafkaConsumer``
  keyword arguments, so the constructor does no network I/O. Offsets are committed by hand
  (``enable_auto_commit=False``; asking for auto-commit is refused), a new group starts at the
  beginning of the topic (``auto_offset_reset="earliest"``), and a dead consumer leaves its group after
  ``session_timeout_ms`` (6 s by default, not kafka-python's 45 s). It reads ``isolation_level="read_committed"``
  (kafka-python's default is ``read_uncommitted``): a message of an aborted transaction (an exactly-once drain's
  page that was fenced or failed) is never handed on, and a committed page arrives whole.
* **Identity or nothing.** Every message must carry a non-blank UTF-8 ``message-id`` header: the inbox
  deduplicates on it. A message without one raises ``MissingMessageIdError`` before any handler runs;
  it is not processed and not acknowledged. The handler gets the one consumed-record value of the package,
  ``airflow_chatter.ports.ReceivedMessage`` (what the idempotent receiver hands its handlers too).
* **Commit after the handler.** ``consume_batch`` polls until ``max_messages`` were handled, the
  consumer caught up with the end of its partitions, or ``max_seconds`` passed; it calls the handler
  once per message in partition order and commits ``last offset + 1`` per partition only after every
  handler call of the batch returned. Any error leaves the group's offsets where they were, so the
  whole batch is delivered again: at-least-once, and handlers must be idempotent (the inbox makes them
  so by deduplicating on ``message-id``).

Nothing here imports Airflow.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource, received_message
from airflow_chatter.inbox.errors import MissingMessageIdError
from airflow_chatter.inbox.receive import PollStop, bounded_poll
from airflow_chatter.ports import MESSAGE_ID_HEADER, ReceivedMessage

log = logging.getLogger(__name__)

__all__ = [
    "BatchSummary",
    "MissingMessageIdError",
    "consume_batch",
    "consumer_config",
    "require_message_id",
    "to_received_message",
]

#: Header the example producers put the event type in (a context entry of the outbox message).
EVENT_TYPE_HEADER = "event-type"
#: kafka-python's default is 45 s; a task that died should give its partitions back sooner.
DEFAULT_SESSION_TIMEOUT_MS = 6_000


def consumer_config(
    settings: KafkaSettings,
    *,
    group_id: str,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    **overrides: Any,
) -> dict[str, Any]:
    """Keyword arguments for ``kafka.KafkaConsumer`` from the connection's settings.

    Contains the SASL password when there is one: never log it. ``overrides`` are further
    kafka-python consumer settings (``max_poll_records``, ``isolation_level``, ...); asking for
    ``enable_auto_commit=True`` raises ``ValueError``, since offsets are committed only after the
    handler ran.
    """
    if not isinstance(group_id, str) or not group_id.strip():
        raise ValueError("group_id: a consumer group is required (its committed offsets are the progress)")
    if overrides.get("enable_auto_commit", False) is not False:
        raise ValueError(
            f"enable_auto_commit={overrides['enable_auto_commit']!r} would acknowledge messages before they are "
            "handled: offsets are committed only after the handler succeeded"
        )
    if isinstance(session_timeout_ms, bool) or not isinstance(session_timeout_ms, int) or session_timeout_ms <= 0:
        raise ValueError(f"session_timeout_ms={session_timeout_ms!r}: must be a positive integer")
    config = settings.client_config()
    config.update(
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # Exactly-once drains: only committed transactions are read (docs/inbox.md).
        isolation_level="read_committed",
        session_timeout_ms=session_timeout_ms,
        # kafka-python needs heartbeat < session timeout; a third is Kafka's own rule of thumb.
        heartbeat_interval_ms=max(100, session_timeout_ms // 3),
    )
    config.update(overrides)
    return config


def to_received_message(record: Any) -> ReceivedMessage:
    """Turn a kafka-python ``ConsumerRecord`` into a ``ReceivedMessage`` whose ``message_id`` is set (see
    ``require_message_id``)."""
    return require_message_id(received_message(record))


def require_message_id(message: ReceivedMessage) -> ReceivedMessage:
    """``message`` when its ``message_id`` is set; ``MissingMessageIdError`` if it has no ``message-id`` header, an
    empty or blank one, or one that is not UTF-8."""
    where = (message.topic, message.partition, message.offset)
    raw = message.header_bytes(MESSAGE_ID_HEADER)
    if raw is None:
        raise MissingMessageIdError(*where, f"has no {MESSAGE_ID_HEADER!r} header")
    if message.message_id is None:
        raise MissingMessageIdError(*where, f"has a {MESSAGE_ID_HEADER!r} header that is not UTF-8")
    if not message.message_id.strip():
        raise MissingMessageIdError(*where, f"has a blank {MESSAGE_ID_HEADER!r} header")
    return message


@dataclass
class BatchSummary:
    """What one ``consume_batch`` call did. ``to_dict()`` is JSON-serialisable (XCom)."""

    topics: Sequence[str]
    group_id: str
    consumed: int = 0
    by_event_type: Counter[str] = field(default_factory=Counter)
    #: "topic:partition" → {"first_offset", "last_offset", "count"}
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)
    committed: bool = False
    stopped_by: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": list(self.topics),
            "group_id": self.group_id,
            "consumed": self.consumed,
            "by_event_type": dict(sorted(self.by_event_type.items())),
            "partitions": {k: dict(v) for k, v in sorted(self.partitions.items())},
            "committed": self.committed,
            "stopped_by": self.stopped_by,
            "seconds": round(self.seconds, 3),
        }

    def _record(self, message: ReceivedMessage, event_type: str) -> None:
        self.consumed += 1
        self.by_event_type[event_type] += 1
        entry = self.partitions.setdefault(
            f"{message.topic}:{message.partition}", {"first_offset": message.offset, "count": 0}
        )
        entry["last_offset"] = message.offset
        entry["count"] += 1


def consume_batch(
    consumer: Any,
    handler: Callable[[ReceivedMessage], Any],
    *,
    max_messages: int,
    max_seconds: float,
    topics: Sequence[str] = (),
    group_id: str = "",
    event_type_header: str = EVENT_TYPE_HEADER,
    clock: Callable[[], float] = time.monotonic,
) -> BatchSummary:
    """Consume at most ``max_messages`` within about ``max_seconds``, handle each, then commit.

    ``consumer`` is a ``KafkaConsumer`` subscribed to its topics with ``enable_auto_commit=False``.
    Stops early once it has caught up with the end of every assigned partition. Offsets are committed
    (``last handled offset + 1`` per partition) only after ``handler`` returned for every message of
    the batch; if a message has no identity (``MissingMessageIdError``) or the handler raises, the
    error propagates and nothing is committed. The caller closes the consumer.
    """
    if max_messages < 1:
        raise ValueError(f"max_messages={max_messages!r}: must be at least 1")
    if max_seconds <= 0:
        raise ValueError(f"max_seconds={max_seconds!r}: must be positive")
    summary = BatchSummary(topics=tuple(topics), group_id=group_id)
    started = clock()
    deadline = started + max_seconds
    last: dict[tuple[str, int], ReceivedMessage] = {}
    stop = PollStop()
    source = KafkaMessageSource(consumer)
    for polled in bounded_poll(source, max_messages=max_messages, deadline=deadline, clock=clock, stop=stop):
        message = require_message_id(polled)  # F-07: no identity → raise before the handler
        handler(message)
        summary._record(message, message.header(event_type_header) or "unknown")
        last[(message.topic, message.partition)] = message
    summary.stopped_by = stop.reason
    if last:
        source.commit(last.values())
        summary.committed = True
    summary.seconds = clock() - started
    return summary
