"""KafkaPublisher against a real Apache Kafka 4.x broker (scripts/kafka.sh or KAFKA_BOOTSTRAP_SERVERS).

Every claim is checked by reading the topic back with a KafkaConsumer, never by the publisher's
word alone.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import pytest

from airflow_chatter.adapters.kafka.admin import check_connectivity, ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import OutgoingMessage, PublishError, PublishOutcome
from tests.fixtures.kafka import KafkaBroker, consume_records

pytestmark = pytest.mark.kafka


def _settings(bootstrap: str, **overrides: Any) -> KafkaSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "client_id": "chatter-test-publisher",
        "max_block_ms": 15_000,
        "request_timeout_ms": 10_000,
        "delivery_timeout_ms": 30_000,
    }
    values.update(overrides)
    return KafkaSettings(**values)


@pytest.fixture
def publisher(kafka_bootstrap: str) -> Iterator[KafkaPublisher]:
    pub = KafkaPublisher(_settings(kafka_bootstrap))
    yield pub
    pub.close()


def _by_position(records: Sequence[Any]) -> dict[tuple[int, int], Any]:
    return {(r.partition, r.offset): r for r in records}


def _assert_exactly_one_result(outcomes: Sequence[PublishOutcome]) -> None:
    for outcome in outcomes:
        assert (outcome.confirmation is None) != (outcome.error is None), outcome


def test_round_trip_of_key_value_and_headers(publisher: KafkaPublisher, kafka_bootstrap: str, kafka_topic: str) -> None:
    messages = [
        OutgoingMessage(
            topic=kafka_topic,
            value='{"order": 1, "note": "grüße"}'.encode(),
            key=b"order-1",
            headers=(
                ("message-id", b"m-1"),
                ("content-type", b"application/json"),
                ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                ("empty", b""),
                ("dup", b"first"),
                ("dup", b"second"),
            ),
        ),
        OutgoingMessage(topic=kafka_topic, value=b"\x00\x01binary\xff", key=None, headers=()),
        OutgoingMessage(topic=kafka_topic, value=b"", key=b"order-2", headers=(("message-id", b"m-3"),)),
    ]

    outcomes = publisher.send_batch(messages)

    assert [o.message for o in outcomes] == messages
    assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes]
    _assert_exactly_one_result(outcomes)
    # The live producer really is idempotent with acks=all (kafka-python did not quietly degrade it).
    producer = publisher._producer
    assert producer is not None
    assert producer.config["acks"] == -1
    assert producer.config["enable_idempotence"] is True

    consumed = _by_position(consume_records(kafka_bootstrap, kafka_topic, len(messages)))
    assert len(consumed) == len(messages)
    for outcome in outcomes:
        conf = outcome.confirmation
        assert conf is not None and conf.topic == kafka_topic
        record = consumed[(conf.partition, conf.offset)]
        assert record.key == outcome.message.key
        assert record.value == outcome.message.value
        assert [(k, v) for k, v in record.headers] == list(outcome.message.headers)


def test_order_per_key_over_several_hundred_messages(
    publisher: KafkaPublisher, kafka_bootstrap: str, kafka_topic: str
) -> None:
    keys = [f"aggregate-{n}".encode() for n in range(7)]
    messages = [
        OutgoingMessage(
            topic=kafka_topic,
            key=keys[i % len(keys)],
            value=f"{keys[i % len(keys)].decode()}:{i // len(keys)}".encode(),
            headers=(("message-id", f"m-{i}".encode()),),
        )
        for i in range(420)
    ]

    outcomes: list[PublishOutcome] = []
    for start in range(0, len(messages), 150):  # several batches through one producer
        outcomes.extend(publisher.send_batch(messages[start : start + 150]))

    assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes if o.error][:3]
    records = consume_records(kafka_bootstrap, kafka_topic, len(messages))
    assert len(records) == len(messages)

    seen: dict[bytes, list[int]] = defaultdict(list)
    partitions: dict[bytes, set[int]] = defaultdict(set)
    for record in records:  # per partition in offset order
        seen[record.key].append(int(record.value.decode().rsplit(":", 1)[1]))
        partitions[record.key].add(record.partition)
    for key in keys:
        assert seen[key] == list(range(60)), key
        assert len(partitions[key]) == 1, (key, partitions[key])

    # Confirmations agree: per key one partition and strictly increasing offsets in send order.
    by_key: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for outcome in outcomes:
        assert outcome.confirmation is not None
        by_key[outcome.message.key or b""].append((outcome.confirmation.partition, outcome.confirmation.offset))
    for key, positions in by_key.items():
        assert len({p for p, _ in positions}) == 1, key
        offsets = [o for _, o in positions]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), key


def test_confirmations_carry_the_partition_and_offset_that_is_consumed(kafka_bootstrap: str, kafka_topic: str) -> None:
    ensure_topics(_settings(kafka_bootstrap), [kafka_topic], partitions=3)
    messages = [
        OutgoingMessage(
            topic=kafka_topic,
            key=(f"k{i % 5}".encode() if i % 3 else None),
            value=f"payload-{i}".encode(),
        )
        for i in range(90)
    ]
    with KafkaPublisher(_settings(kafka_bootstrap, linger_ms=20)) as pub:
        outcomes = pub.send_batch(messages)

    assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes if o.error][:3]
    consumed = _by_position(consume_records(kafka_bootstrap, kafka_topic, len(messages)))
    positions = set()
    for outcome in outcomes:
        conf = outcome.confirmation
        assert conf is not None
        positions.add((conf.partition, conf.offset))
        assert consumed[(conf.partition, conf.offset)].value == outcome.message.value
    assert len(positions) == len(messages)  # no two confirmations share a position
    assert {p for p, _ in positions} <= {0, 1, 2}


class _StopBrokerAt(Sequence[OutgoingMessage]):
    """A batch that runs ``action`` when the publisher's send loop reaches item ``at``."""

    def __init__(self, messages: list[OutgoingMessage], at: int, action: Callable[[], None]) -> None:
        self._messages = messages
        self._at = at
        self._action = action
        self.fired = False

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> OutgoingMessage: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[OutgoingMessage]: ...

    def __getitem__(self, index: int | slice) -> OutgoingMessage | Sequence[OutgoingMessage]:
        return self._messages[index]

    def __iter__(self) -> Iterator[OutgoingMessage]:
        for i, message in enumerate(self._messages):
            if i == self._at and not self.fired:
                self.fired = True
                self._action()
            yield message


