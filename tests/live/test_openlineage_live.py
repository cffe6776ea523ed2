"""OpenLineage on the live stack: a stack of its own, started with the OpenLineage provider's file transport
(``AIRFLOW__OPENLINEAGE__TRANSPORT``), runs a drain DAG; the events its worker emitted for the drain task name the
emulator's container in and the broker's topic out, per the OpenLineage naming spec. (FAIL with its error facet is
checked through ``dag.test()``: tests/airflow/dags/test_openlineage_events.py.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_chatter.airflow.operators.lineage import cosmos_namespace
from tests.fixtures.live_airflow import LiveAirflow, running_stack, wait_until
from tests.live.test_live_airflow import _assert_delivered, _trigger, _write_orders

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lineage_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if os.environ.get("CHATTER_SKIP_LIVE_AIRFLOW") == "1":
        pytest.skip("CHATTER_SKIP_LIVE_AIRFLOW=1: the live Airflow tests are skipped")
    events = tmp_path_factory.mktemp("openlineage") / "events.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    with running_stack(
        request,
        session_prefix="lineage-live-",
        source_names=("lineage",),
        source_settings={},
        extra_env={
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "chatter-live",
        },
    ) as stack:
        yield stack, events


def _drain_events(path: Path, dag_id: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["job"]["name"] == f"{dag_id}.drain"]


def test_a_live_drain_emits_start_and_complete_naming_the_container_in_and_the_topic_out(
    lineage_stack: tuple[LiveAirflow, Path],
) -> None:
    live, path = lineage_stack
    api: httpx.Client = live.client("admin")
    source = live.sources["lineage"]
    live.wait_for_dag(api, source.drain_dag_id)
    live.unpause(api, source.drain_dag_id)
    documents = _write_orders(source, 4, "lineage")
    response = _trigger(api, source.drain_dag_id, {})
    assert response.status_code == 200, response.text
    run = live.wait_for_run(api, source.drain_dag_id, response.json()["dag_run_id"], timeout_s=300)
    assert run["state"] == "success", run
    _assert_delivered(live, source, documents)

    events = wait_until(
        lambda: (
            (found := _drain_events(path, source.drain_dag_id))
            and {"START", "COMPLETE"} <= {e["eventType"] for e in found}
            and found
        ),
        timeout_s=60,
        what="the drain task's START and COMPLETE events in the file",
    )
    complete = [e for e in events if e["eventType"] == "COMPLETE"]
    container = (cosmos_namespace(live.cosmos_connection["host"], live.database), f"colls/{source.monitored.id}")
    for event in events:
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [container], event["eventType"]
    delivered = [
        (d["namespace"], d["name"], d["outputFacets"]["outputStatistics"]["rowCount"])
        for e in complete
        for d in e["outputs"]
    ]
    server = live.kafka_bootstrap.split(",")[0].strip()
    assert delivered == [(f"kafka://{server}", source.topic, len(documents))], delivered
    assert sum(e["run"]["facets"]["chatter_drain"]["delivered"] for e in complete) == len(documents)
    assert live.cosmos_connection["password"] not in path.read_text(), "the account key reaches no event"
