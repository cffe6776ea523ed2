"""The drain DAGs on the CeleryExecutor: PostgreSQL metadata DB, Redis broker, two Celery workers
(``scripts/celery-stack.sh``), against the real Kafka broker and the Cosmos emulator serving 4 partition key ranges
per monitored container, so a source has 4 leases and its run maps 4 drains.

Each worker runs one task at a time (``AIRFLOW_LIVE_WORKER_CONCURRENCY=1``), so 4 drains need both. Every task
instance records ``<worker>@<host>`` as its hostname (``airflow_chatter.airflow.utils.hostname``), which REST shows.
``CHATTER_SKIP_CELERY=1`` skips the module. Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.cosmos import CosmosEndpoint, emulator_admin, emulator_hold
from tests.fixtures.kafka import consume_records
from tests.fixtures.live_airflow import (
    DESTINATION,
    PK_PATH,
    REPO,
    LiveAirflow,
    LiveSource,
    running_stack,
    wait_until,
)

SKIP_ENV = "CHATTER_SKIP_CELERY"
CELERY_SCRIPT = REPO / "scripts" / "celery-stack.sh"
#: A drain page: the bound on what a killed drain can publish twice.
PAGE = 10
SOURCES: dict[str, dict[str, Any]] = {
    "spread": {"schedule": "* * * * *"},
    # Short leases and small pages: a killed worker's lease expires quickly, and a page bounds the duplicates.
    # No schedule: the test triggers the one run, so the killed drain's lease is taken over by that run's retry on
    # the other worker, not raced by a scheduled run starting while range 0 is held.
    "kill": {"schedule": None, "max_batch_size": PAGE, "lease_duration_seconds": 20, "max_seconds": 240},
}

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def celery_airflow(request: pytest.FixtureRequest) -> Iterator[LiveAirflow]:
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the CeleryExecutor tests are skipped")
    with running_stack(
        request,
        script=CELERY_SCRIPT,
        session_prefix="celery-test-",
        source_names=tuple(SOURCES),
        source_settings=SOURCES,
        partition_ranges=4,
        extra_env={
            "AIRFLOW_LIVE_CELERY_WORKERS": "2",
            "AIRFLOW_LIVE_WORKER_CONCURRENCY": "1",
            # A SIGKILLed worker's task instance is failed (and retried elsewhere) after 30 s, not 5 minutes.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        },
    ) as stack:
        yield stack


@pytest.fixture(scope="module")
def api(celery_airflow: LiveAirflow) -> httpx.Client:
    return celery_airflow.client("admin")


def write_orders(source: LiveSource, count: int, tag: str) -> list[dict[str, Any]]:
    """``count`` orders over 40 customers, so every one of the 4 ranges gets some."""
    written = []
    for n in range(count):
        customer = f"cust-{tag}-{n % 40}"
        message = OutboxMessage(
            message_id=f"celery-{tag}-{n}-{uuid.uuid4().hex[:8]}",
            destination=DESTINATION,
            body=json.dumps({"customer": customer, "order": n}),
            content_type="application/json",
        )
        written.append(source.monitored.create_item(message.to_document(PK_PATH, customer)))
    return written


def drain_instances(api: httpx.Client, run: dict[str, Any]) -> list[dict[str, Any]]:
    path = f"/api/v2/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}/taskInstances"
    return [ti for ti in api.get(path).json()["task_instances"] if ti["task_id"] == "drain"]


def worker_of(ti: dict[str, Any]) -> str:
    return str(ti["hostname"]).split("@", 1)[0]


def delivered(source: LiveSource) -> int:
    return sum(
        source.monitored.query_items(
            "SELECT VALUE COUNT(1) FROM c WHERE c.status = 'delivered'", enable_cross_partition_query=True
        )
    )


def kill_worker(leader: int) -> list[int]:
    """SIGKILL a worker as a lost machine or container would die: its process group, and every descendant. (The
    task supervisor starts each task in a process group of its own, so killing the worker's group alone would
    leave the drain running.)"""
    import psutil

    processes = [psutil.Process(leader), *psutil.Process(leader).children(recursive=True)]
    for process in processes:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    try:
        os.killpg(leader, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return [p.pid for p in processes]


def published_counts(live: LiveAirflow, source: LiveSource, at_least: int) -> Counter[str]:
    records = consume_records(live.kafka_bootstrap, source.topic, at_least, timeout_s=90)
    return Counter(dict(r.headers)["message-id"].decode() for r in records)


def test_a_scheduled_drain_of_four_leases_runs_its_mapped_drains_on_both_celery_workers(
    celery_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = celery_airflow.sources["spread"]
    documents = write_orders(source, 200, "spread")

    celery_airflow.unpause(api, source.drain_dag_id)
    run = celery_airflow.wait_for_run(api, source.drain_dag_id, timeout_s=300)

    assert run["run_type"] == "scheduled"
    drains = drain_instances(api, run)
    assert len(drains) == 4, "4 partition key ranges: 4 leases, 4 mapped drains"
    assert {worker_of(ti) for ti in drains} == {"worker1", "worker2"}, [ti["hostname"] for ti in drains]
    assert sum(celery_airflow.xcom(api, run, "drain", i)["published"] for i in range(4)) == 200
    events = api.get(
        "/api/v2/assets/events", params={"source_dag_id": run["dag_id"], "source_run_id": run["dag_run_id"]}
    ).json()["asset_events"]
    # Four drains on two workers reach a topic no run has delivered to before: emitted by each drain, its asset
    # was created twice at once and Postgres failed one drain's task. One task after the drains emits them.
    assert [e["source_task_id"] for e in events] == ["topic_events"] * len(events), events
    # The topic's kafka:// asset (the Kafka provider's scheme) and, for one release, its deprecated chatter:// one.
    schemes: dict[str, int] = {}
    for event in events:
        scheme = event["uri"].split("://", 1)[0]
        schemes[scheme] = schemes.get(scheme, 0) + event["extra"]["published"]
    assert schemes == {"kafka": 200, "chatter": 200}, events
    assert len({e["uri"] for e in events}) == len(events), "one event per topic for the run"
    counts = published_counts(celery_airflow, source, len(documents))
    assert set(counts) == {d["MessageId"] for d in documents}, "every outbox message reached its topic"
    assert delivered(source) == 200


def range_customers(
    endpoint: CosmosEndpoint, source: LiveSource, documents: list[dict[str, Any]], rid: str
) -> set[str]:
    """The customers of ``documents`` whose partition key lies in partition key range ``rid`` (the emulator's own
    EPK routing, ``/_chatter/epk``)."""
    customers = sorted({d["customerId"] for d in documents})
    answers = emulator_admin(
        endpoint, "POST", "epk", body={"container": source.monitored.container_link, "pks": customers}
    )
    return {c for c, a in zip(customers, answers, strict=True) if a["range_id"] == rid}


def first_range_lease(source: LiveSource) -> dict[str, Any] | None:
    """The lease document of the feed range that starts at the beginning of the EPK space (range "0")."""
    for doc in source.leases.query_items("SELECT * FROM c", enable_cross_partition_query=True):
        token = doc.get("feed_range")
        if isinstance(token, str) and json.loads(token).get("Range", {}).get("min") == "":
            return dict(doc)
    return None


def owned_live(lease: dict[str, Any] | None) -> dict[str, Any] | None:
    if not lease or not lease.get("owner") or not lease.get("expires_at"):
        return None
    expires = datetime.fromisoformat(str(lease["expires_at"]).replace("Z", "+00:00"))
    return lease if expires > datetime.now(UTC) else None


def wait_for_records(
    live: LiveAirflow, topic: str, enough: Callable[[list[Any]], bool], *, timeout_s: float, what: str
) -> list[Any]:
    """Read ``topic`` from the beginning with one consumer until ``enough(records so far)``; bounded."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=live.kafka_bootstrap,
        group_id=f"chatter-kill-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while not enough(records):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}; {len(records)} records read")
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
    finally:
        consumer.close()
    return records


