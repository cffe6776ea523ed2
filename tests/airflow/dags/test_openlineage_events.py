"""The OpenLineage events of a drain DAG run, as the OpenLineage provider's listener emits them through its file
transport: START and COMPLETE of each drain, COMPLETE naming the Cosmos container in and the Kafka topic out per the
naming spec (START reads no connection, so it names none), and a failed drain emits FAIL with its error facet.

The provider's plugin registers its listener only when a transport is configured as its plugin is loaded; the
fixture configures the file transport (``[openlineage] transport``) and makes sure the task runner's listener
manager holds the provider's listener, exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow._support import KAFKA_SERVER, PK_PATH, break_the_feed, install_world
from tests.airflow.dags.test_dags import dagbag, valid

COSMOS = "azurecosmos://127.0.0.1:8081/dbs/shop"


@pytest.fixture
def lineage_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from airflow.providers.openlineage.plugins.listener import OpenLineageListener
    from airflow.sdk.listener import get_listener_manager

    path = tmp_path / "openlineage.jsonl"
    monkeypatch.setenv(
        "AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps({"type": "file", "log_file_path": str(path), "append": True})
    )
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "chatter-test")
    manager = get_listener_manager()  # built on first use: the plugin adds its listener if a transport is set now

    def listeners() -> list[Any]:
        return [p for p in manager.pm.get_plugins() if isinstance(p, OpenLineageListener)]

    if not listeners():
        manager.add_listener(OpenLineageListener())
    yield path
    for listener in listeners():  # later tests run without the transport
        manager.pm.unregister(listener)


def _task_events(path: Path, task: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["job"]["name"].endswith(f".{task}")]


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


@pytest.mark.airflow
def test_a_drain_run_emits_start_and_complete_naming_the_container_in_and_the_topic_out(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch, lineage_events: Path
) -> None:
    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None)]})
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=2)
    run = dagbag().dags["chatter_drain_orders"].test()
    assert run.state == "success"
    events = _task_events(lineage_events, "drain")
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"], events
    start, complete = events
    assert start["job"]["namespace"] == "chatter-test" and start["job"]["name"] == "chatter_drain_orders.drain"
    assert start["inputs"] == [] and start["outputs"] == [], "START reads no connection, so it names no dataset"
    assert _names(complete["inputs"]) == [(COSMOS, "colls/orders")]
    assert _names(complete["outputs"]) == [(f"kafka://{KAFKA_SERVER}", "orders.events")]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 4
    facet = complete["run"]["facets"]["chatter_drain"]
    assert (facet["delivered"], facet["undeliverable"]) == (4, 0)
    assert start["run"]["runId"] == complete["run"]["runId"], "one OpenLineage run per task try"
    text = lineage_events.read_text()
    assert "AccountKey" not in text and "password" not in text.lower(), "no credential reaches an event"


@pytest.mark.airflow
def test_a_failed_drain_emits_fail_with_its_error(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch, lineage_events: Path
) -> None:
    from airflow_chatter.airflow.dags import factory

    monkeypatch.setitem(factory.DEFAULT_ARGS, "retries", 0)
    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None, max_batch_size=2)]})
    world = install_world(monkeypatch)
    world.write(tenants=3, per_tenant=2)
    break_the_feed(world, "the feed of this range broke")
    run = dagbag().dags["chatter_drain_orders"].test()
    assert run.state == "failed"
    events = _task_events(lineage_events, "drain")
    assert [e["eventType"] for e in events] == ["START", "FAIL"], events
    failed = events[1]
    error = failed["run"]["facets"]["errorMessage"]
    assert "the feed of this range broke" in error["message"] and error["programmingLanguage"] == "python"
    delivered = len(world.publisher.sent)
    assert _names(failed["outputs"]) == [(f"kafka://{KAFKA_SERVER}", "orders.events")]
    assert failed["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == delivered
    assert failed["run"]["facets"]["chatter_drain"]["delivered"] == delivered
