"""KafkaSettings validation, the error classification, and KafkaPublisher's bookkeeping, without a broker.

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

from airflow_chatter.adapters.kafka.publisher import (
    KafkaMessageRejected,
    KafkaPublisher,
    KafkaPublishError,
    KafkaSettings,
)
from airflow_chatter.ports import OutgoingMessage, PublishError

SECRET = "s3cr3t-pa55word"


def sasl_settings(**overrides: Any) -> KafkaSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "broker-1:9093,broker-2:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "chatter",
        "sasl_password": SECRET,
        "ssl_cafile": "/etc/ssl/kafka-ca.pem",
    }
    values.update(overrides)
    return KafkaSettings(**values)


# ------------------------------------------------------------------------------------------------
# Delivery guarantees cannot be weakened.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "0", "1", "leader", None])
def test_acks_other_than_all_is_refused(acks: Any) -> None:
    with pytest.raises(ValueError, match=r"^acks="):
        KafkaSettings(bootstrap_servers="k:9092", acks=acks)


@pytest.mark.parametrize("acks", ["all", -1, "-1"])
def test_acks_all_spellings_are_accepted(acks: Any) -> None:
    assert KafkaSettings(bootstrap_servers="k:9092", acks=acks).acks == "all"


@pytest.mark.parametrize("value", [False, None, 0])
def test_idempotence_cannot_be_switched_off(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^enable_idempotence="):
        KafkaSettings(bootstrap_servers="k:9092", enable_idempotence=value)


@pytest.mark.parametrize("value", [0, 6, 10])
def test_max_in_flight_beyond_the_idempotent_limit_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match=r"^max_in_flight="):
        KafkaSettings(bootstrap_servers="k:9092", max_in_flight=value)


def test_from_mapping_refuses_weakening_kafka_python_spellings() -> None:
    with pytest.raises(ValueError, match=r"^retries="):
        KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", "retries": 0})
    with pytest.raises(ValueError, match=r"^acks="):
        KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", "acks": 1})
    with pytest.raises(ValueError, match=r"^max_in_flight="):
        KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", "max_in_flight_requests_per_connection": 6})
    with pytest.raises(ValueError, match=r"^transactional_id"):
        KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", "transactional_id": "t"})
    with pytest.raises(ValueError, match=r"^linger: not a Kafka publisher setting"):
        KafkaSettings.from_mapping({"bootstrap_servers": "k:9092", "linger": 5})


def test_from_mapping_accepts_kafka_python_aliases() -> None:
    settings = KafkaSettings.from_mapping(
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
    assert settings.sasl_username == "u"
    assert settings.sasl_password is not None and settings.sasl_password.get_secret_value() == SECRET
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

    settings = KafkaSettings(bootstrap_servers="127.0.0.1:1", max_block_ms=100)
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
        KafkaSettings(**values)


def test_sasl_needs_a_known_mechanism_a_user_and_a_password() -> None:
    with pytest.raises(ValueError, match=r"^sasl_mechanism="):
        sasl_settings(sasl_mechanism="GSSAPI")
    with pytest.raises(ValueError, match=r"^sasl_username"):
        sasl_settings(sasl_username=None)
    with pytest.raises(ValueError, match=r"^sasl_password"):
        sasl_settings(sasl_password="")
    with pytest.raises(ValueError, match="does not use SASL"):
        sasl_settings(security_protocol="SSL")


def test_sasl_mechanism_defaults_to_plain_and_is_ignored_without_sasl() -> None:
    assert sasl_settings(sasl_mechanism=None).client_config()["sasl_mechanism"] == "PLAIN"
    plain = KafkaSettings(bootstrap_servers="k:9092", sasl_mechanism="PLAIN")
    assert "sasl_mechanism" not in plain.client_config(), "a form's pre-selected mechanism means nothing without SASL"
    with pytest.raises(ValueError, match=r"^sasl_mechanism: set, but security_protocol='PLAINTEXT' does not use SASL"):
        KafkaSettings(bootstrap_servers="k:9092", sasl_mechanism="SCRAM-SHA-512")


@pytest.mark.parametrize(
    ("setting", "value"),
    [("request_timeout_ms", True), ("max_block_ms", False), ("linger_ms", True), ("max_in_flight", True)],
)
def test_a_boolean_is_not_taken_for_a_number(setting: str, value: bool) -> None:
    with pytest.raises(ValueError, match=rf"^{setting}"):
        KafkaSettings(bootstrap_servers="k:9092", **{setting: value})


def test_connection_extras_given_as_strings_are_coerced_once() -> None:
    settings = KafkaSettings.from_mapping(
        {
            "bootstrap_servers": "k:9092",
            "request_timeout_ms": "20000",
            "ssl_check_hostname": "false",
            "api_version": "3.9",
        }
    )
    assert (settings.request_timeout_ms, settings.ssl_check_hostname, settings.api_version) == (20000, False, (3, 9))


def test_one_default_table_serves_the_model_and_the_connection_form() -> None:
    from airflow_chatter.adapters.kafka.settings import KAFKA_DEFAULTS, KafkaSettings
    from airflow_chatter.airflow.get_provider_info import KAFKA_CONNECTION_TYPE

    settings = KafkaSettings(bootstrap_servers="k:9092")
    for name, default in KAFKA_DEFAULTS.items():
        assert getattr(settings, name) == default, name
    assert settings.request_timeout_ms == 30_000, "the hook's and the adapter's defaults no longer drift"
    form = KAFKA_CONNECTION_TYPE["conn-fields"]
    for name in ("security_protocol", "sasl_mechanism", "request_timeout_ms", "client_id", "ssl_check_hostname"):
        assert form[name]["schema"]["default"] == KAFKA_DEFAULTS[name], name
    assert form["api_version"]["schema"]["default"] == ".".join(map(str, KAFKA_DEFAULTS["api_version"]))


def test_api_version_pinned_by_default_and_kafka4_compatible() -> None:
    settings = KafkaSettings(bootstrap_servers="k:9092")
    assert settings.api_version is not None and settings.api_version >= (2, 1)
    assert KafkaSettings(bootstrap_servers="k:9092", api_version=None).api_version is None


def test_settings_are_frozen() -> None:
    settings = KafkaSettings(bootstrap_servers="k:9092")
    with pytest.raises(ValueError, match="frozen"):
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


@pytest.mark.parametrize(
    "overrides",
    [{"security_protocol": "SSL"}, {"sasl_password": 12345}, {"sasl_password": [SECRET]}],
)
def test_password_is_not_in_validation_errors(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as info:
        sasl_settings(**overrides)
    assert SECRET not in str(info.value) and "12345" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None, "pydantic's error would echo the input"


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
    settings = KafkaSettings(bootstrap_servers="k:9092", **overrides)
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


def test_a_record_local_error_sends_nothing_after_it_and_keeps_the_producer(script: dict[bytes, Any]) -> None:
    """RLY-07/F-10: the drain stamps nothing after the refused record, so a later one sent anyway would be
    republished on every run, and one of the same key would overtake it."""
    script[b"huge"] = sync(ke.MessageSizeTooLargeError("too big"))
    publisher = make_publisher(script)
    outcomes = publisher.send_batch([msg(b"huge"), msg(b"next")])
    assert [o.confirmed for o in outcomes] == [False, False]
    error = outcomes[0].error
    assert isinstance(error, KafkaPublishError) and not error.retriable
    assert "not sent: message 1 of 2 of this batch failed first" in str(outcomes[1].error)
    assert FakeProducer.instances[0].sent == []  # "next" never reached the producer
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

    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers="k:9092"), producer_factory=broken)
    with pytest.raises(PublishError, match="bad ssl_cafile"):
        publisher.send_batch([msg(b"x")])


def test_unreachable_bootstrap_in_the_constructor_fails_every_message(script: dict[bytes, Any]) -> None:
    def unreachable(**config: Any) -> Any:
        raise ke.KafkaTimeoutError("Unable to bootstrap from ['k:9092']")  # what api_version=None does

    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers="k:9092"), producer_factory=unreachable)
    outcomes = publisher.send_batch([msg(b"x"), msg(b"y")])
    assert [o.confirmed for o in outcomes] == [False, False]
    assert "Kafka at k:9092 unavailable, batch of 2 not sent: KafkaTimeoutError: Unable to bootstrap" in str(
        outcomes[0].error
    )


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
        KafkaSettings(bootstrap_servers="k:9092"),
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
    # A record kafka-python rejects for itself (its document is stamped undeliverable) does not stop the batch.
    assert "cannot unpack" in str(outcomes[4].error)
    assert isinstance(outcomes[4].error, KafkaMessageRejected) and not outcomes[4].error.retriable
    assert len(FakeProducer.instances) == 1  # record-local: the producer is kept


# ------------------------------------------------------------------------------------------------
# One error classification: every mapping pinned.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "record_local", "retriable"),
    [
        (TypeError("headers must be (str, bytes) tuples"), True, False),
        (ValueError("too many values to unpack"), True, False),
        (ke.MessageSizeTooLargeError("too big"), True, False),
        (ke.RecordListTooLargeError(), True, False),
        (ke.InvalidTopicError(), True, False),
        (ke.TopicAuthorizationFailedError(), True, False),
        (ke.InvalidRecordError(), True, False),
        (ke.CorruptRecordError(), True, True),
        (ke.ClusterAuthorizationFailedError(), False, False),
        (ke.TransactionalIdAuthorizationFailedError(), False, False),
        (ke.SaslAuthenticationFailedError(), False, False),
        (ke.IllegalSaslStateError(), False, False),
        (ke.UnsupportedSaslMechanismError(), False, False),
        (ke.KafkaTimeoutError("Failed to update metadata after 2.0 secs."), False, True),
        (ke.NotEnoughReplicasError(), False, True),
        (ke.KafkaConnectionError("connection lost"), False, True),
        (ke.OutOfOrderSequenceNumberError(), False, True),
        (RuntimeError("anything else"), False, True),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_each_kafka_error_is_classified_once_as_record_local_or_not_and_retriable_or_not(
    error: BaseException, record_local: bool, retriable: bool
) -> None:
    from airflow_chatter.adapters.kafka.errors import classify

    verdict = classify(error)
    assert (verdict.record_local, verdict.retriable) == (record_local, retriable)


@pytest.mark.parametrize(
    ("error", "rejected"),
    [
        (TypeError("headers must be (str, bytes) tuples"), True),
        (ValueError("Invalid topic name"), True),
        (ke.InvalidTopicError(), True),
        (ke.KafkaConfigurationError("Cannot set transactional_id without enable_idempotence."), True),
        (ke.MessageSizeTooLargeError("too big"), False),
        (ke.TopicAuthorizationFailedError(), False),
        (ke.CorruptRecordError(), False),
        (ke.SaslAuthenticationFailedError(), False),
        (ke.KafkaTimeoutError("Failed to update metadata after 2.0 secs."), False),
        (RuntimeError("anything else"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_the_classification_says_which_failures_kafka_python_refused_before_any_io(
    error: BaseException, rejected: bool
) -> None:
    from airflow_chatter.adapters.kafka.errors import classify

    assert classify(error).rejected is rejected


@pytest.mark.parametrize(
    ("error", "rebuilt", "retriable"),
    [
        (ke.MessageSizeTooLargeError("too big"), False, False),
        (ke.CorruptRecordError(), False, True),
        (ke.SaslAuthenticationFailedError("bad password"), True, False),
        (ke.NotEnoughReplicasError(), True, True),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_the_publisher_keeps_or_rebuilds_its_producer_as_the_classification_says(
    script: dict[bytes, Any], error: BaseException, rebuilt: bool, retriable: bool
) -> None:
    script[b"x"] = error
    publisher = make_publisher(script)
    [outcome] = publisher.send_batch([msg(b"x")])
    assert isinstance(outcome.error, KafkaPublishError) and outcome.error.retriable is retriable
    publisher.send_batch([msg(b"ok")])
    assert len(FakeProducer.instances) == (2 if rebuilt else 1)


# ------------------------------------------------------------------------------------------------
# A refused handshake is named (kafka-python only logs it).
# ------------------------------------------------------------------------------------------------


class _Connection:
    def __init__(self, settings: KafkaSettings) -> None:
        self.config = {"client_id": settings.client_id, "security_protocol": settings.security_protocol}


def _log_from_kafka(connection: Any, message: str, *args: Any) -> None:
    logging.getLogger("kafka.net.connection").error(message, connection, *args)


@pytest.mark.parametrize(
    ("logged", "expected"),
    [
        (("%s: SaslHandshake failed: %s", "IllegalSaslStateError"), r"SASL handshake failed \(IllegalSaslStateError\)"),
        (
            ("%s: Connection lost: %s", ke.SaslAuthenticationFailedError("Authentication failed")),
            "SASL authentication failed for user 'chatter'",
        ),
        (
            ("%s: Connection lost: %s", ke.UnsupportedSaslMechanismError("Enabled mechanisms: ['PLAIN']")),
            "SASL mechanism SCRAM-SHA-512 refused",
        ),
    ],
)
def test_a_refused_sasl_handshake_is_explained_from_kafka_pythons_log(logged: tuple[Any, ...], expected: str) -> None:
    from airflow_chatter.adapters.kafka.diagnosis import ConnectionFailures

    settings = sasl_settings(security_protocol="SASL_PLAINTEXT")
    with ConnectionFailures.listening(settings) as failures:
        _log_from_kafka(_Connection(settings), *logged)
    why = failures.explain()
    assert why is not None and __import__("re").search(expected, why), why
    assert SECRET not in why


def test_handshake_failures_of_another_client_are_not_taken_for_ours() -> None:
    from airflow_chatter.adapters.kafka.diagnosis import ConnectionFailures

    ours = sasl_settings(security_protocol="SASL_PLAINTEXT")
    other = sasl_settings(security_protocol="SASL_PLAINTEXT", client_id="someone-else")
    with ConnectionFailures.listening(ours) as failures:
        _log_from_kafka(_Connection(other), "%s: SaslHandshake failed: %s", "IllegalSaslStateError")
    assert failures.explain() is None
    assert not any(isinstance(h, ConnectionFailures) for h in logging.getLogger("kafka.net.connection").handlers)
