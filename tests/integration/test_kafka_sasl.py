"""The documented SASL path, run: ``scripts/kafka.sh`` starts a broker with a SASL_PLAINTEXT/PLAIN listener
(``KAFKA_SASL_PORT``), and the project's Kafka hook connects to it with a connection's login and password and
publishes; a wrong password is refused and never echoed."""

from __future__ import annotations

import json
import uuid

import pytest

from airflow_chatter.ports import OutgoingMessage
from tests.fixtures.kafka import SaslBroker, consume_records


def _connection(monkeypatch: pytest.MonkeyPatch, broker: SaslBroker, password: str) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_KAFKA_SASL",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": broker.address,
                "login": broker.username,
                "password": password,
                "extra": {
                    "security_protocol": "SASL_PLAINTEXT",
                    "sasl_mechanism": "PLAIN",
                    "request_timeout_ms": 10000,
                },
            }
        ),
    )
    return "chatter_kafka_sasl"


def test_the_kafka_hook_publishes_over_sasl_plain(
    kafka_sasl_broker: SaslBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    publisher = ChatterKafkaHook(
        _connection(monkeypatch, kafka_sasl_broker, kafka_sasl_broker.password)
    ).get_publisher()
    try:
        outcomes = publisher.send_batch([OutgoingMessage(topic, b'{"n":1}', b"k1")])
    finally:
        publisher.close()
    assert [o.error for o in outcomes] == [None], outcomes
    records = consume_records(
        kafka_sasl_broker.address,
        topic,
        1,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=kafka_sasl_broker.username,
        sasl_plain_password=kafka_sasl_broker.password,
    )
    assert [r.value for r in records] == [b'{"n":1}']


def test_a_wrong_sasl_password_is_refused_and_not_echoed(
    kafka_sasl_broker: SaslBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    wrong = "wrong-" + uuid.uuid4().hex[:8]
    said: list[str] = []
    confirmed = False
    try:
        publisher = ChatterKafkaHook(_connection(monkeypatch, kafka_sasl_broker, wrong)).get_publisher()
        try:
            outcomes = publisher.send_batch([OutgoingMessage("sasl-wrong", b"x")])
            confirmed = any(o.confirmed for o in outcomes)
            said = [str(o.error) for o in outcomes if o.error is not None]
        finally:
            publisher.close()
    except Exception as error:  # noqa: BLE001 - refused at connect: what matters is that nothing was published
        said = [str(error)]
    assert not confirmed, "a wrong password must not publish"
    assert said, "the refusal is reported"
    assert not [text for text in said if wrong in text], "the password is not echoed"


def test_a_wrong_sasl_password_makes_test_connection_say_sasl_authentication_failed(
    kafka_sasl_broker: SaslBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker answers a rejected SaslAuthenticate and closes the connection at once; the answer is read before
    the close, on every attempt, so the hook names the refusal rather than "cannot reach Kafka"."""
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    wrong = "wrong-" + uuid.uuid4().hex[:8]
    ok, message = ChatterKafkaHook(_connection(monkeypatch, kafka_sasl_broker, wrong)).test_connection(timeout_s=5)
    assert not ok, message
    assert "SASL authentication failed for user 'chatter' with mechanism PLAIN" in message, message
    assert wrong not in message, "the password is not echoed"
