"""``on_pending`` on Airflow 3.3's shared streams in ack mode: the pending-outbox event trigger driven through the
real ``SharedStreamManager`` (the triggerer's loop around it is ``_shared_stream.Triggerer``), against memory
containers wired in place of the Cosmos hook."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_chatter.airflow.triggers.pending_event import ChatterPendingOutboxEventTrigger
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.pending_stream import PositionStore
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from tests.airflow._support import World, install_world, source
from tests.airflow.triggers._shared_stream import Triggerer, quick_polls, until

#: Two sources on one container (same database, lease container and poll settings), told apart by lease prefix.
ORDERS = source(name="orders", schedule="on_pending", on_pending_poll_seconds=2)
AUDIT = source(name="audit", schedule="on_pending", on_pending_poll_seconds=2, lease_prefix="audit-")


def _trigger(config: Any) -> ChatterPendingOutboxEventTrigger:
    return ChatterPendingOutboxEventTrigger(
        source=config.model_dump(mode="json"), poll_interval=config.on_pending_poll_seconds
    )


def _ids(written: list[dict[str, Any]]) -> list[str]:
    return [str(d[MESSAGE_ID_FIELD]) for d in written]


def _stored(world: World) -> Any:
    return PositionStore(world.leases, "orders").load()


def test_two_sources_on_one_container_share_one_change_feed_poll_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    pauses = quick_polls(monkeypatch)
    assert _trigger(ORDERS).shared_stream_key() == _trigger(AUDIT).shared_stream_key(), "one stream for both"

    async def scenario() -> None:
        triggerer = Triggerer()
        triggerer.start(1, _trigger(ORDERS))
        triggerer.start(2, _trigger(AUDIT))
        await until(lambda: len(pauses) > 10, "ten polls")
        await triggerer.kill()

    asyncio.run(scenario())
    polls = len(pauses) - 1  # the first pause comes before the first poll
    reads = world.monitored.calls["read_change_feed"]
    assert polls - 1 <= reads <= polls + 1, (
        f"{reads} change-feed reads for {polls} polls of an idle one-range container and two sources: one read per "
        "poll, not one per source"
    )


def test_both_sources_fire_for_a_write_and_the_position_moves_only_after_airflow_persisted_the_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    quick_polls(monkeypatch)

    async def scenario() -> None:
        triggerer = Triggerer()
        triggerer.start(1, _trigger(ORDERS))
        triggerer.start(2, _trigger(AUDIT))
        written = _ids(world.write(tenants=1, per_tenant=2))
        await until(lambda: len(triggerer.fired) == 2, "both sources' events")
        assert {f.trigger_id for f in triggerer.fired} == {1, 2}
        assert all(f.payload["message_ids"] == written and f.payload["pending"] == 2 for f in triggerer.fired)
        assert all(f.seq is not None for f in triggerer.fired), "each event is bound to its batch (ack mode)"
        stored_before = _stored(world)
        await asyncio.sleep(0.05)  # several polls pass; nothing was persisted yet
        assert _stored(world) == stored_before, "no position stored before Airflow persisted the events"
        triggerer.persist()
        await until(lambda: _stored(world) != stored_before, "the position to be stored after the persist")
        await triggerer.kill()

    asyncio.run(scenario())


def test_events_never_persisted_are_fired_again_after_a_triggerer_restart_and_persisted_ones_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    quick_polls(monkeypatch)

    async def scenario() -> None:
        first = Triggerer()
        first.start(1, _trigger(ORDERS))
        lost = _ids(world.write(tenants=1, per_tenant=1))
        await until(lambda: first.fired, "the first event")
        await first.kill()  # SIGKILL before the supervisor confirmed the event

        second = Triggerer()
        second.start(1, _trigger(ORDERS))
        await until(lambda: second.fired, "the event again")
        assert second.fired[0].payload["message_ids"] == lost, "the unpersisted event comes again: 0 lost"
        second.persist()
        stored = await until(lambda: _stored(world), "the position after the persist")
        await asyncio.sleep(0.05)
        await second.kill()
        assert len(second.fired) == 1, "after the persist no poll announced it again"

        third = Triggerer()
        third.start(1, _trigger(ORDERS))
        more = _ids(world.write(tenants=1, per_tenant=1))
        await until(lambda: third.fired, "the next write's event")
        await third.kill()
        assert [f.payload["message_ids"] for f in third.fired] == [more], (
            "after a restart only the new write fires: the persisted one is past the stored position"
        )
        assert stored is not None

    asyncio.run(scenario())


def test_an_event_whose_persist_never_confirms_times_out_and_is_fired_again_without_a_restart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    quick_polls(monkeypatch)

    async def scenario() -> None:
        triggerer = Triggerer(ack_timeout=0.2)
        triggerer.start(1, _trigger(ORDERS))
        written = _ids(world.write(tenants=1, per_tenant=1))
        await until(lambda: triggerer.fired, "the first event")
        # The subscriber is force-failed by the ack timeout; the triggerer would restart its trigger:
        await until(lambda: triggerer.tasks[0].done(), "the ack timeout to fail the trigger")
        assert _stored(world) is None, "a timed-out event is not stored past"
        triggerer.start(3, _trigger(ORDERS))
        await until(lambda: len(triggerer.fired) == 2, "the event again")
        assert triggerer.fired[1].payload["message_ids"] == written
        await triggerer.kill()

    asyncio.run(scenario())


def test_stamps_a_drain_writes_fire_nothing_pnd04(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    quick_polls(monkeypatch)

    async def scenario() -> None:
        triggerer = Triggerer()
        triggerer.start(1, _trigger(ORDERS))
        written = world.write(tenants=1, per_tenant=2)
        await until(lambda: triggerer.fired, "the event")
        triggerer.persist()
        for document in written:
            world.monitored.replace(document["id"], "t0", {**document, "status": "delivered"})
        stored = _stored(world)
        await until(lambda: _stored(world) != stored, "the stamps' position to be stored")
        await triggerer.kill()
        assert len(triggerer.fired) == 1, "the delivered stamps moved the position and fired no phantom event"

    asyncio.run(scenario())


def test_a_failed_poll_is_retried_and_the_watcher_keeps_firing(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.ports import ServiceUnavailable
    from tests.unit.drain._drain_support import fail_operation

    world = install_world(monkeypatch)
    pauses = quick_polls(monkeypatch)
    fail_operation(world.monitored, "read_change_feed", ServiceUnavailable("503 from Cosmos"), on_call=1)

    async def scenario() -> None:
        triggerer = Triggerer()
        triggerer.start(1, _trigger(ORDERS))
        written = _ids(world.write(tenants=1, per_tenant=1))
        await until(lambda: triggerer.fired, "an event after the failed poll")
        await triggerer.kill()
        assert triggerer.fired[0].payload["message_ids"] == written

    asyncio.run(scenario())
    assert pauses[:2] == [2.0, 2.0], "the first interval, then one back-off interval after the failure"


def test_without_the_manager_run_is_a_stream_of_its_own_that_fires_and_stores_the_position_after_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    quick_polls(monkeypatch)
    written = _ids(world.write(tenants=1, per_tenant=2))

    async def scenario() -> tuple[dict[str, Any], Any, Any]:
        events = _trigger(ORDERS).run()
        first = dict((await events.__anext__()).payload)
        before = _stored(world)
        more = asyncio.ensure_future(events.__anext__())  # the triggerer took the event and asks for the next
        after = await until(lambda: _stored(world), "the position after the event was taken")
        more.cancel()
        await asyncio.gather(more, return_exceptions=True)
        await events.aclose()
        return first, before, after

    first, before, after = asyncio.run(scenario())
    assert first["message_ids"] == written
    assert before is None and after is not None, "stored only once the triggerer had taken the event"


def test_the_trigger_serializes_exactly_its_kwargs_and_is_an_event_trigger_in_ack_mode() -> None:
    from airflow.triggers.base import BaseEventTrigger

    trigger = ChatterPendingOutboxEventTrigger(source=ORDERS.model_dump(mode="json"), poll_interval=2)
    classpath, kwargs = trigger.serialize()
    assert isinstance(trigger, BaseEventTrigger), "AssetWatcher accepts only event triggers"
    assert classpath == "airflow_chatter.airflow.triggers.pending_event.ChatterPendingOutboxEventTrigger"
    assert kwargs == {
        "source": ORDERS.model_dump(mode="json"),
        "poll_interval": 2.0,
        "refire_after_seconds": 300.0,
        "page_size": 100,
        "max_pages": 5,
    }
    assert ChatterPendingOutboxEventTrigger(**kwargs).serialize() == (classpath, kwargs), "round trip"
    assert "create_shared_stream_producer" in type(trigger).__dict__, "ack mode: the trigger builds a producer"
    with pytest.raises(ConfigurationError, match="poll_interval"):
        ChatterPendingOutboxEventTrigger(source=ORDERS.model_dump(mode="json"), poll_interval=0.5)


def test_sources_on_other_containers_or_poll_settings_do_not_share_a_stream() -> None:
    base = _trigger(ORDERS).shared_stream_key()
    assert _trigger(source(name="x", monitored_container="invoices")).shared_stream_key() != base
    assert _trigger(source(name="y", on_pending_poll_seconds=3)).shared_stream_key() != base
    assert _trigger(source(name="z", lease_container="other-leases")).shared_stream_key() != base