def test_broker_stopped_mid_batch_reports_the_lost_messages_failed(
    kafka_private_broker: Callable[[], KafkaBroker], kafka_topic: str
) -> None:
    broker = kafka_private_broker()
    bootstrap = broker.bootstrap_servers
    settings = _settings(
        bootstrap, max_block_ms=5_000, request_timeout_ms=2_000, delivery_timeout_ms=6_000, linger_ms=0
    )
    publisher = KafkaPublisher(settings)
    first, total = 60, 200
    messages = [
        OutgoingMessage(topic=kafka_topic, key=f"k{i % 4}".encode(), value=f"v{i}".encode()) for i in range(total)
    ]
    before_stop: dict[tuple[int, int], Any] = {}

    def stop_broker() -> None:
        # The first ``first`` messages are on the broker (read back) before it goes away.
        before_stop.update(_by_position(consume_records(bootstrap, kafka_topic, first)))
        broker.stop()

    batch = _StopBrokerAt(messages, first, stop_broker)
    try:
        outcomes = publisher.send_batch(batch)

        assert batch.fired, "the publisher did not iterate the batch while sending"
        assert [o.message for o in outcomes] == messages
        _assert_exactly_one_result(outcomes)
        # Everything sent after the broker stopped is reported failed, none of it confirmed.
        for outcome in outcomes[first:]:
            assert not outcome.confirmed
            assert isinstance(outcome.error, PublishError)
        # Whatever was confirmed is exactly what the broker had stored.
        confirmed = [o for o in outcomes if o.confirmed]
        for outcome in confirmed:
            conf = outcome.confirmation
            assert conf is not None
            assert before_stop[(conf.partition, conf.offset)].value == outcome.message.value

        # The broker comes back (fresh storage): the same publisher rebuilds its producer and
        # publishes again.
        broker.start()
        again = [OutgoingMessage(topic=kafka_topic + ".after", key=b"k", value=b"after-restart")]
        outcomes = publisher.send_batch(again)
        assert outcomes[0].confirmed, outcomes[0].error
        records = consume_records(bootstrap, kafka_topic + ".after", 1)
        assert records[0].value == b"after-restart"
    finally:
        publisher.close()


@pytest.mark.timeout(120)  # a hang (no bound honoured) fails the test instead of stalling the suite
def test_unreachable_broker_fails_every_message_naming_the_address_and_returns(
    kafka_unreachable_address: str,
) -> None:
    bound_s = 2.0
    settings = KafkaSettings(
        bootstrap_servers=kafka_unreachable_address,
        max_block_ms=int(bound_s * 1000),
        request_timeout_ms=1_000,
        delivery_timeout_ms=3_000,
    )
    publisher = KafkaPublisher(settings)  # no network I/O here
    messages = [OutgoingMessage(topic="chatter-test.unreachable", value=f"v{i}".encode()) for i in range(25)]
    try:
        for _attempt in range(2):  # the second call goes through the rebuilt producer
            outcomes = publisher.send_batch(messages)

            assert [o.message for o in outcomes] == messages
            assert not any(o.confirmed for o in outcomes)
            assert all(isinstance(o.error, PublishError) for o in outcomes)
            assert kafka_unreachable_address in str(outcomes[0].error)
    finally:
        publisher.close()

    with pytest.raises(PublishError, match=kafka_unreachable_address):
        check_connectivity(settings, timeout_s=bound_s)