def message_id(record: Any) -> str:
    return str(dict(record.headers)["message-id"].decode())


def test_a_worker_sigkilled_mid_drain_loses_nothing_and_duplicates_at_most_one_page(
    celery_airflow: LiveAirflow, api: httpx.Client, cosmos_endpoint: CosmosEndpoint
) -> None:
    """The drain of range 0 is stopped at a known point: its first page is published (in Kafka) and its delivered
    stamps are parked by the emulator (a hold on range 0's batches and patches), so it holds its lease with a
    page published and not stamped. Its worker is SIGKILLed there; the parked stamps die with it. The lease
    expires, the run's retry of that drain on the other worker takes it over and publishes the page again."""
    source = celery_airflow.sources["kill"]
    documents = write_orders(source, 600, "kill")
    customer_of = {d["MessageId"]: d["customerId"] for d in documents}
    held = range_customers(cosmos_endpoint, source, documents, "0")
    assert held, "range 0 holds some of the customers"

    with emulator_hold(cosmos_endpoint, source.monitored, ["batch", "patch"], range_id="0") as hold:
        celery_airflow.unpause(api, source.drain_dag_id)
        response = api.post(f"/api/v2/dags/{source.drain_dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
        assert response.status_code == 200, response.text
        run = response.json()

        wait_until(lambda: hold.state()["waiting"] > 0, timeout_s=300, what="range 0's first stamps to be parked")
        lease = wait_until(lambda: owned_live(first_range_lease(source)), timeout_s=30, what="range 0's lease owned")
        index = int(str(lease["owner"]).split("[", 1)[1].split("]", 1)[0])

        def victim_running() -> dict[str, Any] | None:
            [ti] = [ti for ti in drain_instances(api, run) if ti["map_index"] == index]
            return ti if ti["state"] == "running" and ti["hostname"] else None

        victim = wait_until(victim_running, timeout_s=60, what=f"drain [{index}] to show running", interval_s=0.5)
        assert victim["rendered_map_index"] == lease["id"], "the lease's owner is that task instance"
        first_page = wait_for_records(
            celery_airflow,
            source.topic,
            lambda records: any(customer_of[message_id(r)] in held for r in records),
            timeout_s=60,
            what="range 0's first page in Kafka",
        )
        assert owned_live(first_range_lease(source)), "still held by the victim when it is killed"
        worker = worker_of(victim)
        pid_file = celery_airflow.home / "pids" / f"{worker}.pid"
        before = delivered(source)
        killed = kill_worker(int(pid_file.read_text().split()[0]))
        assert killed, f"{worker} had processes to kill"
        assert before < len(documents), "the worker was killed before the source was drained"

        wait_until(lambda: hold.state()["waiting"] == 0, timeout_s=60, what="the parked stamps' client to be gone")
        released = hold.release()
    assert released["served"] == 0 and released["dropped"] >= 1, released

    survivor = {"worker1": "worker2", "worker2": "worker1"}[worker]
    wait_until(lambda: delivered(source) == len(documents) or None, timeout_s=600, what="all documents delivered")

    def retried() -> dict[str, Any] | None:
        [ti] = [ti for ti in drain_instances(api, run) if ti["map_index"] == index]
        return ti if ti["state"] == "success" else None

    # The scheduler fails the silent try (heartbeat timeout) and retries it; the lease has expired by then.
    taken_over = wait_until(retried, timeout_s=300, what=f"the killed drain [{index}] to be retried")
    assert taken_over["try_number"] > victim["try_number"] and worker_of(taken_over) == survivor, taken_over
    assert celery_airflow.xcom(api, run, "drain", index)["published"] > 0, (
        "the surviving worker's try took over range 0's lease with its work left"
    )
    counts = published_counts(celery_airflow, source, len(documents))
    assert set(counts) == {d["MessageId"] for d in documents}, "nothing lost"
    duplicated = {m: n - 1 for m, n in counts.items() if n > 1}
    assert {customer_of[m] for m in duplicated} <= held, "only range 0's drain was killed: only its page repeats"
    assert 1 <= sum(duplicated.values()) <= PAGE, (
        f"{sum(duplicated.values())} duplicates: the one page the killed drain had published and not stamped "
        f"(range 0 records before the kill: {sum(customer_of[message_id(r)] in held for r in first_page)})"
    )
