"""Event-driven drains (``schedule: on_pending``): the pending watch, its event trigger, the asset and the DAG.

The watch runs against memory containers through the hooks' test wiring; the trigger's loop is driven with
``asyncio.sleep`` replaced, so nothing waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources
from airflow_chatter.airflow.triggers.pending_event import ChatterPendingOutboxEventTrigger
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.pending_watch import NO_LEASES, PendingWatch
from tests.airflow._support import World, install_world, source


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watch(world: World, clock: Clock, **kwargs: Any) -> PendingWatch:
    return PendingWatch(source(), world.monitored, world.leases, clock=clock, **kwargs)


def test_a_source_never_drained_fires_once_for_pending_documents_without_creating_leases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    clock = Clock()
    watcher = watch(world, clock)
    assert watcher.poll() is None, "an empty outbox fires nothing"
    world.write(tenants=2, per_tenant=2)

    assert watcher.poll() == {"status": "pending", "source": "orders", "leases": {NO_LEASES: 4}, "pending": 4}
    assert watcher.poll() is None, "the same pending documents fire once, not on every poll"
    assert list(world.leases.query("SELECT * FROM c")) == [], "the watch is read-only: no lease was created"


def test_a_lease_fires_once_per_checkpoint_and_again_after_a_drain_moved_it(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    [lease] = ChatterListLeasesOperator(task_id="list", source=source()).execute(context={})
    clock = Clock()
    watcher = watch(world, clock)
    world.write(tenants=1, per_tenant=3)

    assert watcher.poll() == {"status": "pending", "source": "orders", "leases": {lease: 3}, "pending": 3}
    assert watcher.poll() is None, "the drain the event caused has not run yet: no second event"

    ChatterDrainOperator(task_id="drain", source=source(), lease_id=lease).execute(context={})
    assert watcher.poll() is None, "after the drain only delivered stamps follow the checkpoint"
    world.write(tenants=1, per_tenant=2)
    assert watcher.poll() == {"status": "pending", "source": "orders", "leases": {lease: 2}, "pending": 2}


def test_documents_still_pending_fire_again_after_refire_after_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    [lease] = ChatterListLeasesOperator(task_id="list", source=source()).execute(context={})
    clock = Clock()
    watcher = watch(world, clock, refire_after_seconds=300)
    world.write(tenants=1, per_tenant=1)
    assert watcher.poll() is not None
    clock.now += 299
    assert watcher.poll() is None
    clock.now += 1
    assert watcher.poll() == {"status": "pending", "source": "orders", "leases": {lease: 1}, "pending": 1}, (
        "a drain that failed (checkpoint unmoved) does not leave the documents waiting forever"
    )


def test_the_event_trigger_serializes_its_kwargs_and_is_an_event_trigger() -> None:
    from airflow.triggers.base import BaseEventTrigger

    trigger = ChatterPendingOutboxEventTrigger(source=source().model_dump(mode="json"), poll_interval=2)
    classpath, kwargs = trigger.serialize()
    assert isinstance(trigger, BaseEventTrigger), "AssetWatcher accepts only event triggers"
    assert classpath == "airflow_chatter.airflow.triggers.pending_event.ChatterPendingOutboxEventTrigger"
    assert ChatterPendingOutboxEventTrigger(**kwargs).serialize() == (classpath, kwargs), "round trip"
    with pytest.raises(ConfigurationError, match="poll_interval"):
        ChatterPendingOutboxEventTrigger(source=source().model_dump(mode="json"), poll_interval=0.5)


def test_the_event_trigger_keeps_watching_after_a_failed_poll_and_fires_for_new_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    ChatterListLeasesOperator(task_id="list", source=source()).execute(context={})
    trigger = ChatterPendingOutboxEventTrigger(source=source().model_dump(mode="json"), poll_interval=2)
    calls = {"n": 0}
    real_poll = PendingWatch.poll

    def flaky_poll(self: PendingWatch) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("Cosmos unreachable")
        return real_poll(self)

    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            world.write(tenants=1, per_tenant=2)

    monkeypatch.setattr(PendingWatch, "poll", flaky_poll)
    monkeypatch.setattr(asyncio, "sleep", no_wait)

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended")

    payload = asyncio.run(first())
    assert payload["status"] == "pending" and payload["pending"] == 2
    assert sleeps == [2.0, 2.0], "one back-off after the failure, one idle poll, then the write is seen"


def test_on_pending_schedules_the_drain_dag_on_the_sources_asset_with_a_watcher() -> None:
    from airflow.sdk import Asset

    from airflow_chatter.airflow.dags.factory import build_drain_dag

    dag = build_drain_dag(source(schedule="on_pending", on_pending_poll_seconds=3))
    [asset] = dag.timetable.asset_condition.objects  # type: ignore[attr-defined]
    assert isinstance(asset, Asset) and asset.name == "chatter_pending_orders"
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, ChatterPendingOutboxEventTrigger)
    assert watcher.trigger.poll_interval == 3 and watcher.trigger.source["name"] == "orders"
    cron = build_drain_dag(source(schedule="*/5 * * * *"))
    assert cron.timetable.expression == "*/5 * * * *", "cron schedules are unchanged"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"schedule": "on-pending"}, "schedule"),
        ({"schedule": "on_pending", "on_pending_poll_seconds": 0.5}, "on_pending_poll_seconds"),
        ({"on_pending_poll_seconds": 601}, "on_pending_poll_seconds"),
    ],
)
def test_the_sources_file_refuses_a_bad_on_pending_setting_naming_the_field(change: dict[str, Any], named: str) -> None:
    raw = {"sources": [{**source().model_dump(mode="json"), **change}]}
    with pytest.raises(SourcesConfigError, match=rf"sources\[0\] \(orders\)\.{named}"):
        parse_sources(raw, path="chatter_sources.yaml")
