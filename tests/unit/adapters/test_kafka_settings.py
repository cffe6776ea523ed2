"""KafkaPublisherSettings validation and KafkaPublisher's bookkeeping, without a broker.

The publisher's producer is replaced through ``producer_factory`` by a scripted fake whose futures
are kafka-python's own ``Future`` objects, so the way outcomes are read from futures is exercised
exactly as with the real client.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka import errors as ke
from kafka.future import Future
from kafka.producer.future import RecordMetadata

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher, KafkaPublishError, KafkaPublisherSettings
from airflow_chatter.ports import OutgoingMessage, PublishError

SECRET = "s3cr3t-pa55word"


def sasl_settings(**overrides: Any) -> KafkaPublisherSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "broker-1:9093,broker-2:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "chatter",
        "sasl_password": SECRET,
        "ssl_cafile": "/etc/ssl/kafka-ca.pem",
    }
    values.update(overrides)
    return KafkaPublisherSettings(**values)


# ------------------------------------------------------------------------------------------------
# Delivery guarantees cannot be weakened.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "0", "1", "leader", None])
def test_acks_other_than_all_is_refused(acks: Any) -> None:
    with pytest.raises(ValueError, match=r"^acks="):
        KafkaPublisherSettings(bootstrap_servers="k:9092", acks=acks)


@pytest.mark.parametrize("acks", ["all", -1, "-1"])
def test_acks_all_spellings_are_accepted(acks: Any) -> None:
    assert KafkaPublisherSettings(bootstrap_servers="k:9092", acks=acks).acks == "all"


@pytest.mark.parametrize("value", [False, None, 0])
def test_idempotence_cannot_be_switched_off(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^enable_idempotence="):
        KafkaPublisherSettings(bootstrap_servers="k:9092", enable_idempotence=value)


@pytest.mark.parametrize("value", [0, 6, 10])
def test_max_in_flight_beyond_the_idempotent_limit_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match=r"^max_in_flight="):
        KafkaPublisherSettings(bootstrap_servers="k:9092", max_in_flight=value)


def test_from_mapping_refuses_weakening_kafka_python_spellings() -> None:
    with pytest.raises(ValueError, match=r"^retries="):
        KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", "retries": 0})
    with pytest.raises(ValueError, match=r"^acks="):
        KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", "acks": 1})
    with pytest.raises(ValueError, match=r"^max_in_flight="):
        KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", "max_in_flight_requests_per_connection": 6})
    with pytest.raises(ValueError, match=r"^transactional_id"):
        KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", "transactional_id": "t"})
    with pytest.raises(ValueError, match=r"^linger: not a Kafka publisher setting"):
        KafkaPublisherSettings.from_mapping({"bootstrap_servers": "k:9092", "linger": 5})


def test_from_mapping_accepts_kafka_python_aliases() -> None:
    settings = KafkaPublisherSettings.from_mapping(
        {
            "bootstrap_servers": ["a:1", "b:2"],
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "u",
            "sasl_plain_password": SECRET,
            "api_version": "3.9",
            "max_in_flight_requests_per_connection": 1,
            "retries": 2147483647,
        }
    )
    assert settings.bootstrap_servers == ("a:1", "b:2")
    assert settings.sasl_username == "u" and settings.sasl_password == SECRET
    assert settings.api_version == (3, 9)
    assert settings.max_in_flight == 1


def test_producer_config_always_forces_acks_all_and_idempotence() -> None:
    config = sasl_settings(max_in_flight=3).producer_config()
    assert config["acks"] == "all"
    assert config["enable_idempotence"] is True
    assert config["max_in_flight_requests_per_connection"] == 3
    assert "retries" not in config  # kafka-python's default (infinite, bounded by delivery_timeout_ms)
    assert config["sasl_plain_password"] == SECRET
    assert config["bootstrap_servers"] == ["broker-1:9093", "broker-2:9093"]


def test_the_producer_config_is_accepted_by_kafka_python_without_weakening() -> None:
    """kafka-python raises (instead of silently disabling idempotence) on a conflict because both
    ``acks`` and ``enable_idempotence`` are passed explicitly; check our config has no conflict."""
    from kafka import KafkaProducer

    settings = KafkaPublisherSettings(bootstrap_servers="127.0.0.1:1", max_block_ms=100)
    producer = KafkaProducer(**settings.producer_config())  # api_version pinned: no network I/O
    try:
        assert producer.config["acks"] == -1
        assert producer.config["enable_idempotence"] is True
    finally:
        producer.close(timeout=0)


# ------------------------------------------------------------------------------------------------
# Other validation.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"api_version": (0, 11)}, "api_version"),
        ({"api_version": (2, 0, 1)}, "api_version"),
        ({"api_version": ()}, "api_version"),
        ({"max_block_ms": 0}, "max_block_ms"),
        ({"request_timeout_ms": -5}, "request_timeout_ms"),
        ({"delivery_timeout_ms": 1000, "request_timeout_ms": 5000}, "delivery_timeout_ms"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"batch_size": 0}, "batch_size"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"bootstrap_servers": " , "}, "bootstrap_servers"),
        ({"bootstrap_servers": ()}, "bootstrap_servers"),
        ({"client_id": ""}, "client_id"),
    ],
)
def test_invalid_settings_name_the_setting(overrides: dict[str, Any], setting: str) -> None:
    values: dict[str, Any] = {"bootstrap_servers": "k:9092"}
    values.update(overrides)
    with pytest.raises(ValueError, match=rf"^{setting}"):
        KafkaPublisherSettings(**values)


def test_sasl_needs_mechanism_user_and_password() -> None:
    with pytest.raises(ValueError, match=r"^sasl_mechanism="):
        sasl_settings(sasl_mechanism=None)
    with pytest.raises(ValueError, match=r"^sasl_mechanism="):
        sasl_settings(sasl_mechanism="GSSAPI")
    with pytest.raises(ValueError, match=r"^sasl_username"):
        sasl_settings(sasl_username=None)
    with pytest.raises(ValueError, match=r"^sasl_password"):
        sasl_settings(sasl_password="")
    with pytest.raises(ValueError, match="does not use SASL"):
        sasl_settings(security_protocol="SSL")


def test_api_version_pinned_by_default_and_kafka4_compatible() -> None:
    settings = KafkaPublisherSettings(bootstrap_servers="k:9092")
    assert settings.api_version is not None and settings.api_version >= (2, 1)
    assert KafkaPublisherSettings(bootstrap_servers="k:9092", api_version=None).api_version is None


def test_settings_are_frozen() -> None:
    settings = KafkaPublisherSettings(bootstrap_servers="k:9092")
    with pytest.raises(AttributeError):
        settings.acks = "1"  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------
# The password never shows.
# ------------------------------------------------------------------------------------------------


def test_password_is_not_in_repr_or_str() -> None:
    settings = sasl_settings()
    for text in (repr(settings), str(settings), f"{settings}", repr(KafkaPublisher(settings))):
        assert SECRET not in text
        assert "sasl_password='***'" in text
        assert "sasl_username='chatter'" in text


def test_password_is_not_in_validation_errors() -> None:
    with pytest.raises(ValueError) as info:
        sasl_settings(security_protocol="SSL")
    assert SECRET not in str(info.value)


# ------------------------------------------------------------------------------------------------
# KafkaPublisher bookkeeping with a scripted producer.
# ------------------------------------------------------------------------------------------------


class FakeProducer:
    """Records sends; ``script`` maps a message value to how its send/future behaves."""

    instances: list[FakeProducer] = []

    def __init__(self, script: dict[bytes, Any], **config: Any) -> None:
        self.config = config
        self.script = script
        self.sent: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []
        self.futures: list[Future] = []
        self.closed = False
        self.flushed = 0
        FakeProducer.instances.append(self)

    def send(self, topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]]) -> Future:
        behaviour = self.script.get(value, "ok")
        if isinstance(behaviour, BaseException) and getattr(behaviour, "_sync", False):
            raise behaviour
        self.sent.append((topic, key, value, headers))
        future = Future()
        self.futures.append(future)
        if behaviour == "ok":
            offset = len(self.sent) - 1
            future.success(RecordMetadata(topic, 0, (topic, 0), offset, 0, None, 0, len(value), 0))
        elif behaviour == "pending":
            pass
        else:
            future.failure(behaviour)
        return future

    def flush(self, timeout: float | None = None) -> None:
        self.flushed += 1
        if any(not f.is_done for f in self.futures):
            raise ke.KafkaTimeoutError("Timeout waiting for future")

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


def sync(exc: BaseException) -> BaseException:
    exc._sync = True  # type: ignore[attr-defined]
    return exc


@pytest.fixture
def script() -> dict[bytes, Any]:
    FakeProducer.instances.clear()
    return {}


def make_publisher(script: dict[bytes, Any], **overrides: Any) -> KafkaPublisher:
    settings = KafkaPublisherSettings(bootstrap_servers="k:9092", **overrides)
    return KafkaPublisher(settings, producer_factory=lambda **cfg: FakeProducer(script, **cfg))


def msg(value: bytes, key: bytes | None = None) -> OutgoingMessage:
    return OutgoingMessage(topic="t", value=value, key=key, headers=(("message-id", value),))


def test_constructor_creates_no_producer(script: dict[bytes, Any]) -> None:
    make_publisher(script)
    assert FakeProducer.instances == []


def test_every_future_is_inspected_and_outcomes_keep_input_order(script: dict[bytes, Any]) -> None:
    script[b"bad"] = ke.NotEnoughReplicasError("only 0 in sync")
    publisher = make_publisher(script)
    messages = [msg(b"a", b"k"), msg(b"bad", b"k"), msg(b"c")]

    outcomes = publisher.send_batch(messages)

    producer = FakeProducer.instances[0]
    assert producer.flushed == 1  # flush() raised nothing, yet the failure is reported
    assert producer.config["acks"] == "all" and producer.config["enable_idempotence"] is True
    assert [o.message for o in outcomes] == messages
    assert [o.confirmed for o in outcomes] == [True, False, True]
    assert outcomes[0].confirmation is not None and outcomes[0].confirmation.offset == 0
    assert outcomes[2].confirmation is not None and outcomes[2].confirmation.offset == 2
    error = outcomes[1].error
    assert isinstance(error, KafkaPublishError) and error.retriable
    assert "NotEnoughReplicasError" in str(error) and "message 2 of 3" in str(error)
    assert isinstance(error.__cause__, ke.NotEnoughReplicasError)
    assert producer.sent[1] == ("t", b"k", b"bad", [("message-id", b"bad")])


def test_a_failed_batch_rebuilds_the_producer_on_the_next_call(script: dict[bytes, Any]) -> None:
    script[b"lost"] = ke.KafkaTimeoutError("Expiring 1 record(s)")
    publisher = make_publisher(script)
    assert not publisher.send_batch([msg(b"lost")])[0].confirmed
    assert len(FakeProducer.instances) == 1

    assert publisher.send_batch([msg(b"fine")])[0].confirmed
    assert len(FakeProducer.instances) == 2
    assert FakeProducer.instances[0].closed

    assert publisher.send_batch([msg(b"fine again")])[0].confirmed
    assert len(FakeProducer.instances) == 2  # healthy producers are kept


def test_a_record_local_error_keeps_the_producer(script: dict[bytes, Any]) -> None:
    script[b"huge"] = sync(ke.MessageSizeTooLargeError("too big"))
    publisher = make_publisher(script)
    outcomes = publisher.send_batch([msg(b"huge"), msg(b"next")])
    assert [o.confirmed for o in outcomes] == [False, True]
    error = outcomes[0].error
    assert isinstance(error, KafkaPublishError) and not error.retriable
    publisher.send_batch([msg(b"more")])
    assert len(FakeProducer.instances) == 1


def test_a_metadata_timeout_stops_the_batch_and_fails_the_rest(script: dict[bytes, Any]) -> None:
    script[b"first"] = sync(ke.KafkaTimeoutError("Failed to update metadata after 2.0 secs."))
    publisher = make_publisher(script)
    outcomes = publisher.send_batch([msg(b"first"), msg(b"second"), msg(b"third")])

    assert not any(o.confirmed for o in outcomes)
    assert all(isinstance(o.error, PublishError) for o in outcomes)
    assert "k:9092" in str(outcomes[0].error) and "metadata" in str(outcomes[0].error)
    assert "not sent" in str(outcomes[1].error)
    assert FakeProducer.instances[0].sent == []  # nothing after the failure reached the producer


def test_records_still_pending_after_the_flush_bound_are_failed(script: dict[bytes, Any]) -> None:
    script[b"stuck"] = "pending"
    publisher = make_publisher(script)
    outcomes = publisher.send_batch([msg(b"ok"), msg(b"stuck")])
    assert [o.confirmed for o in outcomes] == [True, False]
    assert "no acknowledgement" in str(outcomes[1].error)
    publisher.send_batch([msg(b"ok")])
    assert len(FakeProducer.instances) == 2


def test_configuration_errors_raise_publish_error(script: dict[bytes, Any]) -> None:
    def broken(**config: Any) -> Any:
        raise ke.KafkaConfigurationError("bad ssl_cafile")

    publisher = KafkaPublisher(KafkaPublisherSettings(bootstrap_servers="k:9092"), producer_factory=broken)
    with pytest.raises(PublishError, match="bad ssl_cafile"):
        publisher.send_batch([msg(b"x")])


def test_unreachable_bootstrap_in_the_constructor_fails_every_message(script: dict[bytes, Any]) -> None:
    def unreachable(**config: Any) -> Any:
        raise ke.NoBrokersAvailable()

    publisher = KafkaPublisher(KafkaPublisherSettings(bootstrap_servers="k:9092"), producer_factory=unreachable)
    outcomes = publisher.send_batch([msg(b"x"), msg(b"y")])
    assert [o.confirmed for o in outcomes] == [False, False]
    assert "k:9092" in str(outcomes[0].error)


def test_empty_batch_and_closed_publisher(script: dict[bytes, Any]) -> None:
    publisher = make_publisher(script)
    assert publisher.send_batch([]) == []
    assert FakeProducer.instances == []
    publisher.send_batch([msg(b"a")])
    publisher.close()
    assert FakeProducer.instances[0].closed
    with pytest.raises(PublishError, match="closed"):
        publisher.send_batch([msg(b"a")])


def test_failures_are_logged_without_the_password(script: dict[bytes, Any], caplog: pytest.LogCaptureFixture) -> None:
    script[b"bad"] = ke.KafkaTimeoutError("expired")
    settings = sasl_settings()
    publisher = KafkaPublisher(settings, producer_factory=lambda **cfg: FakeProducer(script, **cfg))
    with caplog.at_level(logging.DEBUG, logger="airflow_chatter"):
        outcomes = publisher.send_batch([msg(b"bad")])
        publisher.send_batch([msg(b"ok")])
    assert not outcomes[0].confirmed
    assert "not acknowledged" in caplog.text
    assert SECRET not in caplog.text


class HeaderCheckingProducer(FakeProducer):
    """Refuses headers the way kafka-python's ``send`` does: a list of (str, bytes) tuples only."""

    def send(self, topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]]) -> Future:
        if not isinstance(headers, list):
            raise TypeError("headers must be list-type")
        if not all(isinstance(h, tuple) and len(h) == 2 for h in headers):
            raise TypeError("All headers items must be (str, bytes) tuples")
        return super().send(topic, value, key, headers)


