"""The publisher and message-source ports: messages out to Kafka and back in."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: The header a message's identity travels in (F-02): what the drain writes and the inbox deduplicates on (F-07).
MESSAGE_ID_HEADER = "message-id"
#: Where a CloudEvents record (binary mode, F-13) carries the same identity.
CLOUDEVENTS_ID_HEADER = "ce_id"


@dataclass(frozen=True)
class OutgoingMessage:
    topic: str
    value: bytes
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class ReceivedMessage:
    """One consumed Kafka record: what a ``MessageSource`` polls, and what the idempotent receiver
    (``Delivery.message``) and the at-least-once consumer (``consume_batch``) hand their handlers. The Kafka adapter
    builds it, so the core reads records without importing ``kafka``.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None

    def header_bytes(self, name: str) -> bytes | None:
        """The first header called ``name`` (case-insensitive) as bytes; ``None`` if absent."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (case-insensitive), decoded as UTF-8; ``None`` if absent."""
        value = self.header_bytes(name)
        return None if value is None else value.decode("utf-8", errors="replace")

    @property
    def message_id(self) -> str | None:
        """The message's identity from its headers: ``message-id`` (F-02), else a CloudEvent's ``ce_id`` (F-13);
        strict UTF-8, ``None`` when absent or not UTF-8. This is the one place either format's identity is read:
        the at-least-once consumer hands on only messages where it is non-blank; the receiver decides identity
        through its identity function, whose default is this."""
        raw = self.header_bytes(MESSAGE_ID_HEADER)
        if raw is None:
            raw = self.header_bytes(CLOUDEVENTS_ID_HEADER)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class MessageSource(abc.ABC):
    """Where received messages come from: a consumer group's view of its topics, read in order per partition.

    The receive loop (``airflow_chatter.inbox.receive``) is written once against this port, so it runs on a broker
    (``adapters.kafka.source``) and in memory (``adapters.memory.source``) alike. Nothing is acknowledged until
    ``commit`` names it: a source that is closed or lost redelivers every uncommitted message.
    """

    @abc.abstractmethod
    def poll(self, max_records: int, timeout: float) -> Sequence[ReceivedMessage]:
        """At most ``max_records`` messages, in partition order, waiting at most ``timeout`` seconds for any.

        An empty result means none came in time; it does not mean there are none (see ``caught_up``).
        """

    @abc.abstractmethod
    def caught_up(self, timeout: float) -> bool:
        """True when the source has partitions and has read to the end of every one (within ``timeout`` seconds).

        A timeout or an unknown position means "not yet".
        """

    @abc.abstractmethod
    def commit(self, messages: Iterable[ReceivedMessage]) -> None:
        """Acknowledge each message and everything before it on its partition: the group next reads after it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Leave the group without acknowledging anything more."""


@dataclass(frozen=True)
class PublishConfirmation:
    """The broker acknowledged the message (``acks=all``)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class PublishOutcome:
    """Per-message result of ``Publisher.send_batch``: exactly one of the two fields is set."""

    message: OutgoingMessage
    confirmation: PublishConfirmation | None = None
    error: BaseException | None = field(default=None, compare=False)

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None and self.error is None


class PublishError(Exception):
    """Raised by a publisher for errors that are not per message (e.g. broker unreachable)."""


class MessageRejected(PublishError):
    """A per-message outcome error: the publisher proved this message can never be sent as it is (its topic name is
    illegal, a field does not encode), whatever the broker's state. Resending cannot help, so the drain stamps the
    document ``undeliverable`` instead of stopping its page on it forever (found by the fault suite's fuzzed
    documents; docs/reliability.md)."""


class Publisher(abc.ABC):
    @abc.abstractmethod
    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Send messages and wait for each one's confirmation or error, in input order.

        A message is reported confirmed only when the broker acknowledged it. Never raises for
        a per-message failure; those are returned as outcomes with ``error`` set.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


__all__ = [
    "CLOUDEVENTS_ID_HEADER",
    "MESSAGE_ID_HEADER",
    "MessageRejected",
    "MessageSource",
    "OutgoingMessage",
    "PublishConfirmation",
    "Publisher",
    "PublishError",
    "PublishOutcome",
    "ReceivedMessage",
]
