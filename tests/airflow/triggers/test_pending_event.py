"""Event-driven drains (``schedule: on_pending``): the asset and the DAG, and the sources file's settings. The
trigger itself is tested through the shared-stream manager in ``test_pending_stream_trigger.py``."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources
from airflow_chatter.airflow.triggers.pending_event import ChatterPendingOutboxEventTrigger
from tests.airflow._support import source


def test_on_pending_schedules_the_drain_dag_on_the_sources_asset_with_a_watcher() -> None:
    from airflow.sdk import Asset

    from airflow_chatter.airflow.dags.factory import build_drain_dag

    dag = build_drain_dag(source(schedule="on_pending", on_pending_poll_seconds=3))
    [asset] = dag.timetable.asset_condition.objects  # type: ignore[attr-defined]
    assert isinstance(asset, Asset) and asset.name == "chatter_pending_orders"
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, ChatterPendingOutboxEventTrigger)
    assert watcher.trigger.poll_interval == 3 and watcher.trigger.source["name"] == "orders"
    other = build_drain_dag(source(name="audit", schedule="on_pending", lease_prefix="audit-"))
    [other_asset] = other.timetable.asset_condition.objects  # type: ignore[attr-defined]
    assert other_asset.uri != asset.uri, "two sources on one container: two assets (Airflow keeps one per URI)"
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
