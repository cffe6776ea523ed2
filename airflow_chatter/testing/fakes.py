"""A fake ``Publisher`` that records what it is asked to send and fails as its handler says.

It models a Kafka producer honestly: every message of a ``send_batch`` call is handed to the "broker" (an attempt
is recorded) and gets its own outcome. What the broker does with a message is one function, the handler (as
httpx's ``MockTransport`` takes one): ``handler(message)`` returns ``None`` to confirm it, or the exception that
message fails with; a handler that *raises* fails the whole call (a broker that cannot be reached: nothing sent).
The factories below build the handlers tests need (``testing.handlers.first_of`` arms several); a test may
also write its own.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

from airflow_chatter.ports import (
    OutgoingMessage,
    PublishConfirmation,
    Publisher,
    PublishError,
    PublishOutcome,
)

__all__ = ["FakePublisher", "PublishHandler", "fail_all", "fail_nth", "fail_topic", "unreachable"]

#: What the fake broker does with one message: ``None`` confirms it, an exception is its error; raising fails the
#: whole ``send_batch`` call.
PublishHandler = Callable[[OutgoingMessage], BaseException | None]


def fail_nth(n: int, error: BaseException | None = None) -> PublishHandler:
    """Fail the ``n``-th message the handler is given (1-based, counted across batches), once."""
    failure = error or PublishError(f"fault on message {n}")
    seen = 0

    def handle(_message: OutgoingMessage) -> BaseException | None:
        nonlocal seen
        seen += 1
        return failure if seen == n else None

    return handle


def fail_all(error: BaseException | None = None, *, times: int | None = None) -> PublishHandler:
    """Fail every message (or the next ``times`` messages)."""
    failure = error or PublishError("fault")
    left = times

    def handle(_message: OutgoingMessage) -> BaseException | None:
        nonlocal left
        if left is None:
            return failure
        if left == 0:
            return None
        left -= 1
        return failure

    return handle


def fail_topic(topic: str, error: BaseException | None = None) -> PublishHandler:
    """Fail every message to ``topic`` (e.g. an unknown topic or ACL denial)."""
    failure = error or PublishError(f"topic {topic} refused")
    return lambda message: failure if message.topic == topic else None


def unreachable(error: BaseException | None = None) -> PublishHandler:
    """Raise ``error`` (default ``PublishError``) for every ``send_batch`` call: a broker that cannot be reached."""
    failure = error or PublishError("broker unreachable")

    def handle(_message: OutgoingMessage) -> BaseException | None:
        raise failure

    return handle


class FakePublisher(Publisher):
    """Records every message; ``sent`` holds only the confirmed ones, in confirmation order.

    ``handler`` (``None``: confirm every message) may be replaced at any time. ``partitions`` per topic (default 1)
    are chosen from the key like Kafka's default partitioner would (stable hash), so per-key ordering can be
    asserted on ``(topic, partition)`` offsets.
    """

    def __init__(self, handler: PublishHandler | None = None, *, partitions: int = 1) -> None:
        self.handler = handler
        self.partitions = partitions
        self.sent: list[OutgoingMessage] = []
        self.attempted: list[OutgoingMessage] = []
        self.failed: list[tuple[OutgoingMessage, BaseException]] = []
        self.batches: list[list[OutgoingMessage]] = []
        self.send_batch_calls = 0
        self.closed = False
        self._offsets: dict[tuple[str, int], int] = {}

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Send each message and report its own outcome, in input order."""
        self.send_batch_calls += 1
        batch = list(messages)
        handler = self.handler
        errors = [None if handler is None else handler(message) for message in batch]  # a raise: nothing sent
        self.batches.append(batch)
        return [self._send_one(message, error) for message, error in zip(batch, errors, strict=True)]

    def close(self) -> None:
        self.closed = True

    def topics(self) -> list[str]:
        return [m.topic for m in self.sent]

    def values(self, topic: str | None = None) -> list[bytes]:
        return [m.value for m in self.sent if topic is None or m.topic == topic]

    def _send_one(self, message: OutgoingMessage, error: BaseException | None) -> PublishOutcome:
        self.attempted.append(message)
        if error is not None:
            self.failed.append((message, error))
            return PublishOutcome(message, error=error)
        partition = zlib.crc32(message.key or b"") % self.partitions
        offset = self._offsets.get((message.topic, partition), 0)
        self._offsets[(message.topic, partition)] = offset + 1
        self.sent.append(message)
        return PublishOutcome(message, confirmation=PublishConfirmation(message.topic, partition, offset))
