"""F-13 over the real broker and the Cosmos emulator: a ``cloudevents`` source's drained records parse as valid
CloudEvents with the ``cloudevents`` SDK (an independent reader), and reach the idempotent receiver exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from cloudevents.v1.kafka import KafkaMessage, from_binary
from kafka import KafkaConsumer

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.consumer import consumer_config
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.inbox.receive import receive
from airflow_chatter.inbox.receiver import IdempotentReceiver, ReceiveSummary
from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.cosmos import ContainerFactory
from tests.fixtures.kafka import consume_records
from tests.integration._receiver_child import write_order

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

TENANT = "tenant-1"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def publisher(kafka_bootstrap: str) -> Iterator[KafkaPublisher]:
    pub = KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, max_block_ms=15_000))
    yield pub
    pub.close()


def _receive(kafka_bootstrap: str, topic: str, group: str, receiver: IdempotentReceiver) -> ReceiveSummary:
    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    source = KafkaMessageSource(KafkaConsumer(topic, **consumer_config(settings, group_id=group)))
    try:
        return receive(source, receiver, max_messages=50, max_seconds=30, topics=[topic], group_id=group)
    finally:
        source.close()


def test_f_13_drained_cloudevents_parse_with_the_sdk_and_reach_the_receiver_once(
    cosmos_container_factory: ContainerFactory, kafka_bootstrap: str, publisher: KafkaPublisher
) -> None:
    topic = f"chatter-ce.{uuid.uuid4().hex[:10]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=1)
    monitored = CosmosDocumentContainer(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    ids = [f"ce-{uuid.uuid4().hex[:8]}-{n}" for n in range(5)]
    for n, message_id in enumerate(ids):
        context = {"traceparent": TRACEPARENT, "Chatter.MessageType": "com.example.order", "seq": n}
        doc = OutboxMessage(message_id, topic, f'{{"n":{n}}}', "application/json", context).to_document(
            ("/tenantId",), TENANT
        )
        monitored.create(doc, TENANT)
    source = SourceOptions("ce-src", ("/tenantId",), message_format="cloudevents")
    summaries = DrainEngine.open(source, monitored, leases, publisher, owner="ce").drain_all()
    assert all(s.error is None for s in summaries) and sum(s.published for s in summaries) == len(ids)

    records = consume_records(kafka_bootstrap, topic, len(ids))
    events = [from_binary(KafkaMessage(dict(r.headers), r.key, r.value), data_unmarshaller=bytes) for r in records]
    assert [e["id"] for e in events] == ids, "ce_id is the MessageId, one record per document"
    for n, (event, record) in enumerate(zip(events, records, strict=True)):
        assert (event["specversion"], event["type"], event["datacontenttype"]) == (
            "1.0",
            "com.example.order",
            "application/json",
        )
        assert event["source"] and event["time"].endswith("Z") and event["traceparent"] == TRACEPARENT
        assert event["seq"] == str(n) and record.key == TENANT.encode() and event.get_data() == f'{{"n":{n}}}'.encode()

    app = CosmosDocumentContainer(cosmos_container_factory(("/tenantId",)))
    receiver = IdempotentReceiver(write_order, name="orders", container=app, partition_key_paths="/tenantId")
    first = _receive(kafka_bootstrap, topic, "g1", receiver)
    again = _receive(kafka_bootstrap, topic, "g2", receiver)
    assert (first.processed, first.duplicates, again.processed, again.duplicates) == (5, 0, 0, 5)
    rows = app.query("SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'order-')", {}, partition_key=TENANT)
    assert int(next(iter(rows))) == len(ids), "each CloudEvent's effect written exactly once, keyed on ce_id"
