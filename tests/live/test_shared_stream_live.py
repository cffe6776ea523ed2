"""The shared streams on the live stack, across a triggerer crash: two ``on_pending`` sources on one container
(``orders`` and ``audit``, each admitting its own customers through ``pending_filter``) and a watched topic
(``chatter_consume_orders_on_arrival`` on ``orders``' topic). Documents are written before, while and after the
triggerer is SIGKILLed (``scripts/airflow-live.sh kill-triggerer``) and a new one takes its triggers over.

It shows: every write is published exactly once, by a drain run an asset event started (0 lost; only asset events
start these DAGs), and every write after the restart is announced by the new triggerer's watchers; every asset
event the watchers fired names documents that were written (0 phantom); the orders the drains published were received;
and with both sources watching, the emulator served about one change-feed read per poll interval for the container,
not one per source. Everything through REST and the emulator's /_chatter/stats; every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from azure.cosmos import exceptions

from airflow_chatter.examples.pending_filters import AUDIT_PREFIX, ORDERS_PREFIX
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.outbox.document import OutboxMessage
from devkit.live_airflow import DESTINATION, PK_PATH, LiveAirflow, _script
from tests.fixtures.cosmos import CosmosEndpoint, emulator_stats
from tests.fixtures.kafka import consume_records, topic_record_count
from tests.fixtures.live_airflow import running_stack, wait_until

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(1500)]

POLL_SECONDS = 2
WATCHER_DAG = "chatter_consume_orders_on_arrival"
GROUP = "chatter-example-consume-orders"
#: The idle window the change-feed reads are counted over (seconds; some 15 polls).
IDLE_WINDOW_S = 30.0


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[LiveAirflow]:
    if os.environ.get("CHATTER_SKIP_LIVE_AIRFLOW") == "1":
        pytest.skip("CHATTER_SKIP_LIVE_AIRFLOW=1: the live Airflow tests are skipped")
    shared = {"schedule": "on_pending", "on_pending_poll_seconds": POLL_SECONDS}
    settings = {
        "orders": {**shared, "pending_filter": "airflow_chatter.examples.pending_filters.orders_customers"},
        "audit": {
            **shared,
            "pending_filter": "airflow_chatter.examples.pending_filters.audit_customers",
            "monitored_container": "live-{run}-orders",
            "lease_container": "live-{run}-orders-leases",
            "lease_prefix": "audit-",
            # Two sources on one pair of containers declare their Source Identity (SRC-02), so each has a lease set.
            "monitored_source_identity": "live-audit",
            "lease_source_identity": "live-audit-leases",
        },
    }
    with running_stack(
        request, session_prefix="shared-stream-live-", source_names=("orders", "audit"), source_settings=settings
    ) as live:
        yield live


def _write(container: Any, prefix: str, count: int, tag: str, customers: dict[str, str]) -> list[str]:
    """Write ``count`` outbox documents for customers of ``prefix``; ``customers`` records each one's customer."""
    ids = []
    for n in range(count):
        customer = f"{prefix}-{tag}-{n % 2}"
        message_id = f"live-{tag}-{n}-{uuid.uuid4().hex[:8]}"
        body = json.dumps({"customer": customer, "order": n})
        message = OutboxMessage(message_id, DESTINATION, body, "application/json")
        container.create_item(message.to_document(PK_PATH, customer))
        customers[message_id] = customer
        ids.append(message_id)
    return ids


def _asset_events(api: httpx.Client, name: str) -> list[dict[str, Any]]:
    """The asset's events its watcher fired (Airflow 3.3.2 answers 500 while a run an event created is queued)."""
    answer = wait_until(
        lambda: (
            (r := api.get("/api/v2/assets/events", params={"name_pattern": name, "limit": 100})).status_code == 200
            and r
        ),
        timeout_s=120,
        what=f"the asset events of {name} to answer 200",
    )
    return [e for e in answer.json()["asset_events"] if e["extra"].get("from_trigger")]


def _received(container: Any, message_id: str, key: str) -> bool:
    try:
        container.read_item(marker_id(message_id, GROUP), partition_key=key)
    except exceptions.CosmosResourceNotFoundError:
        return False
    return True