def test_check_connectivity_and_ensure_topics_against_the_broker(kafka_bootstrap: str, kafka_topic: str) -> None:
    settings = _settings(kafka_bootstrap)
    check_connectivity(settings)
    ensure_topics(settings, [kafka_topic], partitions=2)
    ensure_topics(settings, [kafka_topic], partitions=2)  # existing topics are fine

    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        (described,) = admin.describe_topics([kafka_topic])
    finally:
        admin.close()
    assert len(described["partitions"]) == 2


# ------------------------------------------------------------------------------------------------
# A SASL client against the broker's PLAINTEXT listener: the failed handshake is named, not "cannot reach".
# ------------------------------------------------------------------------------------------------

_SASL_PASSWORD = "sasl-password-never-in-an-error"


def _sasl_settings(bootstrap: str) -> KafkaSettings:
    return _settings(
        bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="relay",
        sasl_password=_SASL_PASSWORD,
        max_block_ms=3_000,
        request_timeout_ms=3_000,
        delivery_timeout_ms=10_000,
    )


def test_a_sasl_client_against_a_plaintext_listener_is_told_the_sasl_handshake_failed(kafka_bootstrap: str) -> None:
    settings = _sasl_settings(kafka_bootstrap)
    with pytest.raises(PublishError) as refused:
        check_connectivity(settings, timeout_s=3)
    message = str(refused.value)
    assert message.startswith(
        f"Kafka at {kafka_bootstrap} refused the connection: SASL handshake failed (IllegalSaslStateError): the "
        f"broker's listener at {kafka_bootstrap} does not speak SASL, but security_protocol is SASL_PLAINTEXT"
    ), message
    assert _SASL_PASSWORD not in message


def test_a_batch_published_with_sasl_to_a_plaintext_listener_names_the_failed_handshake(
    kafka_bootstrap: str, kafka_topic: str
) -> None:
    publisher = KafkaPublisher(_sasl_settings(kafka_bootstrap))
    try:
        outcomes = publisher.send_batch([OutgoingMessage(topic=kafka_topic, value=b"v", key=b"k")])
    finally:
        publisher.close()
    [outcome] = outcomes
    assert not outcome.confirmed
    assert "SASL handshake failed (IllegalSaslStateError)" in str(outcome.error), str(outcome.error)
    assert _SASL_PASSWORD not in str(outcome.error)


def test_the_kafka_test_button_names_a_sasl_mismatch(monkeypatch: pytest.MonkeyPatch, kafka_bootstrap: str) -> None:
    import json

    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SASL_MISMATCH",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": kafka_bootstrap,
                "login": "relay",
                "password": _SASL_PASSWORD,
                "extra": {"security_protocol": "SASL_PLAINTEXT"},
            }
        ),
    )
    ok, message = ChatterKafkaHook("kafka_sasl_mismatch").test_connection(timeout_s=3)
    assert not ok
    assert "refused the connection: SASL handshake failed (IllegalSaslStateError)" in message, message
    assert _SASL_PASSWORD not in message


# ------------------------------------------------------------------------------------------------
# Keyed records: kafka-python's default partitioner picks each partition.
# ------------------------------------------------------------------------------------------------


def _default_partition(partitions: Sequence[int], key: bytes) -> int:
    from kafka.partitioner.default import murmur2

    ordered = sorted(partitions)
    return ordered[(murmur2(key) & 0x7FFFFFFF) % len(ordered)]


