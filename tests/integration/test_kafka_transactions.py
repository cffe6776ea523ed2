"""The transactional Kafka publisher against the real broker: the Publisher contract, fencing, aborts that stay
invisible to ``read_committed``, the checkpoint record, and the refusal of a missing or non-compacted checkpoint
topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.transactions import KafkaLeaseTransactions
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import (
    CheckpointRecord,
    CheckpointStamp,
    LeaseTransactions,
    OutgoingMessage,
    ProducerFenced,
    Publisher,
    PublishError,
)
from airflow_chatter.testing.contracts.publisher import PublisherContract
from tests.fixtures.kafka import OnTheBroker, consume_records

pytestmark = pytest.mark.kafka


def _settings(bootstrap: str, **overrides: int) -> KafkaSettings:
    base = {"max_block_ms": 15_000, "request_timeout_ms": 10_000, "delivery_timeout_ms": 30_000}
    return KafkaSettings(bootstrap_servers=bootstrap, client_id="chatter-test-eo", **{**base, **overrides})


@pytest.fixture
def checkpoint_topic(kafka_bootstrap: str) -> str:
    name = f"chatter-test.checkpoints.{uuid.uuid4().hex[:12]}"
    ensure_topics(_settings(kafka_bootstrap), [name], partitions=3, configs=CHECKPOINT_TOPIC_CONFIGS)
    return name


@pytest.fixture
def factory(kafka_bootstrap: str) -> Iterator[KafkaPublisher]:
    publisher = KafkaPublisher(_settings(kafka_bootstrap))
    yield publisher
    publisher.close()


def _record(lease: str, before: str | None, after: str, *ids: str) -> CheckpointRecord:
    return CheckpointRecord(lease, before, after, tuple(CheckpointStamp(i, "tenant-1", "delivered") for i in ids))


def _message(topic: str, tag: str) -> OutgoingMessage:
    return OutgoingMessage(topic, tag.encode(), b"k", (("message-id", tag.encode()),))


def _committed_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    records = consume_records(bootstrap, topic, expected, timeout_s=30, isolation_level="read_committed")
    return [r.value for r in records]


class TestKafkaLeaseTransactions(OnTheBroker, PublisherContract):
    """The Publisher contract on the transactional publisher: outside a page's transaction each batch commits on its
    own, so confirmed still means visible to every consumer."""

    def make_publisher(self) -> Publisher:
        return KafkaLeaseTransactions(_settings(self.bootstrap), f"contract-{uuid.uuid4().hex}", "unused")

    def make_unreachable_publisher(self) -> Publisher:
        settings = _settings(self.unreachable_address, max_block_ms=2_000, request_timeout_ms=1_000)
        return KafkaLeaseTransactions(settings, f"contract-{uuid.uuid4().hex}", "unused")


def test_a_takeover_fences_the_earlier_owner_whose_commit_is_refused(
    factory: KafkaPublisher, kafka_bootstrap: str, kafka_topic: str, checkpoint_topic: str
) -> None:
    """Fencing: the drain that opens a lease's transactional id second wins; the first one's late commit raises
    ProducerFenced, its open transaction never becomes visible, and it refuses to publish again."""
    transactional_id = f"lease-{uuid.uuid4().hex}"
    first = factory.lease_transactions(transactional_id, checkpoint_topic)
    first.begin()
    assert first.send_batch([_message(kafka_topic, "old-owner")])[0].confirmed

    second = factory.lease_transactions(transactional_id, checkpoint_topic)  # the takeover

    with pytest.raises(ProducerFenced, match="taken by another producer"):
        first.commit(_record("lease-a", None, "c1", "old-owner"))
    with pytest.raises(ProducerFenced):
        first.send_batch([_message(kafka_topic, "old-owner-again")])
    second.begin()
    assert second.send_batch([_message(kafka_topic, "new-owner")])[0].confirmed
    second.commit(_record("lease-a", None, "c1", "new-owner"))
    assert _committed_values(kafka_bootstrap, kafka_topic, 1) == [b"new-owner"], "the fenced page never shows"
    assert second.last_checkpoint() == _record("lease-a", None, "c1", "new-owner")
    first.close()
    second.close()


def test_an_aborted_transaction_is_invisible_to_read_committed(
    factory: KafkaPublisher, kafka_bootstrap: str, kafka_topic: str, checkpoint_topic: str
) -> None:
    """An aborted page: its messages and its checkpoint record are never read by a read_committed consumer; the
    committed barrier after it proves the consumer read past it."""
    transactions = factory.lease_transactions(f"lease-{uuid.uuid4().hex}", checkpoint_topic)
    transactions.begin()
    transactions.send_batch([_message(kafka_topic, "aborted-1"), _message(kafka_topic, "aborted-2")])
    transactions.abort()
    transactions.begin()
    transactions.send_batch([_message(kafka_topic, "barrier")])
    transactions.commit(_record("lease-b", "c1", "c2", "barrier"))

    assert _committed_values(kafka_bootstrap, kafka_topic, 1) == [b"barrier"]
    assert transactions.last_checkpoint() == _record("lease-b", "c1", "c2", "barrier")
    transactions.close()


def test_the_last_committed_checkpoint_record_of_each_lease_is_read_back(
    factory: KafkaPublisher, checkpoint_topic: str, kafka_topic: str
) -> None:
    """Each lease reads its own last committed record, not an earlier one, not another lease's, not an aborted
    one; a lease that never committed has none."""
    a = factory.lease_transactions(f"lease-a-{uuid.uuid4().hex}", checkpoint_topic)
    b = factory.lease_transactions(f"lease-b-{uuid.uuid4().hex}", checkpoint_topic)
    for step in range(3):
        a.begin()
        a.send_batch([_message(kafka_topic, f"a{step}")])
        a.commit(_record("a", f"c{step}", f"c{step + 1}", f"a{step}"))
    b.begin()
    b.send_batch([_message(kafka_topic, "b0")])
    b.commit(_record("b", None, "b1", "b0"))
    a.begin()
    a.send_batch([_message(kafka_topic, "a-aborted")])
    a.abort()

    assert a.last_checkpoint() == _record("a", "c2", "c3", "a2")
    assert a.last_checkpoint(b.transactional_id) == _record("b", None, "b1", "b0")
    assert a.last_checkpoint(f"never-{uuid.uuid4().hex}") is None
    a.close()
    b.close()


def test_a_missing_checkpoint_topic_is_refused_naming_the_field(factory: KafkaPublisher) -> None:
    missing = f"chatter-test.no-such-checkpoints.{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigurationError, match="does not exist") as refused:
        factory.lease_transactions(f"lease-{uuid.uuid4().hex}", missing)
    assert refused.value.option == "checkpoint_topic"


def test_a_checkpoint_topic_that_is_not_compacted_is_refused_naming_the_field(
    factory: KafkaPublisher, kafka_bootstrap: str
) -> None:
    deleting = f"chatter-test.deleting-checkpoints.{uuid.uuid4().hex[:8]}"
    ensure_topics(_settings(kafka_bootstrap), [deleting], partitions=1)
    with pytest.raises(ConfigurationError, match="cleanup.policy=delete") as refused:
        factory.lease_transactions(f"lease-{uuid.uuid4().hex}", deleting)
    assert refused.value.option == "checkpoint_topic"


def test_opening_returns_lease_transactions_of_the_given_id(factory: KafkaPublisher, checkpoint_topic: str) -> None:
    transactions = factory.lease_transactions("chatter.lease-x", checkpoint_topic)
    assert isinstance(transactions, LeaseTransactions) and transactions.transactional_id == "chatter.lease-x"
    transactions.close()


def test_the_consumer_reads_committed_only_and_hands_on_no_aborted_message(
    factory: KafkaPublisher, kafka_bootstrap: str, kafka_topic: str, checkpoint_topic: str
) -> None:
    """The receiver's consumer (consumer_config) reads read_committed: an aborted page is never handed to a handler,
    the committed barrier after it is."""
    from kafka import KafkaConsumer

    from airflow_chatter.adapters.kafka.consumer import consume_batch, consumer_config

    transactions = factory.lease_transactions(f"lease-{uuid.uuid4().hex}", checkpoint_topic)
    transactions.begin()
    transactions.send_batch([_message(kafka_topic, "aborted")])
    transactions.abort()
    transactions.begin()
    transactions.send_batch([_message(kafka_topic, "barrier")])
    transactions.commit(_record("lease-c", None, "c1", "barrier"))
    transactions.close()
    consumer = KafkaConsumer(kafka_topic, **consumer_config(_settings(kafka_bootstrap), group_id=uuid.uuid4().hex))
    handled: list[str | None] = []
    try:
        for _ in range(10):
            consume_batch(consumer, lambda m: handled.append(m.message_id), max_messages=10, max_seconds=3)
            if "barrier" in handled:
                break
    finally:
        consumer.close()
    assert handled == ["barrier"], "the aborted message is never handed on; the barrier proves the read got past it"


def test_provision_creates_the_checkpoint_topic_compacted_once_and_refuses_a_deleting_one(
    kafka_bootstrap: str,
) -> None:
    """``airflow-chatter provision``'s Kafka step: a missing checkpoint topic is created compacted (a second run has
    nothing to do), and an existing topic that is not compacted is refused naming checkpoint_topic, not changed."""
    from airflow_chatter.airflow.cli.commands import checkpoint_topic

    settings = _settings(kafka_bootstrap)
    name = f"chatter-test.provisioned.{uuid.uuid4().hex[:8]}"

    assert checkpoint_topic(name, settings) == (
        f"created checkpoint topic {name!r} (cleanup.policy=compact, 3 partitions)",
        True,
    )
    assert checkpoint_topic(name, settings)[1] is False, "a second run has nothing to do"
    deleting = f"chatter-test.deleting.{uuid.uuid4().hex[:8]}"
    ensure_topics(settings, [deleting], partitions=1)
    with pytest.raises(ConfigurationError, match="cleanup.policy=delete") as refused:
        checkpoint_topic(deleting, settings)
    assert refused.value.option == "checkpoint_topic"


def test_a_message_the_broker_refuses_commits_nothing_of_its_page(
    kafka_bootstrap: str, kafka_topic: str, checkpoint_topic: str
) -> None:
    """F-16 (confirmed means committed): the page's messages are only handed to the transaction, and the commit
    waits for them and the checkpoint record in one flush. A message the broker refuses (larger than its topic
    takes, which the producer cannot know) makes the commit raise that message's error before anything commits; the
    page's other message and its checkpoint record are never read by a read_committed consumer, as the committed
    barrier after them proves."""
    small = f"chatter-test.small-messages.{uuid.uuid4().hex[:8]}"
    ensure_topics(_settings(kafka_bootstrap), [small], partitions=1, configs={"max.message.bytes": "1000"})
    transactions = KafkaPublisher(_settings(kafka_bootstrap)).lease_transactions(
        f"lease-{uuid.uuid4().hex}", checkpoint_topic
    )
    transactions.begin()
    too_large = OutgoingMessage(small, b"x" * 5_000, b"k", (("message-id", b"page-2"),))
    held = transactions.send_batch([_message(kafka_topic, "page-1"), too_large])
    assert all(o.confirmed for o in held), "held by the transaction: the broker has not answered yet"

    with pytest.raises(PublishError, match="message 2 of 2"):
        transactions.commit(_record("lease-d", "c1", "c2", "page-1", "page-2"))
    transactions.abort()
    transactions.begin()
    transactions.send_batch([_message(kafka_topic, "barrier")])
    transactions.commit(_record("lease-d", "c1", "c2", "barrier"))

    assert _committed_values(kafka_bootstrap, kafka_topic, 1) == [b"barrier"], "nothing of the refused page shows"
    assert transactions.last_checkpoint() == _record("lease-d", "c1", "c2", "barrier"), "nor its record"
    transactions.close()
