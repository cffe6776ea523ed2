"""KafkaPublisher leaves every partition choice to kafka-python, without a broker.

Same key, same partition: the one kafka-python's ``DefaultPartitioner`` picks; keyless records are spread by
kafka-python too. The publisher passes no ``partition=`` and hands headers over as (name, value) tuples.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.future import Future
from kafka.partitioner import DefaultPartitioner
from kafka.producer.future import RecordMetadata

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import OutgoingMessage


class FakeCluster:
    """The part of kafka-python's ``ClusterMetadata`` the partitioner reads."""

    def __init__(self, **topics: set[int]) -> None:
        self.partitions = dict(topics)

    def topics(self) -> set[str]:
        return set(self.partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        found = self.partitions.get(topic)
        return None if found is None else set(found)

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions_for_topic(topic)


def default_choice(cluster: FakeCluster, topic: str, key: bytes) -> int:
    return int(DefaultPartitioner().partition(topic, key, key, b"v", b"v", cluster))


class PartitionedProducer:
    """A scripted producer that partitions as kafka-python does and records each send's arguments."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self.calls: list[dict[str, Any]] = []

    def send(self, topic: str, **kwargs: Any) -> Future:
        self.calls.append(dict(kwargs, topic=topic))
        headers = kwargs["headers"]
        if not all(isinstance(h, tuple) and len(h) == 2 for h in headers):
            raise TypeError("All headers items must be (str, bytes) tuples")
        partition = kwargs.get("partition")
        if partition is None:
            partition = 0 if kwargs["key"] is None else default_choice(self._cluster, topic, kwargs["key"])
        future = Future()
        future.success(RecordMetadata(topic, partition, (topic, partition), len(self.calls), 0, None, 0, 0, 0))
        return future

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


def _publisher(producer: PartitionedProducer) -> KafkaPublisher:
    return KafkaPublisher(KafkaSettings(bootstrap_servers="k:9092"), producer_factory=lambda **cfg: producer)


KEYS = [f"tenant-{i}".encode() for i in range(40)] + [b"", b"\x00\xff", "grüße".encode(), b"x" * 300]


def test_the_same_key_lands_on_the_partition_the_producer_picks() -> None:
    cluster = FakeCluster(t=set(range(5)))
    producer = PartitionedProducer(cluster)
    publisher = _publisher(producer)
    messages = [OutgoingMessage("t", f"v{i}".encode(), KEYS[i % len(KEYS)]) for i in range(len(KEYS) * 3)]

    outcomes = publisher.send_batch(messages[:50]) + publisher.send_batch(messages[50:])

    assert all(o.confirmed for o in outcomes)
    assert all("partition" not in call for call in producer.calls), "kafka-python picks the partition"
    chosen: dict[bytes, set[int]] = {}
    for outcome in outcomes:
        assert outcome.confirmation is not None and outcome.message.key is not None
        chosen.setdefault(outcome.message.key, set()).add(outcome.confirmation.partition)
    assert chosen == {key: {default_choice(cluster, "t", key)} for key in KEYS}
    assert len({partition for partitions in chosen.values() for partition in partitions}) > 1


def test_settings_cannot_configure_a_partitioner_or_a_key_serializer() -> None:
    config = KafkaSettings(bootstrap_servers="k:9092").producer_config()
    assert "partitioner" not in config and "key_serializer" not in config
    for name in ("partitioner", "key_serializer"):
        with pytest.raises(ValueError, match="not a Kafka publisher setting"):
            KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", name: object()})


def test_header_pairs_are_sent_as_tuples_and_a_header_that_is_no_pair_is_refused() -> None:
    producer = PartitionedProducer(FakeCluster(t={0, 1, 2}))
    pairs: Any = [["id", b"1"], ("type", b"x")]  # not what the type says, but pairs all the same
    bad: Any = (("id", b"1", b"extra"),)
    messages = [OutgoingMessage("t", b"v", b"k", pairs), OutgoingMessage("t", b"w", b"k", bad)]

    outcomes = _publisher(producer).send_batch(messages)

    assert outcomes[0].confirmed
    assert producer.calls[0]["headers"] == [("id", b"1"), ("type", b"x")]
    assert not outcomes[1].confirmed
    assert isinstance(outcomes[1].error.__cause__ if outcomes[1].error else None, ValueError)  # as unpacking it is
    assert "too many values to unpack" in str(outcomes[1].error)