def _raw_partitions(bootstrap: str, topic: str, keys: Sequence[bytes]) -> dict[bytes, int]:
    """Where plain kafka-python (no ``partition=``, its own DefaultPartitioner) puts each key."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**_settings(bootstrap).producer_config())
    try:
        futures = {key: producer.send(topic, key=key, value=b"raw") for key in keys}
        producer.flush(timeout=30)
        return {key: future.get(timeout=1).partition for key, future in futures.items()}
    finally:
        producer.close()


def test_keyed_records_land_where_the_default_partitioner_puts_them(kafka_bootstrap: str, kafka_topic: str) -> None:
    from kafka.partitioner import DefaultPartitioner

    ensure_topics(_settings(kafka_bootstrap), [kafka_topic], partitions=5)
    keys = [f"tenant-{n}".encode() for n in range(40)] + [b"", "grüße".encode(), b"\x00\xff" * 9]
    messages = [
        OutgoingMessage(
            topic=kafka_topic,
            key=keys[i % len(keys)],
            value=f"{i % len(keys)}:{i // len(keys)}".encode(),
            headers=(("message-id", f"m-{i}".encode()),),
        )
        for i in range(len(keys) * 8)
    ]
    with KafkaPublisher(_settings(kafka_bootstrap)) as pub:
        outcomes: list[PublishOutcome] = []
        for start in range(0, len(messages), 100):
            outcomes.extend(pub.send_batch(messages[start : start + 100]))
        metadata = pub._producer._metadata
        assert metadata.partitions_for_topic(kafka_topic) == set(range(5))
        expected = {key: DefaultPartitioner().partition(kafka_topic, key, key, b"v", b"v", metadata) for key in keys}

    assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes if o.error][:3]
    assert expected == {key: _default_partition(range(5), key) for key in keys}
    assert len(set(expected.values())) > 1
    for outcome in outcomes:
        assert outcome.confirmation is not None and outcome.message.key is not None
        assert outcome.confirmation.partition == expected[outcome.message.key]
    # Plain kafka-python agrees, and the broker has every record where its confirmation says.
    assert _raw_partitions(kafka_bootstrap, kafka_topic, keys) == expected
    records = consume_records(kafka_bootstrap, kafka_topic, len(messages) + len(keys))
    consumed = _by_position(records)
    for outcome in outcomes:
        conf = outcome.confirmation
        assert conf is not None
        record = consumed[(conf.partition, conf.offset)]
        assert (record.key, record.value, list(record.headers)) == (
            outcome.message.key,
            outcome.message.value,
            list(outcome.message.headers),
        )
    # Order per key kept.
    seen: dict[bytes, list[int]] = defaultdict(list)
    for record in records:
        if record.value != b"raw":
            assert record.partition == expected[record.key]
            seen[record.key].append(int(record.value.decode().split(":")[1]))
    assert all(seen[key] == list(range(8)) for key in keys), seen


def test_keyless_records_are_still_spread_by_kafka_python(kafka_bootstrap: str, kafka_topic: str) -> None:
    ensure_topics(_settings(kafka_bootstrap), [kafka_topic], partitions=3)
    messages = [OutgoingMessage(topic=kafka_topic, value=f"v{i}".encode() * 60) for i in range(300)]
    with KafkaPublisher(_settings(kafka_bootstrap, batch_size=1024)) as pub:
        outcomes = pub.send_batch(messages)

    assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes if o.error][:3]
    used = {o.confirmation.partition for o in outcomes if o.confirmation is not None}
    assert len(used) > 1, used  # kafka-python's own choice, not one remembered partition
    consumed = _by_position(consume_records(kafka_bootstrap, kafka_topic, len(messages)))
    for outcome in outcomes:
        conf = outcome.confirmation
        assert conf is not None and consumed[(conf.partition, conf.offset)].value == outcome.message.value


def test_added_partitions_are_used_once_the_producer_knows_them(kafka_bootstrap: str, kafka_topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer

    ensure_topics(_settings(kafka_bootstrap), [kafka_topic], partitions=2)
    keys = [f"aggregate-{n}".encode() for n in range(30)]
    before = {key: _default_partition(range(2), key) for key in keys}
    after = {key: _default_partition(range(6), key) for key in keys}
    assert any(after[key] >= 2 for key in keys)  # some keys must move to a new partition

    def batch(round_: int) -> list[OutgoingMessage]:
        return [OutgoingMessage(topic=kafka_topic, key=key, value=f"{round_}".encode()) for key in keys]

    def partitions(outcomes: Sequence[PublishOutcome]) -> dict[bytes, int]:
        assert all(o.confirmed for o in outcomes), [str(o.error) for o in outcomes if o.error][:3]
        return {o.message.key or b"": o.confirmation.partition for o in outcomes if o.confirmation is not None}

    # A short metadata max age so the producer learns of the new partitions within the test.
    settings = _settings(kafka_bootstrap)
    with KafkaPublisher(
        settings, producer_factory=lambda **config: KafkaProducer(**config, metadata_max_age_ms=500)
    ) as pub:
        assert partitions(pub.send_batch(batch(0))) == before

        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        try:
            admin.create_partitions({kafka_topic: 6})
        finally:
            admin.close()
        producer = pub._producer
        deadline = time.monotonic() + 30
        while producer._metadata.partitions_for_topic(kafka_topic) != set(range(6)):
            assert time.monotonic() < deadline, "the producer never saw the added partitions"
            time.sleep(0.1)

        assert partitions(pub.send_batch(batch(1))) == after
        assert partitions(pub.send_batch(batch(2))) == after
        assert _raw_partitions(kafka_bootstrap, kafka_topic, keys) == after
