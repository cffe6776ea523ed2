"""The conformance suite of the ``Publisher`` port: what the drain relies on of every publisher (F-02, RLY-05,
RLY-07, CTR-04).

Subclass :class:`PublisherContract` in a class whose name starts with ``Test`` and implement
:meth:`~PublisherContract.make_publisher` (confirms what it is sent to :attr:`~PublisherContract.topic`) and
:meth:`~PublisherContract.make_unreachable_publisher` (whose broker cannot be reached)::

    class TestMyPublisher(PublisherContract):
        def make_publisher(self):
            return MyPublisher(...)

        def make_unreachable_publisher(self):
            return MyPublisher(broker="nowhere")

What the port promises (``ports.Publisher.send_batch``): one outcome per message, in input order, each with
exactly one of a confirmation or an error; a confirmation only for a message the broker acknowledged; a per-message
failure is returned, never raised (only a failure of the whole call may raise, as ``PublishError``); a message the
publisher proves it can never send gets ``MessageRejected`` and does not stop the rest of the batch. ``close`` may be
called more than once.

This module imports pytest; import it only from tests.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence

import pytest

from airflow_chatter.ports import MessageRejected, OutgoingMessage, Publisher, PublishError, PublishOutcome

__all__ = ["ILLEGAL_TOPIC", "PublisherContract"]

#: A topic name no Kafka broker accepts (a space): the message that carries it can never be sent as it is.
ILLEGAL_TOPIC = "an illegal topic"


def _sent_as(message: OutgoingMessage) -> tuple[bytes | None, bytes, tuple[tuple[str, bytes | None], ...]]:
    """What a publisher must keep of a message; the topic it may map (``TopicMappingPublisher``)."""
    return message.key, message.value, tuple(message.headers)


class PublisherContract(abc.ABC):
    #: The topic :meth:`make_publisher`'s publisher confirms messages to; a subclass may set it per test.
    topic = "orders"

    @abc.abstractmethod
    def make_publisher(self) -> Publisher:
        """A fresh publisher that confirms the messages it is sent to :attr:`topic`."""

    @abc.abstractmethod
    def make_unreachable_publisher(self) -> Publisher:
        """A fresh publisher whose broker cannot be reached."""

    def unsendable_message(self) -> OutgoingMessage:
        """A message the publisher can prove it can never send: by default one to :data:`ILLEGAL_TOPIC`."""
        return OutgoingMessage(ILLEGAL_TOPIC, b"{}", b"k", (("message-id", b"unsendable"),))

    @pytest.fixture
    def publisher(self) -> Iterator[Publisher]:
        publisher = self.make_publisher()
        yield publisher
        publisher.close()

    def messages(self, count: int, *, key: bytes | None = b"k", tag: str = "m") -> list[OutgoingMessage]:
        return [
            OutgoingMessage(self.topic, f"{tag}-{i}".encode(), key, (("message-id", f"{tag}-{i}".encode()),))
            for i in range(count)
        ]

    def _assert_one_outcome_each(self, messages: Sequence[OutgoingMessage], outcomes: list[PublishOutcome]) -> None:
        assert [_sent_as(outcome.message) for outcome in outcomes] == [_sent_as(m) for m in messages]
        for outcome in outcomes:
            assert (outcome.confirmation is None) != (outcome.error is None), outcome

    # ------------------------------------------------------------------------------------------------

    def test_an_empty_batch_has_no_outcomes(self, publisher: Publisher) -> None:
        assert publisher.send_batch([]) == []

    def test_one_outcome_per_message_in_input_order(self, publisher: Publisher) -> None:
        messages = self.messages(5, key=None) + self.messages(5, key=b"other", tag="o")

        outcomes = publisher.send_batch(messages)

        self._assert_one_outcome_each(messages, outcomes)
        assert all(outcome.confirmed for outcome in outcomes), [str(o.error) for o in outcomes if o.error]

    def test_a_confirmation_names_where_the_broker_put_the_message(self, publisher: Publisher) -> None:
        outcomes = publisher.send_batch(self.messages(4)) + publisher.send_batch(self.messages(4, tag="n"))

        positions = []
        for outcome in outcomes:
            confirmation = outcome.confirmation
            assert confirmation is not None and outcome.error is None and outcome.confirmed
            assert confirmation.topic == outcome.message.topic
            assert confirmation.partition >= 0 and confirmation.offset >= 0
            positions.append((confirmation.topic, confirmation.partition, confirmation.offset))
        assert len(set(positions)) == len(positions), "no two messages confirmed at one position"

    def test_one_key_keeps_one_partition_and_the_send_order(self, publisher: Publisher) -> None:
        outcomes = publisher.send_batch(self.messages(6, key=b"aggregate-1"))

        confirmations = [outcome.confirmation for outcome in outcomes]
        assert all(confirmation is not None for confirmation in confirmations)
        assert len({c.partition for c in confirmations if c is not None}) == 1
        offsets = [c.offset for c in confirmations if c is not None]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)

    def test_an_unsendable_message_is_rejected_on_its_own_and_the_rest_is_sent(self, publisher: Publisher) -> None:
        before, after = self.messages(1, tag="before"), self.messages(1, tag="after")
        messages = [*before, self.unsendable_message(), *after]

        outcomes = publisher.send_batch(messages)

        self._assert_one_outcome_each(messages, outcomes)
        assert isinstance(outcomes[1].error, MessageRejected), outcomes[1].error
        assert outcomes[0].confirmed and outcomes[2].confirmed, [str(o.error) for o in outcomes if o.error]

    def test_an_unreachable_broker_fails_every_message_and_confirms_none(self) -> None:
        publisher = self.make_unreachable_publisher()
        messages = self.messages(3)
        try:
            outcomes = publisher.send_batch(messages)
        except PublishError:
            return  # a failure of the whole call, as the port allows
        finally:
            publisher.close()
        self._assert_one_outcome_each(messages, outcomes)
        assert not any(outcome.confirmed for outcome in outcomes)
        assert not any(isinstance(outcome.error, MessageRejected) for outcome in outcomes), "no verdict on a message"

    def test_close_may_be_called_twice(self) -> None:
        publisher = self.make_publisher()
        assert publisher.send_batch(self.messages(1))[0].confirmed
        publisher.close()
        publisher.close()

    def test_close_of_a_publisher_that_never_sent(self) -> None:
        publisher = self.make_publisher()
        publisher.close()
        publisher.close()
