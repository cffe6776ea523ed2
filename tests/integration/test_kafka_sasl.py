"""The documented SASL path, run: ``scripts/kafka.sh`` starts a broker with a SASL_PLAINTEXT/PLAIN listener
(``KAFKA_SASL_PORT``), and the project's Kafka hook connects to it with a connection's login and password and
publishes; a wrong password is refused and never echoed.

The broker also runs an authorizer (``KAFKA_SASL_LIMITED_USER``: StandardAuthorizer, the SASL user a super user) with
a second user that may do only what its ACLs grant: Write and Describe on the drain's topic, no TransactionalId
rights. An exactly-once drain as that principal is refused at start naming ``guarantee`` and the cause, publishing
nothing; an at-least-once drain as the same principal delivers."""

from __future__ import annotations

import json
import uuid

import pytest

from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from airflow_chatter.ports import OutgoingMessage
from tests.fixtures.kafka import SaslBroker, consume_records, topic_record_count
from tests.unit.drain._drain_support import Rig, outbox_doc


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


@pytest.fixture
def limited_topics(kafka_sasl_broker: SaslBroker) -> dict[str, str]:
    """A topic and a compacted checkpoint topic, made by the super user, on which the limited principal has exactly
    what a drain without TransactionalId rights has: Write and Describe on the topic; Read, Write, Describe and
    DescribeConfigs on the checkpoint topic (so the drain gets as far as opening its transactions)."""
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )

    run = uuid.uuid4().hex[:8]
    topic, checkpoints = f"sasl-acl-{run}", f"sasl-acl-checkpoints-{run}"
    admin_settings = KafkaSettings(bootstrap_servers=kafka_sasl_broker.plain_address)  # PLAINTEXT: a super user
    ensure_topics(admin_settings, [topic], partitions=1)
    ensure_topics(admin_settings, [checkpoints], partitions=1, configs=CHECKPOINT_TOPIC_CONFIGS)
    grants = {
        topic: (ACLOperation.WRITE, ACLOperation.DESCRIBE),
        checkpoints: (ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DESCRIBE, ACLOperation.DESCRIBE_CONFIGS),
    }
    acls = [
        ACL(
            f"User:{kafka_sasl_broker.limited_username}",
            "*",
            operation,
            ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, name, ACLResourcePatternType.LITERAL),
        )
        for name, operations in grants.items()
        for operation in operations
    ]
    admin = KafkaAdminClient(bootstrap_servers=kafka_sasl_broker.plain_address)
    try:
        created = admin.create_acls(acls)
    finally:
        admin.close()
    assert not created["failed"], created
    return {"topic": topic, "checkpoints": checkpoints}


def _limited_publisher(broker: SaslBroker) -> KafkaPublisher:
    return KafkaPublisher(
        KafkaSettings(
            bootstrap_servers=broker.address,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_username=broker.limited_username,
            sasl_password=broker.limited_password,
            max_block_ms=5000,
        )
    )


def test_an_exactly_once_drain_without_transactional_id_rights_is_refused_and_at_least_once_still_delivers(
    kafka_sasl_broker: SaslBroker, limited_topics: dict[str, str]
) -> None:
    """A principal whose ACLs lack TransactionalId rights cannot keep ``guarantee: exactly_once``: the drain start
    is refused with one ConfigurationError naming ``guarantee`` and the broker's cause, before a page is read or
    anything sent. The same principal drains ``at_least_once``; its messages, each on the topic once even to a
    read_uncommitted reader, are the barrier proving the refused drain put nothing there."""
    rig = Rig()
    rig.publisher = publisher = _limited_publisher(kafka_sasl_broker)
    docs = rig.seed(*(outbox_doc(f"acl-{i}", f"t{i % 3}", destination=limited_topics["topic"]) for i in range(5)))
    try:
        refused = rig.drain(rig.engine(guarantee="exactly_once", checkpoint_topic=limited_topics["checkpoints"]))

        assert refused.error_type == "ConfigurationError", refused.log_line()
        message = refused.error_message or ""
        assert message.startswith("guarantee"), f"the error names the field whose promise cannot be kept: {message}"
        assert "TransactionalIdAuthorizationFailed" in message, f"and the broker's cause: {message}"
        assert "within 5000 ms" in message, f"and the wait that bounds it (max_block_ms): {message}"
        assert (refused.pages, refused.published) == (0, 0), "refused at start: no page read, nothing published"
        assert all(rig.current(d)["status"] == "pending" for d in docs), "nothing stamped"

        delivered = rig.drain(rig.engine(guarantee="at_least_once"))
    finally:
        publisher.close()

    assert delivered.error is None and delivered.published == len(docs), delivered.log_line()
    assert all(rig.current(d)["status"] == "delivered" for d in docs)
    admin = kafka_sasl_broker.plain_address
    assert topic_record_count(admin, limited_topics["topic"]) == len(docs), "the refused drain sent nothing"
    assert topic_record_count(admin, limited_topics["checkpoints"]) == 0, "nor any checkpoint record"
    records = consume_records(admin, limited_topics["topic"], len(docs), timeout_s=30)
    ids = sorted(dict(r.headers)["message-id"].decode() for r in records)
    assert ids == sorted(d[MESSAGE_ID_FIELD] for d in docs), "each message once, from the at-least-once drain"
