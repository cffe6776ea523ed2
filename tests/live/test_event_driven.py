"""Event-driven drains on the live stack: ``schedule: on_pending`` (the ``event`` source of the live sources file).

The drain DAG is scheduled on the source's pending asset; the asset's watcher runs in the triggerer. Writing
pending outbox documents makes it fire, the asset event starts a run (``run_type`` ``asset_triggered``), and the
run delivers them. Everything goes through REST; every wait has a deadline.
"""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.live_airflow import LiveAirflow, wait_until
from tests.live.test_live_airflow import _assert_delivered, _runs, _write_orders

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def api(live_airflow: LiveAirflow) -> httpx.Client:
    return live_airflow.client("admin")


def _asset_runs(api: httpx.Client, dag_id: str) -> list[dict[str, object]]:
    return [r for r in _runs(api, dag_id) if r["run_type"] == "asset_triggered"]


def test_pending_documents_fire_the_asset_watcher_and_the_asset_scheduled_drain_delivers_them(
    live_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = live_airflow.sources["event"]
    live_airflow.wait_for_dag(api, source.drain_dag_id)
    details = api.get(f"/api/v2/dags/{source.drain_dag_id}/details").json()
    assert "chatter_pending_event" in str(details["asset_expression"]), details.get("timetable_summary")
    live_airflow.unpause(api, source.drain_dag_id)
    assert _asset_runs(api, source.drain_dag_id) == [], "an empty outbox fires nothing"

    documents = _write_orders(source, 6, "event")

    first = wait_until(
        lambda: _asset_runs(api, source.drain_dag_id) or None, timeout_s=180, what="an asset-triggered drain run"
    )[0]
    run = live_airflow.wait_for_run(api, source.drain_dag_id, str(first["dag_run_id"]), timeout_s=240)
    # Airflow 3.3.2's asset-event listing answers 500 while a run an event created is still queued (its
    # created_dagruns' start_date is None, which AssetEventResponse refuses): a watcher that fired again during the
    # drain leaves such a run for a moment, so the listing is asked again until it answers.
    events = wait_until(
        lambda: (
            (answer := api.get("/api/v2/assets/events", params={"name_pattern": "chatter_pending_event"})).status_code
            == 200
            and answer
        ),
        timeout_s=120,
        what="the asset events listing to answer 200",
    )
    fired = [e for e in events.json()["asset_events"] if e["extra"].get("from_trigger")]
    assert fired and fired[0]["extra"]["payload"]["source"] == "event", events.json()
    assert run["run_type"] == "asset_triggered"
    _assert_delivered(live_airflow, source, documents)

    # New work after the drain fires again (the checkpoint moved), and that run delivers it too.
    more = _write_orders(source, 3, "event-more")
    second = wait_until(
        lambda: [r for r in _asset_runs(api, source.drain_dag_id) if r["dag_run_id"] != first["dag_run_id"]] or None,
        timeout_s=180,
        what="a second asset-triggered drain run",
    )[0]
    live_airflow.wait_for_run(api, source.drain_dag_id, str(second["dag_run_id"]), timeout_s=240)
    wait_until(
        lambda: {source.monitored.read_item(d["id"], d["customerId"])["status"] for d in more} == {"delivered"},
        timeout_s=120,
        what="the second batch to be delivered",
    )
