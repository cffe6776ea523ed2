"""The topic watcher on Airflow 3.3's shared streams in ack mode: ``ChatterTopicBacklogTrigger`` driven through the
real ``SharedStreamManager`` (``_shared_stream.Triggerer``) over the in-memory message source, which stands for the
watcher group's consumer."""

from __future__ import annotations

import asyncio

import pytest

from airflow_chatter.adapters.memory.source import MemoryMessageSource
from airflow_chatter.airflow.triggers import topic_backlog
from airflow_chatter.airflow.triggers.topic_backlog import ChatterTopicBacklogTrigger
from tests.airflow.triggers._shared_stream import Triggerer, quick_polls, until

TOPIC = "orders.events"


def _wire(monkeypatch: pytest.MonkeyPatch, source: MemoryMessageSource) -> list[str]:
    """Route the watcher's consumer to ``source``; the list records every consumer opened (by topic)."""
    opened: list[str] = []

    def open_source(conn_id: str, topic: str, **_: object) -> MemoryMessageSource:
        opened.append(topic)
        return source

    monkeypatch.setattr(topic_backlog, "_open_source", open_source)
    return opened


def _watcher(group: str) -> ChatterTopicBacklogTrigger:
    return ChatterTopicBacklogTrigger(topic=TOPIC, group_id=group, poll_interval=2)


def test_two_receivers_of_one_topic_share_one_consumer_and_both_fire_for_an_arrival(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = MemoryMessageSource()
    opened = _wire(monkeypatch, source)
    quick_polls(monkeypatch)

    async def scenario() -> Triggerer:
        triggerer = Triggerer()
        triggerer.start(1, _watcher("billing"))
        triggerer.start(2, _watcher("shipping"))
        source.append(TOPIC, b"{}", partition=0)
        source.append(TOPIC, b"{}", partition=1)
        await until(lambda: len(triggerer.fired) == 2, "both receivers' events")
        triggerer.persist()
        await until(lambda: source.committed, "the watcher group's commit")
        await triggerer.kill()
        return triggerer

    triggerer = asyncio.run(scenario())
    assert opened == [TOPIC], "one consumer for the topic, however many receivers watch it"
    assert sorted((f.payload["group_id"], f.payload["records"]) for f in triggerer.fired) == [
        ("billing", 2),
        ("shipping", 2),
    ]
    assert triggerer.fired[0].payload["partitions"] == {"0": 1, "1": 1}
    assert source.committed == {(TOPIC, 0): 1, (TOPIC, 1): 1}, "committed once both events were persisted"


def test_an_arrival_never_persisted_is_not_committed_and_fires_again_after_a_restart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = MemoryMessageSource()
    _wire(monkeypatch, source)
    quick_polls(monkeypatch)

    async def scenario() -> tuple[Triggerer, Triggerer]:
        first = Triggerer()
        first.start(1, _watcher("billing"))
        source.append(TOPIC, b"{}")
        await until(lambda: first.fired, "the first event")
        await first.kill()  # before the supervisor confirmed it
        assert source.committed == {}, "nothing committed for an event Airflow never persisted"
        second = Triggerer()
        second.start(1, _watcher("billing"))
        await until(lambda: second.fired, "the event again")
        second.persist()
        await until(lambda: source.committed, "the commit after the persist")
        await asyncio.sleep(0.05)
        await second.kill()
        return first, second

    first, second = asyncio.run(scenario())
    assert [f.payload["records"] for f in second.fired] == [1], "fired again once (0 lost), then not again"
    assert source.committed == {(TOPIC, 0): 1}


def test_the_trigger_serializes_exactly_its_kwargs_and_shares_by_topic_and_connection() -> None:
    trigger = ChatterTopicBacklogTrigger(topic="t", group_id="g", kafka_conn_id="c", poll_interval=2)
    path, kwargs = trigger.serialize()
    assert path == "airflow_chatter.airflow.triggers.topic_backlog.ChatterTopicBacklogTrigger"
    assert kwargs == {"topic": "t", "group_id": "g", "kafka_conn_id": "c", "poll_interval": 2.0}
    assert ChatterTopicBacklogTrigger(**kwargs).serialize() == (path, kwargs)
    other_group = ChatterTopicBacklogTrigger(topic="t", group_id="h", kafka_conn_id="c", poll_interval=2)
    other_topic = ChatterTopicBacklogTrigger(topic="u", group_id="g", kafka_conn_id="c", poll_interval=2)
    assert trigger.shared_stream_key() == other_group.shared_stream_key(), "receivers' groups share the consumer"
    assert trigger.shared_stream_key() != other_topic.shared_stream_key()
