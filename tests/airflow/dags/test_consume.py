"""The consuming half: ChatterKafkaHook.get_consumer, consume_batch, and the example consume DAG.

The config and batch tests run without a broker or a metadata DB. The one dag.test() test walks the example
DAG (the idempotent receiver) against the real broker and the emulator in one process: receive a batch and write
its receipts once, a redelivered event writes nothing, a message without a ``message-id`` fails the run and stays
uncommitted.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_chatter.adapters.kafka.consumer import (
    MissingMessageIdError,
    consume_batch,
    to_received_message,
)
from airflow_chatter.adapters.kafka.source import received_message
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import ReceivedMessage
from tests.airflow._support import xcoms

DAGS = Path(__file__).resolve().parents[3] / "dags"
SASL_PASSWORD = "consumer-sasl-password-never-logged"


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


# ---------------------------------------------------------------------------------------------
# Consumer config (no broker)
# ---------------------------------------------------------------------------------------------


def test_consumer_config_carries_the_connection_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    _conn(
        monkeypatch,
        "kafka_consume_sasl",
        conn_type="chatterkafka",
        host="b1:9093, b2:9093",
        login="reader",
        password=SASL_PASSWORD,
        extra={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "ssl_cafile": "/etc/kafka/ca.pem",
            "ssl_check_hostname": "false",
            "api_version": "3.9",
            "request_timeout_ms": 20000,
            "client_id": "orders-reader",
        },
    )
    hook = ChatterKafkaHook("kafka_consume_sasl")
    config = hook.consumer_config("orders-group", max_poll_records=50)
    assert config["bootstrap_servers"] == ["b1:9093", "b2:9093"]
    assert config["security_protocol"] == "SASL_SSL"
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["sasl_plain_username"] == "reader"
    assert config["sasl_plain_password"] == SASL_PASSWORD, "the client needs it; it is masked, never logged"
    assert config["ssl_cafile"] == "/etc/kafka/ca.pem" and config["ssl_check_hostname"] is False
    assert config["api_version"] == (3, 9), "pinned: an unpinned client blocks its constructor probing the broker"
    assert config["request_timeout_ms"] == 20000 and config["client_id"] == "orders-reader"
    assert config["group_id"] == "orders-group"
    assert config["enable_auto_commit"] is False, "offsets are committed only after the handler succeeded"
    assert config["auto_offset_reset"] == "earliest"
    assert config["isolation_level"] == "read_committed", "an aborted transaction's messages are never handed on"
    assert config["session_timeout_ms"] == 6000
    assert config["heartbeat_interval_ms"] < config["session_timeout_ms"]
    assert config["max_poll_records"] == 50, "overrides pass through"
    assert SASL_PASSWORD not in repr(hook)
    assert SASL_PASSWORD not in repr(hook.settings())

    with pytest.raises(ConfigurationError, match="enable_auto_commit") as refused:
        hook.consumer_config("orders-group", enable_auto_commit=True)
    assert SASL_PASSWORD not in str(refused.value)
    with pytest.raises(ConfigurationError, match="group_id"):
        hook.consumer_config(" ")


@pytest.mark.timeout(120)  # a constructor that waited for the unreachable broker fails the test, not the suite
def test_get_consumer_is_built_against_an_unreachable_broker_without_leaking_the_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow.sdk._shared.secrets_masker import redact
    from kafka import KafkaConsumer

    # A loopback port nothing listens on (only loopback addresses are ever a target of these tests): the constructor
    # must hand back a consumer without waiting for it; kafka-python's background thread may try it meanwhile.
    _conn(
        monkeypatch,
        "kafka_consume_down",
        conn_type="chatterkafka",
        host="127.0.0.1:1",
        login="reader",
        password=SASL_PASSWORD,
        extra={"security_protocol": "SASL_PLAINTEXT"},
    )
    hook = ChatterKafkaHook("kafka_consume_down")
    consumer = hook.get_consumer("orders.events", "orders-group")
    try:
        assert isinstance(consumer, KafkaConsumer)
        assert consumer.subscription() == {"orders.events"}
        assert consumer.config["enable_auto_commit"] is False
        assert consumer.config["auto_offset_reset"] == "earliest"
        assert consumer.config["session_timeout_ms"] == 6000
        assert consumer.config["api_version"] == (2, 8)
        assert SASL_PASSWORD not in repr(consumer)
    finally:
        consumer.close(autocommit=False)
    captured = capsys.readouterr()
    assert SASL_PASSWORD not in caplog.text + captured.out + captured.err
    assert SASL_PASSWORD not in redact(f"a careless line with {SASL_PASSWORD}"), "registered with the masker"

    with pytest.raises(ConfigurationError, match="topics"):
        hook.get_consumer([], "orders-group")


# ---------------------------------------------------------------------------------------------
# consume_batch (a fake consumer)
# ---------------------------------------------------------------------------------------------


class _Record:
    def __init__(self, partition: int, offset: int, headers: list[tuple[str, bytes]]) -> None:
        self.topic, self.partition, self.offset, self.headers = "t", partition, offset, headers
        self.key, self.value, self.timestamp = b"k", b"{}", 0


class _FakeConsumer:
    def __init__(self, polls: list[list[_Record]]) -> None:
        self.polls = polls
        self.commits: list[dict[Any, Any]] = []

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[_Record]]:
        if not self.polls:
            return {}
        records = self.polls.pop(0)[:max_records]
        batch: dict[Any, list[_Record]] = {}
        for record in records:
            batch.setdefault(record.partition, []).append(record)
        return batch

    def assignment(self) -> set[str]:
        return {"t-0"}

    def end_offsets(self, partitions: list[Any], timeout_ms: int) -> dict[Any, int]:
        return {p: 0 for p in partitions}

    def position(self, partition: Any, timeout_ms: int) -> int:
        return 0

    def commit(self, offsets: dict[Any, Any]) -> None:
        self.commits.append({(tp.partition): om.offset for tp, om in offsets.items()})


def _ok(partition: int, offset: int, kind: str = "OrderPlaced") -> _Record:
    return _Record(
        partition, offset, [("message-id", f"m-{partition}-{offset}".encode()), ("event-type", kind.encode())]
    )


def test_consume_batch_commits_the_next_offsets_after_the_handler() -> None:
    consumer = _FakeConsumer([[_ok(0, 5), _ok(1, 0, "OrderShipped"), _ok(0, 6)], [_ok(1, 1)]])
    seen: list[str] = []
    summary = consume_batch(consumer, lambda m: seen.append(m.message_id), max_messages=10, max_seconds=5)
    assert seen == ["m-0-5", "m-0-6", "m-1-0", "m-1-1"]
    assert consumer.commits == [{0: 7, 1: 2}], "last handled offset + 1 per partition, once, at the end"
    result = summary.to_dict()
    assert result["consumed"] == 4 and result["stopped_by"] == "caught_up" and result["committed"] is True
    assert result["by_event_type"] == {"OrderPlaced": 3, "OrderShipped": 1}
    assert result["partitions"] == {
        "t:0": {"first_offset": 5, "last_offset": 6, "count": 2},
        "t:1": {"first_offset": 0, "last_offset": 1, "count": 2},
    }
    assert json.loads(json.dumps(result)) == result


def test_consume_batch_stops_at_max_messages() -> None:
    consumer = _FakeConsumer([[_ok(0, n) for n in range(5)]])
    summary = consume_batch(consumer, lambda m: None, max_messages=3, max_seconds=5)
    assert summary.consumed == 3 and summary.stopped_by == "max_messages"
    assert consumer.commits == [{0: 3}]


@pytest.mark.parametrize(
    "headers", [[], [("message-id", b"")], [("message-id", b"   ")], [("message-id", b"\xff\xfe")]]
)
def test_a_message_without_identity_is_neither_handled_nor_committed(headers: list[tuple[str, bytes]]) -> None:
    consumer = _FakeConsumer([[_ok(0, 0), _Record(0, 1, headers)]])
    handled: list[ReceivedMessage] = []
    with pytest.raises(MissingMessageIdError, match=r"t\[0\]@1"):
        consume_batch(consumer, handled.append, max_messages=10, max_seconds=5)
    assert [m.offset for m in handled] == [0]
    assert consumer.commits == [], "nothing of the batch is acknowledged"


def test_a_failing_handler_commits_nothing() -> None:
    consumer = _FakeConsumer([[_ok(0, 0), _ok(0, 1)]])

    def handler(message: ReceivedMessage) -> None:
        if message.offset == 1:
            raise RuntimeError("downstream down")

    with pytest.raises(RuntimeError, match="downstream down"):
        consume_batch(consumer, handler, max_messages=10, max_seconds=5)
    assert consumer.commits == []


def test_a_consumed_message_reads_headers_case_insensitively() -> None:
    message = to_received_message(_Record(2, 9, [("Message-Id", b"abc"), ("Event-Type", b"OrderPlaced")]))
    assert message.message_id == "abc" and message.header("event-type") == "OrderPlaced"
    assert message.header("missing") is None


def test_the_consumer_hands_its_handler_the_same_message_value_the_receiver_gets() -> None:
    # One consumed Kafka record, one type: consume_batch's handler and the receiver's (Delivery.message) read it alike.
    record = _ok(1, 4)
    handled: list[ReceivedMessage] = []
    consume_batch(_FakeConsumer([[record]]), handled.append, max_messages=10, max_seconds=5)
    assert handled == [received_message(record)]
    (message,) = handled
    assert (message.where, message.message_id, message.header_bytes("event-type")) == (
        "t[1]@4",
        "m-1-4",
        b"OrderPlaced",
    )


# ---------------------------------------------------------------------------------------------
# dag.test() against the real broker
# ---------------------------------------------------------------------------------------------


def _committed(bootstrap: str, group_id: str, topic: str) -> dict[int, int]:
    """The group's committed offsets per partition of ``topic`` (partitions without a commit left out)."""
    from kafka import KafkaConsumer, TopicPartition

    # Not subscribed, so it never joins the group: it only reads the group's offsets.
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group_id, client_id="chatter-test-offsets", api_version=(2, 8)
    )
    try:
        committed = {
            p: consumer.committed(TopicPartition(topic, p)) for p in consumer.partitions_for_topic(topic) or ()
        }
    finally:
        consumer.close(autocommit=False)
    return {p: offset for p, offset in committed.items() if offset is not None}


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="chatter-test-offsets", api_version=(2, 8))
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.cosmos
@pytest.mark.airflow
def test_example_consume_dag_writes_each_receipt_once_and_fails_on_a_message_without_identity(
    airflow_db: Any,
    kafka_bootstrap: str,
    kafka_topic: str,
    sources_file: Any,
    monkeypatch: pytest.MonkeyPatch,
    cosmos_endpoint: Any,
    cosmos_database: Any,
    cosmos_container_factory: Any,
) -> None:
    """DTI-02, F-07 through the example DAG: receipts are written once per order event, a redelivered event
    writes nothing, and a message without identity fails the run and stays uncommitted."""
    from airflow.dag_processing.dagbag import DagBag

    from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
    from airflow_chatter.adapters.kafka.admin import ensure_topics
    from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
    from airflow_chatter.adapters.kafka.settings import KafkaSettings
    from airflow_chatter.ports import OutgoingMessage

    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap, api_version=(2, 8))
    ensure_topics(settings, [kafka_topic], partitions=3)
    proxy = cosmos_container_factory(("/customerId",))
    container = CosmosDocumentContainer(proxy)
    _conn(monkeypatch, "chatter_kafka_consume", conn_type="chatterkafka", host=kafka_bootstrap)
    verify = cosmos_endpoint.verify
    cosmos_extra = {"ca_cert_path": verify} if isinstance(verify, str) else {"connection_verify": verify}
    _conn(
        monkeypatch,
        "chatter_cosmos_consume",
        conn_type="chattercosmos",
        host=cosmos_endpoint.url,
        password=cosmos_endpoint.key,
        extra=cosmos_extra,
    )
    sources_file(
        {
            "sources": [
                {
                    "name": "orders",
                    "kafka_conn_id": "chatter_kafka_consume",
                    "cosmos_conn_id": "chatter_cosmos_consume",
                    "database": cosmos_database.id,
                    "monitored_container": proxy.id,
                    "lease_container": "leases",
                    "partition_key_paths": "/customerId",
                    "topics": {"chatter-demo.orders": kafka_topic},
                }
            ]
        }
    )
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    dag = bag.dags["chatter_consume_orders"]
    assert dag.params["topic"] == kafka_topic, "the source's mapped topic is the default"
    group = f"chatter-test-consume-{uuid.uuid4().hex[:8]}"
    conf = {"topic": kafka_topic, "group_id": group, "max_messages": 1000, "max_seconds": 60}

    def event(n: int, kind: str) -> OutgoingMessage:
        return OutgoingMessage(
            topic=kafka_topic,
            key=f"cust-{n % 7}".encode(),
            value=json.dumps({"event": kind, "orderId": f"order-{n}", "total": n}).encode(),
            headers=(("message-id", f"event-{n}".encode()), ("event-type", kind.encode())),
        )

    def receipts() -> int:
        rows = container.query("SELECT VALUE COUNT(1) FROM c WHERE c.type = 'order-receipt'")
        return int(next(iter(rows)))

    # 1. 30 events (20 OrderPlaced) → one run receives them all, writes 20 receipts, commits the end offsets.
    kinds = ["OrderPlaced", "OrderPlaced", "OrderShipped"]
    with KafkaPublisher(settings) as publisher:
        outcomes = publisher.send_batch([event(n, kinds[n % 3]) for n in range(30)])
    assert all(o.confirmation for o in outcomes), [o.error for o in outcomes if o.error]
    run = dag.test(run_conf=conf)
    assert run.state == "success", run.state
    [summary] = xcoms(run, "receive")
    assert (summary["received"], summary["processed"], summary["duplicates"]) == (30, 30, 0)
    assert summary["dispatched"] == 0, "the example handler dispatches nothing in-process"
    assert summary["stopped_by"] == "caught_up"
    assert receipts() == 20
    ends = _end_offsets(kafka_bootstrap, kafka_topic)
    assert _committed(kafka_bootstrap, group, kafka_topic) == {p: e for p, e in ends.items() if e}

    # 2. The drain publishes event 0 again: the redelivery is a duplicate and writes nothing.
    with KafkaPublisher(settings) as publisher:
        [again] = publisher.send_batch([event(0, "OrderPlaced")])
    assert again.confirmation is not None
    run = dag.test(run_conf=conf)
    assert run.state == "success", run.state
    [summary] = xcoms(run, "receive")
    assert (summary["received"], summary["processed"], summary["duplicates"]) == (1, 0, 1)
    assert receipts() == 20, "exactly once: the duplicate's receipt was not written again"

    # 3. A message without a message-id fails the run (F-07) and its offset stays uncommitted.
    with KafkaPublisher(settings) as publisher:
        [bad] = publisher.send_batch([OutgoingMessage(topic=kafka_topic, key=b"cust-0", value=b"{}")])
    assert bad.confirmation is not None
    before = _committed(kafka_bootstrap, group, kafka_topic)
    run = dag.test(run_conf=conf)
    assert run.state == "failed", run.state
    after = _committed(kafka_bootstrap, group, kafka_topic)
    assert after == before, "nothing committed"
    assert after.get(bad.confirmation.partition, 0) == bad.confirmation.offset, "the group's offset stays before it"
