"""``on_pending`` and the topic watcher on Airflow 3.3's shared streams, against the project emulator and the real
broker: the triggers run through Airflow's real ``SharedStreamManager`` (the triggerer's loop around it is
``tests/airflow/triggers/_shared_stream.Triggerer``), with the hooks' own clients.

What each test shows: two watchers of one container (one topic) cost one change-feed read (one consumer) per poll;
an event Airflow never persisted is fired again after a restart; a persisted one moves the stored position (the
continuation document, the watcher group's committed offsets) and does not come again."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.airflow.sources import SourceConfig
from airflow_chatter.airflow.triggers.pending_event import ChatterPendingOutboxEventTrigger
from airflow_chatter.airflow.triggers.topic_backlog import ChatterTopicBacklogTrigger, watch_group_id
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import OutgoingMessage
from tests.airflow.triggers._shared_stream import Triggerer, quick_polls, until
from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint, chatter_connection, emulator_stats

#: Real pauses would make these tests wait out intervals; each poll still happens once per (recorded) pause.
TIMEOUT_S = 60.0


def _cosmos_connection(monkeypatch: pytest.MonkeyPatch, endpoint: CosmosEndpoint, database: str) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_CHATTER_COSMOS_STREAM", chatter_connection(endpoint, database))
    return "chatter_cosmos_stream"


def _pending_trigger(conn_id: str, database: str, monitored: str, leases: str, name: str, prefix: str) -> Any:
    config = SourceConfig.model_validate(
        {
            "name": name,
            "cosmos_conn_id": conn_id,
            "database": database,
            "monitored_container": monitored,
            "lease_container": leases,
            "partition_key_paths": "/tenantId",
            "lease_prefix": prefix,
            "schedule": "on_pending",
            "on_pending_poll_seconds": 1,
        }
    )
    return ChatterPendingOutboxEventTrigger(source=config.model_dump(mode="json"), poll_interval=1)


def _write(proxy: Any, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        message_id = f"stream-{uuid.uuid4().hex[:10]}"
        proxy.create_item(
            OutboxMessage(message_id, "orders", '{"n":1}', "application/json", {}).to_document(("/tenantId",), "t1")
        )
        ids.append(message_id)
    return ids


@pytest.mark.cosmos
def test_two_on_pending_sources_on_one_emulator_container_cost_one_change_feed_read_per_poll_and_lose_nothing(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("counts the emulator's change-feed reads (/_chatter/stats)")
    monitored = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    leases = cosmos_container_factory(("/id",), default_ttl=-1)
    database = monitored.container_link.split("/")[1]
    conn_id = _cosmos_connection(monkeypatch, cosmos_endpoint, database)
    pauses = quick_polls(monkeypatch)

    def triggers() -> tuple[Any, Any]:
        return (
            _pending_trigger(conn_id, database, monitored.id, leases.id, "orders", ""),
            _pending_trigger(conn_id, database, monitored.id, leases.id, "audit", "audit-"),
        )

    def reads() -> int:
        return int(emulator_stats(cosmos_endpoint, monitored)["change_feed_reads"])

    def stored() -> Any:
        try:
            return leases.read_item(f"chatter-pending-stream.{monitored.id}", f"chatter-pending-stream.{monitored.id}")
        except Exception:  # noqa: BLE001 - not stored yet
            return None

    async def scenario() -> None:
        first = Triggerer()
        for trigger_id, trigger in enumerate(triggers(), start=1):
            first.start(trigger_id, trigger)
        await until(lambda: len(pauses) >= 3, "the first polls", TIMEOUT_S)
        polls_before, reads_before = len(pauses), reads()
        await until(lambda: len(pauses) >= polls_before + 8, "eight idle polls", TIMEOUT_S)
        idle_polls, idle_reads = len(pauses) - polls_before, reads() - reads_before
        assert abs(idle_reads - idle_polls) <= 1, (
            f"{idle_reads} change-feed reads in {idle_polls} polls of a one-range container watched by two sources: "
            "one read per poll, not one per source"
        )

        written = _write(monitored, 3)
        await until(lambda: len(first.fired) == 2, "both sources' events", TIMEOUT_S)
        assert all(f.payload["message_ids"] == written for f in first.fired)
        position_before = stored()
        await first.kill()  # SIGKILL before the supervisor confirmed them
        assert stored() == position_before, "nothing stored for events Airflow never persisted"

        second = Triggerer()
        for trigger_id, trigger in enumerate(triggers(), start=1):
            second.start(trigger_id, trigger)
        await until(lambda: len(second.fired) == 2, "both events again after the restart", TIMEOUT_S)
        assert all(f.payload["message_ids"] == written for f in second.fired), "0 lost"
        second.persist()
        await until(lambda: stored() != position_before, "the position stored after the persist", TIMEOUT_S)
        await second.kill()

        third = Triggerer()
        for trigger_id, trigger in enumerate(triggers(), start=1):
            third.start(trigger_id, trigger)
        more = _write(monitored, 1)
        await until(lambda: len(third.fired) == 2, "the next write's events", TIMEOUT_S)
        await third.kill()
        assert all(f.payload["message_ids"] == more for f in third.fired), "persisted events do not come again"

    asyncio.run(scenario())


def _kafka_connection(monkeypatch: pytest.MonkeyPatch, bootstrap: str) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_KAFKA_STREAM",
        json.dumps({"conn_type": "chatterkafka", "host": bootstrap, "extra": {"request_timeout_ms": 10000}}),
    )
    return "chatter_kafka_stream"


def _publish(bootstrap: str, topic: str, count: int) -> None:
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=bootstrap, max_block_ms=15_000))
    try:
        messages = [
            OutgoingMessage(topic, b"{}", f"k{n}".encode(), (("message-id", f"m{n}".encode()),)) for n in range(count)
        ]
        assert all(o.confirmed for o in publisher.send_batch(messages))
    finally:
        publisher.close()


def _committed(bootstrap: str, topic: str, group: str) -> list[int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return [consumer.committed(TopicPartition(topic, p)) for p in (0, 1)]
    finally:
        consumer.close(autocommit=False)


@pytest.mark.kafka
def test_two_receivers_of_one_topic_share_the_watcher_consumer_and_its_offsets_move_only_after_the_persist(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"chatter-stream-{uuid.uuid4().hex[:10]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=2)
    conn_id = _kafka_connection(monkeypatch, kafka_bootstrap)
    quick_polls(monkeypatch)
    group = watch_group_id(topic)

    def watchers() -> list[ChatterTopicBacklogTrigger]:
        return [
            ChatterTopicBacklogTrigger(topic=topic, group_id=receiver, kafka_conn_id=conn_id, poll_interval=1)
            for receiver in ("billing", "shipping")
        ]

    async def scenario() -> None:
        first = Triggerer()
        for trigger_id, trigger in enumerate(watchers(), start=1):
            first.start(trigger_id, trigger)
        # The watcher group stores its starting position (the ends) before it reads anything.
        await until(lambda: None not in _committed(kafka_bootstrap, topic, group), "the watcher's start", TIMEOUT_S)
        start = _committed(kafka_bootstrap, topic, group)
        _publish(kafka_bootstrap, topic, 4)
        await until(lambda: sum(f.payload["records"] for f in first.fired if f.trigger_id == 1) == 4, "4", TIMEOUT_S)
        await first.kill()  # before the supervisor confirmed the events
        assert _committed(kafka_bootstrap, topic, group) == start, "nothing committed for unpersisted events"

        second = Triggerer()
        for trigger_id, trigger in enumerate(watchers(), start=1):
            second.start(trigger_id, trigger)
        await until(
            lambda: all(sum(f.payload["records"] for f in second.fired if f.trigger_id == t) == 4 for t in (1, 2)),
            "all 4 records announced again to both receivers",
            TIMEOUT_S,
        )
        second.persist()
        await until(lambda: sum(c or 0 for c in _committed(kafka_bootstrap, topic, group)) == 4, "commit", TIMEOUT_S)
        await second.kill()
        assert {f.payload["group_id"] for f in second.fired} == {"billing", "shipping"}

    asyncio.run(scenario())


@pytest.mark.kafka
def test_a_topic_created_after_the_watcher_started_has_its_first_records_announced(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain's first publish creates its topic: the watcher that found it missing starts its group at the
    beginning, so those first records start the receiver too (a watcher on an existing topic starts at its end)."""
    topic = f"chatter-stream-new-{uuid.uuid4().hex[:10]}"
    conn_id = _kafka_connection(monkeypatch, kafka_bootstrap)
    pauses = quick_polls(monkeypatch)
    trigger = ChatterTopicBacklogTrigger(topic=topic, group_id="billing", kafka_conn_id=conn_id, poll_interval=1)

    async def scenario() -> Triggerer:
        triggerer = Triggerer()
        triggerer.start(1, trigger)
        await until(lambda: len(pauses) >= 3, "the watcher to have looked for the topic", TIMEOUT_S)
        ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=2)
        _publish(kafka_bootstrap, topic, 3)
        await until(lambda: triggerer.fired, "the first records' event", TIMEOUT_S)
        await triggerer.kill()
        return triggerer

    triggerer = asyncio.run(scenario())
    assert sum(f.payload["records"] for f in triggerer.fired) == 3, "the topic's first records were announced"


@pytest.mark.kafka
def test_records_published_just_before_a_new_watcher_started_are_announced(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message published while the watcher is being deployed (its trigger assigned, its consumer not open yet):
    a new watcher group starts at the records of the last FRESH_LOOKBACK_SECONDS, so it starts the receiver."""
    topic = f"chatter-stream-early-{uuid.uuid4().hex[:10]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=2)
    _publish(kafka_bootstrap, topic, 2)
    conn_id = _kafka_connection(monkeypatch, kafka_bootstrap)
    quick_polls(monkeypatch)
    trigger = ChatterTopicBacklogTrigger(topic=topic, group_id="billing", kafka_conn_id=conn_id, poll_interval=1)

    async def scenario() -> Triggerer:
        triggerer = Triggerer()
        triggerer.start(1, trigger)
        await until(lambda: triggerer.fired, "the early records' event", TIMEOUT_S)
        await triggerer.kill()
        return triggerer

    assert sum(f.payload["records"] for f in asyncio.run(scenario()).fired) == 2
