"""The topic-backlog event trigger over the real broker: it fires when records lie past the group's committed
offsets, stays quiet otherwise, and commits nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.backlog import uncommitted_ranges
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.airflow.triggers.topic_backlog import ChatterTopicBacklogTrigger
from airflow_chatter.ports import OutgoingMessage

pytestmark = [pytest.mark.kafka]


def _topic(bootstrap: str, records: int) -> str:
    name = f"chatter-backlog-{uuid.uuid4().hex[:10]}"
    ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), [name], partitions=2)
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=bootstrap, max_block_ms=15_000))
    try:
        messages = [
            OutgoingMessage(name, b"{}", f"k{n}".encode(), (("message-id", f"m{n}".encode()),)) for n in range(records)
        ]
        assert all(o.confirmed for o in publisher.send_batch(messages))
    finally:
        publisher.close()
    return name


def _committed(bootstrap: str, topic: str, group: str) -> list[int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return [consumer.committed(TopicPartition(topic, p)) for p in (0, 1)]
    finally:
        consumer.close(autocommit=False)


def _commit_all(bootstrap: str, topic: str, group: str) -> None:
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in (0, 1)]
        ends = consumer.end_offsets(parts)
        consumer.commit({tp: OffsetAndMetadata(ends[tp], "", -1) for tp in parts})
    finally:
        consumer.close(autocommit=False)


class _Trigger(ChatterTopicBacklogTrigger):
    bootstrap = ""

    def _open(self) -> Any:
        return KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group_id, enable_auto_commit=False)


async def _first_event(trigger: ChatterTopicBacklogTrigger, timeout: float) -> Any:
    events = trigger.run()
    try:
        return (await asyncio.wait_for(events.__anext__(), timeout)).payload
    except TimeoutError:
        return None
    finally:
        await events.aclose()
        await trigger.cleanup()


def test_the_trigger_fires_for_records_past_the_committed_offsets_and_commits_nothing(kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap, 6)
    trigger = _Trigger(topic=topic, group_id="receivers", poll_interval=1)
    trigger.bootstrap = kafka_bootstrap
    event = asyncio.run(_first_event(trigger, 30))
    assert event is not None and (event["status"], event["topic"], event["records"]) == ("records", topic, 6)
    assert _committed(kafka_bootstrap, topic, "receivers") == [None, None], "the watcher committed nothing"


def test_the_trigger_stays_quiet_when_the_group_committed_everything(kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap, 4)
    _commit_all(kafka_bootstrap, topic, "caught-up")
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id="caught-up", enable_auto_commit=False)
    try:
        assert uncommitted_ranges(consumer, topic) == {}
    finally:
        consumer.close(autocommit=False)
    trigger = _Trigger(topic=topic, group_id="caught-up", poll_interval=1)
    trigger.bootstrap = kafka_bootstrap
    assert asyncio.run(_first_event(trigger, 4)) is None


def test_a_record_arriving_just_after_the_receiver_committed_fires_again_though_the_count_is_the_same(
    kafka_bootstrap: str,
) -> None:
    """Between two polls the receiver commits the one record the trigger fired for, and one more arrives on the same
    partition: one record past the offsets again, but new offsets, so the trigger fires."""
    topic = _topic(kafka_bootstrap, 1)
    trigger = _Trigger(topic=topic, group_id="one-by-one", poll_interval=1)
    trigger.bootstrap = kafka_bootstrap

    async def two_events() -> tuple[Any, Any]:
        events = trigger.run()
        try:
            first = (await asyncio.wait_for(events.__anext__(), 30)).payload
            # The generator is suspended at its yield: no poll happens while the receiver commits and the
            # producer publishes.
            _commit_all(kafka_bootstrap, topic, "one-by-one")
            publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, max_block_ms=15_000))
            try:
                assert publisher.send_batch([OutgoingMessage(topic, b"{}", b"k0", (("message-id", b"m-next"),))])[
                    0
                ].confirmed
            finally:
                publisher.close()
            try:
                second = (await asyncio.wait_for(events.__anext__(), 10)).payload
            except TimeoutError:
                second = None
            return first, second
        finally:
            await events.aclose()
            await trigger.cleanup()

    first, second = asyncio.run(two_events())
    assert second is not None, "the new record fired nothing"
    assert first["partitions"] == second["partitions"] and second["records"] == 1, (first, second)


def test_the_trigger_serializes_exactly_its_kwargs() -> None:
    trigger = ChatterTopicBacklogTrigger(topic="t", group_id="g", kafka_conn_id="c", poll_interval=2)
    path, kwargs = trigger.serialize()
    assert path == "airflow_chatter.airflow.triggers.topic_backlog.ChatterTopicBacklogTrigger"
    assert kwargs == {"topic": "t", "group_id": "g", "kafka_conn_id": "c", "poll_interval": 2.0}
    assert ChatterTopicBacklogTrigger(**kwargs).serialize() == (path, kwargs)
