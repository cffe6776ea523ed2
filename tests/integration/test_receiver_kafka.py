"""The idempotent receiver over the real broker and the Cosmos emulator: redelivery, a process SIGKILLed between
handler and commit, an abandoned standalone claim taken over after its lease, identity-less messages, two receivers.

Redelivery is made real: a consumer of another group re-reads the topic under the *same* receiver name (what a lost
offset commit, a reset, or the killed process's restart looks like to the inbox).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import DatabaseProxy

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.consumer import consumer_config
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource
from airflow_chatter.inbox.errors import MissingIdentityError
from airflow_chatter.inbox.gate import Inbox, InboxOptions
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.inbox.receive import receive
from airflow_chatter.inbox.receiver import Delivery, IdempotentReceiver, ReceiveSummary
from airflow_chatter.ports import DocumentContainer, OutgoingMessage
from airflow_chatter.testing.clock import ManualClock
from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint
from tests.integration._receiver_child import write_order

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

REPO = Path(__file__).resolve().parents[2]
TENANT = "tenant-1"


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"chatter-inbox-{uuid.uuid4().hex[:10]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [name], partitions=1)
    return name


@pytest.fixture
def publisher(kafka_bootstrap: str) -> Iterator[KafkaPublisher]:
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, max_block_ms=15_000))
    yield publisher
    publisher.close()


def produce(publisher: KafkaPublisher, topic: str, *message_ids: str | None) -> None:
    messages = [
        OutgoingMessage(
            topic=topic,
            value=b"{}",
            key=TENANT.encode(),
            headers=() if mid is None else (("message-id", mid.encode()),),
        )
        for mid in message_ids
    ]
    outcomes = publisher.send_batch(messages)
    assert all(o.confirmed for o in outcomes), outcomes


def run_receiver(
    kafka_bootstrap: str, topic: str, group: str, receiver: IdempotentReceiver, max_seconds: float = 30
) -> ReceiveSummary:
    from kafka import KafkaConsumer

    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    source = KafkaMessageSource(KafkaConsumer(topic, **consumer_config(settings, group_id=group)))
    try:
        return receive(source, receiver, max_messages=50, max_seconds=max_seconds, topics=[topic], group_id=group)
    finally:
        source.close()


def committed(kafka_bootstrap: str, topic: str, group: str) -> int | None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close(autocommit=False)


def count(container: DocumentContainer, prefix: str) -> int:
    rows = container.query(
        "SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, @p)", {"p": prefix}, partition_key=TENANT
    )
    return int(next(iter(rows)))


@pytest.fixture
def app(cosmos_container_factory: ContainerFactory) -> DocumentContainer:
    return CosmosDocumentContainer(cosmos_container_factory(("/tenantId",)))


def document_receiver(app: DocumentContainer, name: str) -> IdempotentReceiver:
    return IdempotentReceiver(write_order, name=name, container=app, partition_key_paths="/tenantId")


def test_dti_02_a_redelivered_topic_applies_the_writes_once(
    kafka_bootstrap: str, topic: str, publisher: KafkaPublisher, app: DocumentContainer
) -> None:
    produce(publisher, topic, "a", "b", "a", "c")  # the producer's retry wrote "a" twice
    first = run_receiver(kafka_bootstrap, topic, "g1", document_receiver(app, "orders"))
    assert (first.processed, first.duplicates, first.committed_offsets) == (3, 1, {f"{topic}:0": 4})
    again = run_receiver(kafka_bootstrap, topic, "g2", document_receiver(app, "orders"))
    assert (again.processed, again.duplicates) == (0, 4), "every redelivery was recognised by its marker"
    assert (count(app, "order-"), count(app, "outbox:"), count(app, "inbox:")) == (3, 3, 3)


def test_f_07_the_summary_reports_the_messages_dispatched_inside_the_processed_deliveries(
    kafka_bootstrap: str, topic: str, publisher: KafkaPublisher, app: DocumentContainer
) -> None:
    def nested(delivery: Delivery, suffix: str) -> None:
        assert delivery.unit_of_work is not None
        delivery.unit_of_work.create({"id": f"nested-{delivery.identity}-{suffix}", "tenantId": TENANT})

    def outer(delivery: Delivery) -> None:
        write_order(delivery)
        delivery.dispatch(nested, "reserve")
        delivery.dispatch(nested, "notify")

    def receiver() -> IdempotentReceiver:
        return IdempotentReceiver(outer, name="orders", container=app, partition_key_paths="/tenantId")

    produce(publisher, topic, "a", "b", "a")
    first = run_receiver(kafka_bootstrap, topic, "g1", receiver())
    assert (first.received, first.processed, first.duplicates, first.dispatched) == (3, 2, 1, 4)
    assert first.to_dict()["dispatched"] == 4, "reported with its siblings in the XCom summary"
    assert count(app, "nested-") == 4, "the dispatched messages' writes committed with their deliveries"
    again = run_receiver(kafka_bootstrap, topic, "g2", receiver())
    assert (again.duplicates, again.dispatched) == (3, 0), "a duplicate's dispatched writes were discarded"
    assert count(app, "nested-") == 4


def test_f_07_a_message_without_identity_is_neither_processed_nor_committed(
    kafka_bootstrap: str, topic: str, publisher: KafkaPublisher, app: DocumentContainer
) -> None:
    produce(publisher, topic, "a", None, "c")
    with pytest.raises(MissingIdentityError, match=r"@1 has no usable 'message-id' header"):
        run_receiver(kafka_bootstrap, topic, "g1", document_receiver(app, "orders"))
    assert committed(kafka_bootstrap, topic, "g1") == 1, "the offset stays before the identity-less message"
    assert count(app, "order-") == 1, "only the message before it was handled"


def test_f_07_two_receivers_with_different_names_both_process_one_message(
    kafka_bootstrap: str, topic: str, publisher: KafkaPublisher, app: DocumentContainer
) -> None:
    produce(publisher, topic, "a")
    for group in ("billing", "shipping"):  # the receiver name defaults to the consumer group
        summary = run_receiver(kafka_bootstrap, topic, group, document_receiver(app, group))
        assert summary.processed == 1, group
    assert count(app, "inbox:") == 2, "one marker per receiver"


def _child(kafka_bootstrap: str, cosmos_endpoint: CosmosEndpoint, **config: Any) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CHILD_CONFIG": json.dumps(
            {
                "bootstrap": kafka_bootstrap,
                "endpoint": cosmos_endpoint.url,
                "key": cosmos_endpoint.key,
                "verify": cosmos_endpoint.verify,
                **config,
            }
        ),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.integration._receiver_child"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_dtw_03_a_process_killed_between_handler_and_commit_leaves_nothing_and_the_redelivery_applies_once(
    kafka_bootstrap: str,
    topic: str,
    publisher: KafkaPublisher,
    cosmos_endpoint: CosmosEndpoint,
    cosmos_database: DatabaseProxy,
    cosmos_container_factory: ContainerFactory,
) -> None:
    proxy = cosmos_container_factory(("/tenantId",))
    app = CosmosDocumentContainer(proxy)
    produce(publisher, topic, "a")
    config = {"topic": topic, "group": "g1", "database": cosmos_database.id, "container": proxy.id, "tier": "document"}
    killed = _child(kafka_bootstrap, cosmos_endpoint, kill_at="commit", **config)
    assert killed.returncode == -9, killed.stderr
    assert (count(app, "order-"), count(app, "inbox:")) == (0, 0), "the killed attempt committed nothing"
    assert committed(kafka_bootstrap, topic, "g1") is None, "and acknowledged nothing"
    restarted = _child(kafka_bootstrap, cosmos_endpoint, **config)
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout.strip().splitlines()[-1])["processed"] == 1
    assert (count(app, "order-"), count(app, "outbox:"), count(app, "inbox:")) == (1, 1, 1)
    assert committed(kafka_bootstrap, topic, "g1") == 1


def test_inb_15_a_claim_left_pending_by_a_killed_process_is_taken_over_after_its_lease(
    kafka_bootstrap: str,
    topic: str,
    publisher: KafkaPublisher,
    cosmos_endpoint: CosmosEndpoint,
    cosmos_database: DatabaseProxy,
    cosmos_container_factory: ContainerFactory,
) -> None:
    app_proxy = cosmos_container_factory(("/tenantId",))
    inbox_proxy = cosmos_container_factory(("/idempotencyKey",), default_ttl=-1)
    app = CosmosDocumentContainer(app_proxy)
    app.create({"id": "effects", "tenantId": "t", "runs": {}}, "t")
    produce(publisher, topic, "a")
    config = {
        "topic": topic,
        "group": "g1",
        "database": cosmos_database.id,
        "container": app_proxy.id,
        "inbox_container": inbox_proxy.id,
        "tier": "standalone",
    }
    killed = _child(kafka_bootstrap, cosmos_endpoint, kill_at="handler", **config)
    assert killed.returncode == -9, killed.stderr
    inbox_container = CosmosDocumentContainer(inbox_proxy)
    pending = inbox_container.read(marker_id("a", "g1"), "a")
    assert pending["Completed"] is False, "the killed process left its claim pending"

    from tests.integration import _receiver_child

    _receiver_child.APP = app
    clock = ManualClock()
    early = Inbox(inbox_container, InboxOptions(claim_lease=timedelta(seconds=30)), clock=lambda: clock.now)
    clock.now = _parse(pending["ClaimedAtUtc"]) + timedelta(seconds=31)
    receiver = IdempotentReceiver(_receiver_child.count_effect, name="g1", inbox=early, tier="standalone", clock=clock)
    summary = run_receiver(kafka_bootstrap, topic, "g1", receiver)
    assert summary.processed == 1
    assert inbox_container.read(marker_id("a", "g1"), "a")["Completed"] is True
    assert app.read("effects", "t")["runs"]["a"] == 2, "the side effect ran again: outside Cosmos it is at least once"


def _parse(value: str) -> Any:
    from airflow_chatter.inbox.markers import parse_iso_utc

    parsed = parse_iso_utc(value)
    assert parsed is not None
    return parsed
