"""OpenLineage on the live stack: a stack of its own, started with the OpenLineage provider's file transport
(``AIRFLOW__OPENLINEAGE__TRANSPORT``), runs drain DAGs; the events its worker emitted for the drain task name the
emulator's container in and the broker's topic out, per the OpenLineage naming spec, and a drain that fails emits
FAIL with its error (``errorMessage``). Source ``lineage`` reads connections stored in the metadata DB, as a
deployment's are, so the api-server's access log shows every read (``devkit.live_tasks``): its drain task reads each of
its two connections once (the bounded run of many tasks under load: ``benchmarks/openlineage_live.py``). The fault
is a failing hold of the emulator on the stamps of one source's container (docs/emulator.md): ``list_leases``
succeeds, the drain publishes, then its stamps are refused.
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
from devkit.live_tasks import connection_reads, lineage_events, store_connections, tally, task_instances
from tests.fixtures.cosmos import CosmosEndpoint, emulator_hold
from tests.fixtures.live_airflow import LiveAirflow, running_stack, wait_until
from tests.live.test_live_airflow import _assert_delivered, _trigger, _write_orders

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(600)]

#: Source ``lineage``'s connections, stored in the metadata DB (the other source's are environment variables).
STORED = ("chatter_cosmos_stored", "chatter_kafka_stored")


@pytest.fixture(scope="module")
def lineage_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if os.environ.get("CHATTER_SKIP_LIVE_AIRFLOW") == "1":
        pytest.skip("CHATTER_SKIP_LIVE_AIRFLOW=1: the live Airflow tests are skipped")
    events = tmp_path_factory.mktemp("openlineage") / "events.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    with running_stack(
        request,
        session_prefix="lineage-live-",
        source_names=("lineage", "lineagefail"),
        source_settings={"lineage": {"cosmos_conn_id": STORED[0], "kafka_conn_id": STORED[1]}},
        extra_env={
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "chatter-live",
        },
    ) as stack:
        store_connections(stack, stack.client("admin"), *STORED)
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
            (
                (found := _drain_events(path, source.drain_dag_id))
                and {"START", "COMPLETE"} <= {e["eventType"] for e in found}
                and found
            )
            or None
        ),  # an empty list is no answer yet
        timeout_s=60,
        what="the drain task's START and COMPLETE events in the file",
    )
    complete = [e for e in events if e["eventType"] == "COMPLETE"]
    container = (cosmos_namespace(live.cosmos_connection["host"], live.database), f"colls/{source.monitored.id}")
    for event in events:
        named = [(d["namespace"], d["name"]) for d in event["inputs"]]
        # START reads no connection (the listener gives it seconds), so it names no dataset.
        assert named == ([] if event["eventType"] == "START" else [container]), event["eventType"]
    delivered = [
        (d["namespace"], d["name"], d["outputFacets"]["outputStatistics"]["rowCount"])
        for e in complete
        for d in e["outputs"]
    ]
    server = live.kafka_bootstrap.split(",")[0].strip()
    assert delivered == [(f"kafka://{server}", source.topic, len(documents))], delivered
    assert sum(e["run"]["facets"]["chatter_drain"]["delivered"] for e in complete) == len(documents)
    assert live.cosmos_connection["password"] not in path.read_text(), "the account key reaches no event"

    reads = connection_reads((live.home / "process-logs" / "api-server.log").read_text())
    tallies = tally(task_instances(api, run["dag_id"], run["dag_run_id"]), lineage_events(path), reads, STORED)
    for entry in tallies.values():
        print("connection reads per task instance (min/mean/max):", entry.line(STORED))
    drain = tallies["drain"]
    assert drain.events["START"] == drain.events["COMPLETE"] == drain.instances == 1, drain
    assert {c: drain.reads[c] for c in STORED} == {c: [1] for c in STORED}, "the drain read each connection once"


#: What a read-only key gets from an account on a write (the failing hold's answer to the drain's stamps).
READ_ONLY = {"status": 403, "substatus": 5301, "message": "Request blocked by Auth: the key is read-only"}


def test_a_live_drain_whose_stamps_are_refused_emits_fail_with_its_error_naming_both_datasets(
    lineage_stack: tuple[LiveAirflow, Path], cosmos_endpoint: CosmosEndpoint
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the stamps are refused by a failing hold of the project emulator")
    live, path = lineage_stack
    api: httpx.Client = live.client("admin")
    source = live.sources["lineagefail"]
    live.wait_for_dag(api, source.drain_dag_id)
    documents = _write_orders(source, 4, "lineagefail")
    with emulator_hold(cosmos_endpoint, source.monitored, ["batch", "patch"], fail=READ_ONLY) as refusal:
        live.unpause(api, source.drain_dag_id)  # its scheduled run, or the one triggered here, meets the fault
        response = _trigger(api, source.drain_dag_id, {})
        assert response.status_code == 200, response.text
        events = wait_until(
            lambda: (
                (
                    (found := _drain_events(path, source.drain_dag_id))
                    and "FAIL" in {e["eventType"] for e in found}
                    and found
                )
                or None  # an empty list is no answer yet
            ),
            timeout_s=300,
            what="the drain task's FAIL event in the file",
        )
        assert refusal.state()["matched"] >= 1, "the drain's stamps reached the failing hold"
    failed = next(e for e in events if e["eventType"] == "FAIL")
    run_id = failed["run"]["facets"]["airflow"]["dagRun"]["run_id"]
    run = api.get(f"/api/v2/dags/{source.drain_dag_id}/dagRuns/{run_id}").json()
    assert live.task_states(api, run)["list_leases[-1]"] == "success", "the fault spares list_leases"

    start = next(e for e in events if e["eventType"] == "START" and e["run"]["runId"] == failed["run"]["runId"])
    assert failed["job"]["name"] == f"{source.drain_dag_id}.drain" and failed["job"]["namespace"] == "chatter-live"
    container = (cosmos_namespace(live.cosmos_connection["host"], live.database), f"colls/{source.monitored.id}")
    assert [(d["namespace"], d["name"]) for d in failed["inputs"]] == [container]
    assert start["inputs"] == start["outputs"] == [], "START reads no connection, so it names no dataset"
    server = live.kafka_bootstrap.split(",")[0].strip()
    published = [
        (d["namespace"], d["name"], d["outputFacets"]["outputStatistics"]["rowCount"]) for d in failed["outputs"]
    ]
    assert published == [(f"kafka://{server}", source.topic, len(documents))], "published, then the stamps failed"
    assert failed["run"]["facets"]["chatter_drain"]["delivered"] == 0, "no stamp landed"
    error = failed["run"]["facets"]["errorMessage"]
    assert error["programmingLanguage"] == "python"
    assert "Forbidden" in error["message"] and READ_ONLY["message"] in error["message"], error
    print("FAIL event:", json.dumps(failed, indent=2))  # the docs' example (docs/ecosystem.md)
    text = path.read_text()
    assert live.cosmos_connection["password"] not in text and "AccountKey" not in text, "no secret in any event"

    # The fault was the only cause: released, the task's retry delivers the same documents.
    run = live.wait_for_run(api, source.drain_dag_id, run_id, timeout_s=300)
    assert run["state"] == "success"
    _assert_delivered(live, source, documents)
