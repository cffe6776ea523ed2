"""KafkaPublisher's remembered key -> partition choice (``_KeyPartitions``), without a broker.

The choice must be exactly kafka-python's ``DefaultPartitioner``'s, follow the topic's partition set,
stay bounded in memory, and be used only when the producer really partitions with the default
partitioner; keyless records are left to kafka-python.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.future import Future
from kafka.partitioner import DefaultPartitioner, Partitioner
from kafka.partitioner.default import murmur2
from kafka.producer.future import RecordMetadata
from kafka.serializer import Serializer

from airflow_chatter.adapters.kafka import publisher as adapter
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher, KafkaPublisherSettings, _KeyPartitions
from airflow_chatter.ports import OutgoingMessage


class FakeCluster:
    """The part of kafka-python's ``ClusterMetadata`` the partitioners read; partitions settable."""

    def __init__(self, **topics: set[int]) -> None:
        self.partitions = dict(topics)
        self.reads = 0

    def topics(self) -> set[str]:
        return set(self.partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        self.reads += 1
        found = self.partitions.get(topic)
        return None if found is None else set(found)

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions_for_topic(topic)


def default_choice(cluster: FakeCluster, topic: str, key: bytes) -> int:
    return int(DefaultPartitioner().partition(topic, key, key, b"v", b"v", cluster))


KEYS = [f"tenant-{i}".encode() for i in range(200)] + [b"", b"\x00\xff", "grüße".encode(), b"x" * 300]


@pytest.mark.parametrize("partitions", [{0}, {0, 1, 2}, set(range(7)), {3, 1, 8, 5}])
def test_the_choice_is_the_default_partitioners(partitions: set[int]) -> None:
    cluster = FakeCluster(t=partitions)
    cache = _KeyPartitions(cluster)
    for _ in range(2):  # computed, then remembered
        for key in KEYS:
            assert cache.partition("t", key) == default_choice(cluster, "t", key), key
    ordered = sorted(partitions)
    assert cache.partition("t", b"order-1") == ordered[(murmur2(b"order-1") & 0x7FFFFFFF) % len(ordered)]


def test_a_changed_partition_set_is_followed_at_the_next_record() -> None:
    cluster = FakeCluster(t={0, 1}, u={0, 1, 2})
    cache = _KeyPartitions(cluster)
    before = {key: cache.partition("t", key) for key in KEYS}
    assert set(before.values()) == {0, 1}
    assert cache.cached_keys() == len(KEYS)

    cluster.partitions["t"] = set(range(5))  # partitions added (kafka-python's metadata updated)
    after = {key: cache.partition("t", key) for key in KEYS}
    assert after == {key: default_choice(cluster, "t", key) for key in KEYS}
    assert set(after.values()) == set(range(5))
    assert any(after[key] != before[key] for key in KEYS)
    # Another topic's table is untouched by it.
    assert [cache.partition("u", key) for key in KEYS] == [default_choice(cluster, "u", key) for key in KEYS]


def test_unknown_topics_and_topics_without_partitions_are_left_to_kafka_python() -> None:
    cluster = FakeCluster(empty=set())
    cache = _KeyPartitions(cluster)
    assert cache.partition("unknown", b"k") is None
    assert cache.partition("empty", b"k") is None
    cluster.partitions["unknown"] = {0, 1, 2}  # metadata arrived
    assert cache.partition("unknown", b"k") == default_choice(cluster, "unknown", b"k")


def test_the_cache_is_bounded_for_many_keys_and_many_topics() -> None:
    cluster = FakeCluster(t={0, 1, 2}, **{f"topic-{n}": {0, 1} for n in range(3 * adapter._PARTITION_CACHE_TOPICS)})
    cache = _KeyPartitions(cluster)
    for n in range(3 * adapter._PARTITION_CACHE_KEYS):
        key = f"order-{n}".encode()
        assert cache.partition("t", key) == default_choice(cluster, "t", key)
        assert cache.cached_keys() <= adapter._PARTITION_CACHE_KEYS
    for n in range(3 * adapter._PARTITION_CACHE_TOPICS):
        topic = f"topic-{n}"
        assert cache.partition(topic, b"k") == default_choice(cluster, topic, b"k")
        assert len(cache._tables) <= adapter._PARTITION_CACHE_TOPICS
    assert cache.cached_keys() <= adapter._PARTITION_CACHE_TOPICS


# ------------------------------------------------------------------------------------------------
# When the cache is used at all.
# ------------------------------------------------------------------------------------------------


class OddPartitioner(Partitioner):
    def partition(
        self, topic: Any, key: Any, serialized_key: Any, value: Any, serialized_value: Any, cluster: Any
    ) -> int:
        return 0


class RawSerializer(Serializer):
    def serialize(self, topic: Any, headers: Any, value: Any) -> Any:
        return value


def _real_producer(**extra: Any) -> KafkaProducer:
    settings = KafkaPublisherSettings(bootstrap_servers="127.0.0.1:1")  # api_version pinned: no network I/O
    return KafkaProducer(**settings.producer_config(), **extra)


@pytest.mark.parametrize(
    ("extra", "cached"),
    [
        ({}, True),
        ({"partitioner": OddPartitioner()}, False),
        ({"key_serializer": RawSerializer()}, False),
    ],
)
def test_only_a_producer_with_the_default_partitioner_and_raw_keys_gets_the_cache(
    extra: dict[str, Any], cached: bool
) -> None:
    producer = _real_producer(**extra)
    try:
        assert (_KeyPartitions.for_producer(producer) is not None) is cached
    finally:
        producer.close(timeout=0)


def test_settings_cannot_configure_a_partitioner_or_a_key_serializer() -> None:
    config = KafkaPublisherSettings(bootstrap_servers="k:9092").producer_config()
    assert "partitioner" not in config and "key_serializer" not in config
    for name in ("partitioner", "key_serializer"):
        with pytest.raises(ValueError, match="not a Kafka publisher setting"):
            KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", name: object()})


class PartitionedProducer:
    """A scripted producer that looks like kafka-python's default set-up and records each send's arguments."""

    def __init__(self, cluster: FakeCluster, partitioner: Any = None, **config: Any) -> None:
        self.config = dict(config, partitioner=partitioner or DefaultPartitioner(), key_serializer=None)
        self._metadata = cluster
        self.calls: list[dict[str, Any]] = []
        self.refuse_partitions: set[int] = set()

    def send(self, topic: str, **kwargs: Any) -> Future:
        self.calls.append(dict(kwargs, topic=topic))
        headers = kwargs["headers"]
        if not all(isinstance(h, tuple) and len(h) == 2 for h in headers):
            raise TypeError("All headers items must be (str, bytes) tuples")
        partition = kwargs.get("partition")
        if partition in self.refuse_partitions:
            raise ValueError(f"Unrecognized partition {partition} for topic {topic}")
        if partition is None:
            partition = 0 if kwargs["key"] is None else default_choice(self._metadata, topic, kwargs["key"])
        future = Future()
        future.success(RecordMetadata(topic, partition, (topic, partition), len(self.calls), 0, None, 0, 0, 0))
        return future

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


def _publisher(producer: PartitionedProducer) -> KafkaPublisher:
    return KafkaPublisher(KafkaPublisherSettings(bootstrap_servers="k:9092"), producer_factory=lambda **cfg: producer)


def test_keyed_records_carry_the_default_choice_and_keyless_ones_none() -> None:
    cluster = FakeCluster(t={0, 1, 2})
    producer = PartitionedProducer(cluster)
    keys: list[bytes | None] = [b"a", None, b"b", b"a", bytearray(b"c"), None]  # type: ignore[list-item]
    messages = [OutgoingMessage("t", f"v{i}".encode(), key, (("id", b"%d" % i),)) for i, key in enumerate(keys)]

    outcomes = _publisher(producer).send_batch(messages)

    assert all(o.confirmed for o in outcomes)
    for call, message in zip(producer.calls, messages, strict=True):
        assert call["key"] is message.key and call["value"] is message.value
        assert call["headers"] == list(message.headers)
        if type(message.key) is bytes:
            assert call["partition"] == default_choice(cluster, "t", message.key)
        else:  # keyless (kafka-python's own choice) and non-bytes keys: no partition passed
            assert "partition" not in call
    confirmations = [o.confirmation for o in outcomes]
    assert [c.partition for c in confirmations if c is not None][0] == default_choice(cluster, "t", b"a")


def test_a_non_default_partitioner_gets_no_partition() -> None:
    producer = PartitionedProducer(FakeCluster(t={0, 1, 2}), partitioner=OddPartitioner())
    outcomes = _publisher(producer).send_batch([OutgoingMessage("t", b"v", b"k")])
    assert outcomes[0].confirmed
    assert "partition" not in producer.calls[0]


def test_a_refused_partition_is_resent_without_one() -> None:
    cluster = FakeCluster(t={0, 1, 2})
    producer = PartitionedProducer(cluster)
    chosen = default_choice(cluster, "t", b"k")
    producer.refuse_partitions.add(chosen)  # the partition set changed between the choice and the send

    outcomes = _publisher(producer).send_batch([OutgoingMessage("t", b"v", b"k")])

    assert outcomes[0].confirmed
    assert [call.get("partition") for call in producer.calls] == [chosen, None]


def test_headers_that_are_not_tuples_are_resent_as_tuples_with_the_partition() -> None:
    producer = PartitionedProducer(FakeCluster(t={0, 1, 2}))
    pairs: Any = [["id", b"1"], ("type", b"x")]  # not what the type says, but what the old code accepted
    bad: Any = (("id", b"1", b"extra"),)
    messages = [OutgoingMessage("t", b"v", b"k", pairs), OutgoingMessage("t", b"w", b"k", bad)]

    outcomes = _publisher(producer).send_batch(messages)

    assert outcomes[0].confirmed
    assert [call["headers"] for call in producer.calls[:2]] == [pairs, [("id", b"1"), ("type", b"x")]]
    assert producer.calls[0]["partition"] == producer.calls[1]["partition"] is not None
    assert not outcomes[1].confirmed
    assert isinstance(outcomes[1].error.__cause__ if outcomes[1].error else None, ValueError)  # as unpacking it was
    assert "too many values to unpack" in str(outcomes[1].error)


def test_a_rebuilt_producer_gets_a_fresh_cache() -> None:
    clusters = [FakeCluster(t={0, 1}), FakeCluster(t=set(range(6)))]
    producers = [PartitionedProducer(c) for c in clusters]
    publisher = KafkaPublisher(
        KafkaPublisherSettings(bootstrap_servers="k:9092"), producer_factory=lambda **cfg: producers.pop(0)
    )
    first = publisher._ensure_producer()
    publisher.send_batch([OutgoingMessage("t", b"v", b"key-7")])
    publisher._needs_rebuild = True
    publisher.send_batch([OutgoingMessage("t", b"v", b"key-7")])
    second = publisher._producer
    assert second is not first
    assert first.calls[0]["partition"] == default_choice(clusters[0], "t", b"key-7")
    assert second.calls[0]["partition"] == default_choice(clusters[1], "t", b"key-7")
