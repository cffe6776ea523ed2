"""The documented SASL path, run: ``scripts/kafka.sh`` starts a broker with a SASL_PLAINTEXT/PLAIN listener
(``KAFKA_SASL_PORT``), and the project's Kafka hook connects to it with a connection's login and password and
publishes; a wrong password is refused and never echoed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from airflow_chatter.ports import OutgoingMessage
from devkit.services import KAFKA_START_TIMEOUT_S, KAFKA_STOP_TIMEOUT_S, kafka_script, port_refuses
from tests.fixtures.kafka import consume_records

#: A port pair (plain, controller) and a SASL port of this test's own, clear of the shared and private brokers.
PORT, SASL_PORT = 29192, 29194
USER, PASSWORD = "chatter", "sasl-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[str]:
    if not all(port_refuses(p) for p in (PORT, PORT + 1, SASL_PORT)):
        pytest.fail(f"ports {PORT}, {PORT + 1} or {SASL_PORT} are taken", pytrace=False)
    env = {"KAFKA_SASL_PORT": str(SASL_PORT), "KAFKA_SASL_USERNAME": USER, "KAFKA_SASL_PASSWORD": PASSWORD}
    result = kafka_script("start", PORT, KAFKA_START_TIMEOUT_S, env)
    assert result.returncode == 0, result.stderr[-4000:]
    try:
        yield f"127.0.0.1:{SASL_PORT}"
    finally:
        kafka_script("stop", PORT, KAFKA_STOP_TIMEOUT_S, env)


def _connection(monkeypatch: pytest.MonkeyPatch, address: str, password: str) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_KAFKA_SASL",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": address,
                "login": USER,
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


def test_the_kafka_hook_publishes_over_sasl_plain(sasl_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    publisher = ChatterKafkaHook(_connection(monkeypatch, sasl_broker, PASSWORD)).get_publisher()
    try:
        outcomes = publisher.send_batch([OutgoingMessage(topic, b'{"n":1}', b"k1")])
    finally:
        publisher.close()
    assert [o.error for o in outcomes] == [None], outcomes
    records = consume_records(
        sasl_broker,
        topic,
        1,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
    )
    assert [r.value for r in records] == [b'{"n":1}']


def test_a_wrong_sasl_password_is_refused_and_not_echoed(sasl_broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    wrong = "wrong-" + uuid.uuid4().hex[:8]
    said: list[str] = []
    confirmed = False
    try:
        publisher = ChatterKafkaHook(_connection(monkeypatch, sasl_broker, wrong)).get_publisher()
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