def test_a_triggerer_crash_loses_no_write_fires_no_phantom_and_one_read_per_poll_serves_both_sources(
    stack: LiveAirflow, cosmos_endpoint: CosmosEndpoint
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("counts the emulator's change-feed reads (/_chatter/stats)")
    api = stack.client("admin")
    orders, audit = stack.sources["orders"], stack.sources["audit"]
    container = orders.monitored
    for dag_id in (orders.drain_dag_id, audit.drain_dag_id, WATCHER_DAG):
        stack.wait_for_dag(api, dag_id)
        stack.unpause(api, dag_id)

    written: dict[str, list[str]] = {"orders": [], "audit": []}
    customers: dict[str, str] = {}

    def write(tag: str, count: int) -> None:
        written["orders"] += _write(container, ORDERS_PREFIX, count, f"{tag}-o", customers)
        written["audit"] += _write(container, AUDIT_PREFIX, count, f"{tag}-a", customers)

    write("before", 3)
    wait_until(
        lambda: (_asset_events(api, "chatter_pending_orders") and _asset_events(api, "chatter_pending_audit")) or None,
        timeout_s=240,
        what="both sources' first asset events",
    )
    write("during", 3)
    crashed = stack.running_triggerer()
    killed = _script("kill-triggerer", stack.env, 120, stack.script)
    assert killed.returncode == 0, killed.stderr[-3000:]
    write("after-kill", 3)
    wait_until(
        lambda: (job := stack.running_triggerer()) is not None and job != crashed or None,
        timeout_s=180,
        what="a new triggerer",
    )

    def all_delivered() -> bool:
        ids = set(written["orders"] + written["audit"])
        # Outbox documents only: the receiver's Inbox Markers in the same container carry the message ids too.
        sql = "SELECT c.MessageId, c.status FROM c WHERE c._chatterType = 'outbox'"
        rows = container.query_items(sql, enable_cross_partition_query=True)
        statuses = {d.get("MessageId"): d.get("status") for d in rows}
        return all(statuses.get(i) == "delivered" for i in ids)

    def drains_idle() -> bool:
        for dag_id in (orders.drain_dag_id, audit.drain_dag_id):
            states = {r["state"] for r in api.get(f"/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"]}
            if states & {"running", "queued"}:
                return False
        return True

    # What was written around the crash is delivered, by the runs already started or by ones the restarted watchers
    # start (a document a running drain already delivered is not pending when the stream reads it again, so no
    # event names it: it was not lost, and announcing it would be a phantom).
    wait_until(
        lambda: all_delivered() and drains_idle(), timeout_s=600, what="the crash's writes delivered", interval_s=5
    )
    # The restarted triggerer's watchers alone start the runs for what comes now: every such write must be announced.
    restarted_from = {name: len(ids) for name, ids in written.items()}
    write("restarted", 3)
    wait_until(all_delivered, timeout_s=600, what="every write delivered", interval_s=5)

    for source in (orders, audit):
        mine = written[source.name]
        records = consume_records(stack.kafka_bootstrap, source.topic, len(mine), timeout_s=60)
        published = [dict(r.headers)["message-id"].decode() for r in records]
        assert sorted(published) == sorted(mine), f"{source.name}: every write reached its topic"
        assert topic_record_count(stack.kafka_bootstrap, source.topic) == len(mine), (
            f"{source.name}: each write was published exactly once (one drain run published it)"
        )
        events = _asset_events(api, f"chatter_pending_{source.name}")
        announced = {i for e in events for i in e["extra"]["payload"]["message_ids"]}
        every_write = set(written["orders"] + written["audit"])
        assert announced <= every_write, "0 phantom asset events: each names only documents that were written"
        assert all(e["extra"]["payload"]["pending"] > 0 for e in events), "no event without a pending document"
        first_three = mine[:3]
        after_restart = mine[restarted_from[source.name] :]
        assert set(first_three) <= announced, f"{source.name}: the first writes were announced"
        assert set(after_restart) <= announced, f"{source.name}: 0 lost: the restarted watcher announced every write"
        runs = api.get(f"/api/v2/dags/{source.drain_dag_id}/dagRuns").json()["dag_runs"]
        assert runs and {r["run_type"] for r in runs} == {"asset_triggered"}, "only asset events started drains"
        assert all(r["state"] in ("success", "running", "queued") for r in runs), runs
        print(f"{source.name}: {len(mine)} writes, {len(events)} watcher events, {len(runs)} drain runs")

    orders_received = wait_until(
        lambda: all(_received(container, i, customers[i]) for i in written["orders"]) or None,
        timeout_s=300,
        what="every orders message received by the watched topic's receiver",
        interval_s=5,
    )
    assert orders_received

    # Idle: both drains finished, nothing pending. Count the container's change-feed reads over a window.
    wait_until(drains_idle, timeout_s=300, what="the drains to finish")
    before, started = emulator_stats(cosmos_endpoint, container)["change_feed_reads"], time.monotonic()
    wait_until(
        lambda: time.monotonic() - started >= IDLE_WINDOW_S or None,
        timeout_s=IDLE_WINDOW_S + 10,
        what="the end of the counting window",
        interval_s=1,
    )
    reads = emulator_stats(cosmos_endpoint, container)["change_feed_reads"] - before
    elapsed = time.monotonic() - started
    polls = elapsed / POLL_SECONDS
    print(f"idle: {reads} change-feed reads of the container in {elapsed:.1f} s, {polls:.1f} poll intervals")
    assert reads <= polls + 3, (
        f"{reads} change-feed reads in {polls:.1f} intervals with two sources on the container: one per interval, "
        "not one per source"
    )
    assert reads >= polls / 2, "the stream kept polling"