def test_headers_are_sent_as_a_list_of_tuples_even_when_given_otherwise(script: dict[bytes, Any]) -> None:
    publisher = KafkaPublisher(
        KafkaPublisherSettings(bootstrap_servers="k:9092"),
        producer_factory=lambda **cfg: HeaderCheckingProducer(script, **cfg),
    )
    pairs: Any = [["id", b"1"], ("type", b"x")]  # not what the type says, but what was always accepted
    too_long: Any = (("id", b"1", b"extra"),)
    not_a_pair: Any = (7,)
    messages = [
        OutgoingMessage("t", b"a", b"k", (("id", b"1"), ("empty", b""))),
        OutgoingMessage("t", b"b", b"k", pairs),
        OutgoingMessage("t", b"c", None, ()),
        OutgoingMessage("t", b"d", b"k", too_long),
        OutgoingMessage("t", b"e", b"k", not_a_pair),
    ]

    outcomes = publisher.send_batch(messages)

    assert [o.confirmed for o in outcomes] == [True, True, True, False, False]
    producer = FakeProducer.instances[0]
    assert [sent[3] for sent in producer.sent] == [[("id", b"1"), ("empty", b"")], [("id", b"1"), ("type", b"x")], []]
    # Headers that cannot be unpacked fail as unpacking them always did (ValueError / TypeError, not retriable).
    assert "too many values to unpack" in str(outcomes[3].error)
    assert isinstance(outcomes[3].error, KafkaPublishError) and not outcomes[3].error.retriable
    assert "cannot unpack" in str(outcomes[4].error)
    assert isinstance(outcomes[4].error, KafkaPublishError) and not outcomes[4].error.retriable
    assert len(FakeProducer.instances) == 1  # record-local: the producer is kept
