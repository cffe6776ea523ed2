"""The conformance suite every ``MessageSource`` must pass: what the receive loop (``airflow_chatter.inbox.receive``)
relies on. Messages come in partition order with what was produced, a poll takes at most what it was asked for,
``caught_up`` says when everything was read, and only a commit acknowledges: the same group, come back, reads on
after the last committed message and gets everything else again.

Subclass :class:`MessageSourceContract` in a class whose name starts with ``Test`` and implement
:meth:`~MessageSourceContract.make_source` and :meth:`~MessageSourceContract.reopen`::

    class TestMySource(MessageSourceContract):
        def make_source(self, records):
            return MySource(...)  # a fresh group over a fresh one-partition topic holding ``records``

        def reopen(self, source):
            source.close()
            return MySource(...)  # the same group and topic

The base class has no ``Test`` prefix, so pytest never collects it on its own. A broker takes its time to assign
partitions, so every read polls until it has what it expects or :attr:`~MessageSourceContract.read_seconds` passed.

This module imports pytest; import it only from tests.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_chatter.ports import MessageSource, ReceivedMessage


@dataclass(frozen=True)
class Record:
    """What a producer wrote: the contract compares what the source reads with it."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


def records(count: int) -> list[Record]:
    """``count`` records with a ``message-id`` header each, keyed alike so they share one partition."""
    return [Record(b"k", f"v{n}".encode(), (("message-id", f"m-{n}".encode()),)) for n in range(count)]


def as_produced(message: ReceivedMessage) -> tuple[int, Record]:
    return message.offset, Record(message.key, message.value or b"", tuple((k, v or b"") for k, v in message.headers))


class MessageSourceContract(abc.ABC):
    """Every behaviour of the ``MessageSource`` port, as a test. Subclass it; see the module docstring."""

    #: How long a read may wait for what it expects (a broker's group join and assignment take seconds).
    read_seconds: float = 30.0

    @abc.abstractmethod
    def make_source(self, records: Sequence[Record]) -> MessageSource:
        """A fresh consumer group's source over a fresh one-partition topic holding ``records`` in order."""

    @abc.abstractmethod
    def reopen(self, source: MessageSource) -> MessageSource:
        """Close ``source`` and hand back the same group's source over the same topic."""

    def read(self, source: MessageSource, count: int, max_records: int = 100) -> list[ReceivedMessage]:
        """Poll until ``count`` messages came (or ``read_seconds`` passed); every poll takes at most ``max_records``."""
        got: list[ReceivedMessage] = []
        deadline = time.monotonic() + self.read_seconds
        while len(got) < count and time.monotonic() < deadline:
            batch = source.poll(max_records=min(max_records, count - len(got)), timeout=0.5)
            assert len(batch) <= max_records, "a poll takes at most max_records"
            got.extend(batch)
        return got

    def test_messages_come_in_order_with_what_was_produced(self) -> None:
        written = records(3)
        source = self.make_source(written)
        try:
            assert [as_produced(m) for m in self.read(source, 3)] == list(enumerate(written))
        finally:
            source.close()

    def test_a_poll_takes_at_most_max_records(self) -> None:
        source = self.make_source(records(5))
        try:
            assert len(self.read(source, 5, max_records=2)) == 5
        finally:
            source.close()

    def test_the_source_is_caught_up_once_everything_was_read_and_not_before(self) -> None:
        source = self.make_source(records(2))
        try:
            assert not source.caught_up(timeout=1.0), "two messages wait"
            self.read(source, 2)
            assert source.caught_up(timeout=5.0)
            assert list(source.poll(max_records=10, timeout=0.2)) == [], "nothing more to read"
        finally:
            source.close()

    def test_what_was_not_committed_comes_again_and_what_was_committed_does_not(self) -> None:
        source = self.make_source(records(3))
        try:
            first, second, _third = self.read(source, 3)
            source.commit([first])
            source = self.reopen(source)
            assert [m.offset for m in self.read(source, 2)] == [1, 2], "uncommitted: read again"
            source.commit([second])
            source = self.reopen(source)
            assert [m.offset for m in self.read(source, 1)] == [2]
        finally:
            source.close()

    def test_a_commit_acknowledges_everything_before_the_message_on_its_partition(self) -> None:
        source = self.make_source(records(3))
        try:
            polled = self.read(source, 3)
            source.commit([polled[1]])
            source = self.reopen(source)
            assert [m.offset for m in self.read(source, 1)] == [2]
        finally:
            source.close()

    def test_nothing_is_acknowledged_without_a_commit(self) -> None:
        source = self.make_source(records(2))
        try:
            self.read(source, 2)
            source = self.reopen(source)
            assert [m.offset for m in self.read(source, 2)] == [0, 1]
        finally:
            source.close()


__all__ = ["MessageSourceContract", "Record", "records"]
