"""The pending-outbox sensor and trigger, at execute level (no metadata DB, no triggerer process)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.sensors.pending import ChatterPendingOutboxSensor
from airflow_chatter.airflow.triggers.pending import ChatterPendingOutboxTrigger
from airflow_chatter.errors import ConfigurationError
from tests.airflow._support import World, install_world, source

TRIGGER_KWARGS: dict[str, Any] = {
    "cosmos_conn_id": "chatter_cosmos_test",
    "database": "shop",
    "monitored_container": "orders",
    "lease_container": "leases",
    "lease_ids": ["lease-1"],
    "poll_interval": 5.0,
    "page_size": 50,
    "max_pages": 3,
    "cosmos_http_logging": True,
}


def sensor(**kwargs: Any) -> ChatterPendingOutboxSensor:
    return ChatterPendingOutboxSensor(task_id="wait", source=source(), poke_interval=5, **kwargs)


def lease_id() -> str:
    [lease] = ChatterListLeasesOperator(task_id="list", source=source()).execute(context={})
    return lease


async def first_event(trigger: ChatterPendingOutboxTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("the trigger ended without an event")


def test_trigger_serializes_exactly_its_kwargs() -> None:
    classpath, kwargs = ChatterPendingOutboxTrigger(**TRIGGER_KWARGS).serialize()
    assert classpath == "airflow_chatter.airflow.triggers.pending.ChatterPendingOutboxTrigger"
    assert kwargs == TRIGGER_KWARGS, "the triggerer rebuilds the trigger from these kwargs, nothing else"
    assert ChatterPendingOutboxTrigger(**kwargs).serialize() == (classpath, kwargs), "round trip"


@pytest.mark.parametrize("interval", [0.1, 3600])
def test_poll_interval_is_bounded(interval: float) -> None:
    with pytest.raises(ConfigurationError, match="poll_interval"):
        ChatterPendingOutboxTrigger(**{**TRIGGER_KWARGS, "poll_interval": interval})


def test_poke_sees_pending_documents_only(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    lease = lease_id()
    assert sensor(lease_ids=[lease]).poke(context={}) is False, "an empty feed has nothing pending"
    world.write(tenants=1, per_tenant=3)
    result = sensor(lease_ids=[lease]).poke(context={})
    assert result and result.xcom_value == {"lease_id": lease, "pending": 3, "documents": 3}
    ChatterDrainOperator(task_id="drain", source=source(), lease_id=lease).execute(context={})
    assert sensor(lease_ids=[lease]).poke(context={}) is False, (
        "after the drain the feed holds only the delivered stamps (updates), which are not pending"
    )


def test_deferrable_sensor_defers_to_the_trigger_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    world: World = install_world(monkeypatch)
    lease = lease_id()
    with pytest.raises(TaskDeferred) as deferred:
        sensor().execute(context={})  # no lease ids given: every active lease of the source
    trigger = deferred.value.trigger
    assert isinstance(trigger, ChatterPendingOutboxTrigger)
    assert trigger.lease_ids == [lease] and trigger.poll_interval == 5.0
    assert deferred.value.method_name == "execute_complete"

    polls: list[float] = []

    async def no_wait(seconds: float) -> None:
        # Instead of sleeping: count the poll, and let a writer commit an order after the second one.
        polls.append(seconds)
        if len(polls) == 2:
            world.write(tenants=1, per_tenant=1)

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    event = asyncio.run(first_event(trigger))
    assert event["status"] == "pending" and event["lease_id"] == lease
    assert polls == [5.0, 5.0], "two idle polls at the poll interval, then the write is seen"
    assert sensor().execute_complete(context={}, event=event) == {"lease_id": lease, "pending": 1, "documents": 1}


def test_trigger_reports_errors_as_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    event = asyncio.run(first_event(ChatterPendingOutboxTrigger(**{**TRIGGER_KWARGS, "lease_ids": ["missing"]})))
    assert event["status"] == "error" and "NotFound" in event["message"]
    with pytest.raises(RuntimeError, match="NotFound"):
        sensor().execute_complete(context={}, event=event)


def test_poke_mode_returns_at_once_when_work_is_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    lease = lease_id()
    world.write(tenants=2, per_tenant=1)
    result = sensor(lease_ids=[lease], deferrable=False, mode="poke").execute(context={})
    assert result == {"lease_id": lease, "pending": 2, "documents": 2}


def test_reschedule_mode_gives_the_slot_back_while_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    from unittest import mock

    from airflow.sdk.exceptions import AirflowRescheduleException

    install_world(monkeypatch)
    lease = lease_id()
    ti = mock.Mock(get_first_reschedule_date=mock.Mock(return_value=None))
    with pytest.raises(AirflowRescheduleException):
        sensor(lease_ids=[lease], deferrable=False, mode="reschedule").execute(context={"ti": ti})  # type: ignore[arg-type]


def test_the_trigger_closes_the_client_it_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    world: World = install_world(monkeypatch)
    with pytest.raises(TaskDeferred) as deferred:
        sensor().execute(context={})
    trigger = deferred.value.trigger
    world.write(tenants=1, per_tenant=1)

    async def run_then_clean_up() -> dict[str, Any]:
        event = await first_event(trigger)
        await trigger.cleanup()
        return event

    assert asyncio.run(run_then_clean_up())["status"] == "pending"
    assert world.closed == 1, "cleanup closes the trigger's own client, not a hook's private one"
