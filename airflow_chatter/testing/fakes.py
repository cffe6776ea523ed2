"""A fake ``Publisher`` that records what it is asked to send and fails on demand.

It models a Kafka producer honestly: every message of a ``send_batch`` call is handed to the
"broker" (an attempt is recorded) and gets its own outcome; a per-message fault fails only that
message. ``fail_batch`` models a broker that cannot be reached at all (``PublishError`` for the whole
call, nothing sent).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_chatter.ports import (
    OutgoingMessage,
    PublishConfirmation,
    Publisher,
    PublishError,
    PublishOutcome,
)

__all__ = ["FakePublisher", "PublishFault"]


@dataclass
class PublishFault:
    """One armed fault: which messages it hits and what error they get."""

    matches: Callable[[int, OutgoingMessage], bool]
    error: BaseException
    remaining: int | None = None  # None: forever

    def hit(self, ordinal: int, message: OutgoingMessage) -> bool:
        if self.remaining == 0 or not self.matches(ordinal, message):
            return False
        if self.remaining is not None:
            self.remaining -= 1
        return True


class FakePublisher(Publisher):
    """Records every message; ``sent`` holds only the confirmed ones, in confirmation order.

    ``partitions`` per topic (default 1) are chosen from the key like Kafka's default partitioner
    would (stable hash), so per-key ordering can be asserted on ``(topic, partition)`` offsets.
    """

    def __init__(self, *, partitions: int = 1) -> None:
        self.partitions = partitions
        self.sent: list[OutgoingMessage] = []
        self.attempted: list[OutgoingMessage] = []
        self.failed: list[tuple[OutgoingMessage, BaseException]] = []
        self.batches: list[list[OutgoingMessage]] = []
        self.send_batch_calls = 0
        self.closed = False
        self._faults: list[PublishFault] = []
        self._batch_faults: list[tuple[int | None, BaseException]] = []
        self._offsets: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------------ fault injection

    def fail_nth(self, n: int, error: BaseException | None = None) -> None:
        """Fail the ``n``-th message ever attempted (1-based, counted across batches)."""
        self._faults.append(PublishFault(lambda i, _m: i == n, error or PublishError(f"fault on message {n}"), 1))

    def fail_all(self, error: BaseException | None = None, *, times: int | None = None) -> None:
        """Fail every message (or the next ``times`` messages)."""
        self._faults.append(PublishFault(lambda _i, _m: True, error or PublishError("fault"), times))

    def fail_topic(self, topic: str, error: BaseException | None = None) -> None:
        """Fail every message to ``topic`` (e.g. an unknown topic or ACL denial)."""
        self._faults.append(
            PublishFault(lambda _i, m: m.topic == topic, error or PublishError(f"topic {topic} refused"))
        )

    def fail_batch(self, error: BaseException | None = None, *, on_call: int | None = None) -> None:
        """Raise ``error`` (default ``PublishError``) for a whole ``send_batch`` call.

        ``on_call`` is 1-based; ``None`` raises on every call until ``clear_faults``.
        """
        self._batch_faults.append((on_call, error or PublishError("broker unreachable")))

    def clear_faults(self) -> None:
        self._faults.clear()
        self._batch_faults.clear()

    # ------------------------------------------------------------------ the port

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Send each message and report its own outcome, in input order."""
        self.send_batch_calls += 1
        for on_call, error in self._batch_faults:
            if on_call is None or on_call == self.send_batch_calls:
                raise error
        batch = list(messages)
        self.batches.append(batch)
        return [self._send_one(message) for message in batch]

    def close(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------ helpers

    def topics(self) -> list[str]:
        return [m.topic for m in self.sent]

    def values(self, topic: str | None = None) -> list[bytes]:
        return [m.value for m in self.sent if topic is None or m.topic == topic]

    def _send_one(self, message: OutgoingMessage) -> PublishOutcome:
        self.attempted.append(message)
        ordinal = len(self.attempted)
        for fault in self._faults:
            if fault.hit(ordinal, message):
                self.failed.append((message, fault.error))
                return PublishOutcome(message, error=fault.error)
        partition = zlib.crc32(message.key or b"") % self.partitions
        offset = self._offsets.get((message.topic, partition), 0)
        self._offsets[(message.topic, partition)] = offset + 1
        self.sent.append(message)
        return PublishOutcome(message, confirmation=PublishConfirmation(message.topic, partition, offset))
