"""Two Celery workers ÷ one, draining the same documents over 4 leases, in one run. A script that prints ratios.

    .venv/bin/python benchmarks/celery_scaling.py [--per-source 800] [--latency-ms 10]

Starts ``scripts/celery-stack.sh`` (PostgreSQL, Redis, the Airflow components, two workers of one task slot each)
against the project broker and the Cosmos emulator serving 4 partition key ranges per container. Two sources of
``--per-source`` documents each (same customers, same sizes): source ``one`` is drained while worker2 is stopped,
source ``two`` with both workers up. Each drain DAG run lists 4 leases and maps 4 drains.

Printed: each run's drain span (first drain start → last drain end, from the task instances' REST dates), its
whole duration, and the ratios one-worker ÷ two-workers (target ≥ 1.6 on 2 cores). ``--latency-ms`` adds a real
account's round trip to every emulator request (docs/emulator.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
import uuid
from datetime import datetime
from typing import Any

from _live_services import REPO, services

from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.cosmos import emulator_configured
from tests.fixtures.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, stack_for

SCRIPT = REPO / "scripts" / "celery-stack.sh"
#: Budgets large enough that every drain reads its whole lease (the ratio compares complete drains).
SOURCES = {name: {"schedule": None, "max_documents": 5000, "max_seconds": 900} for name in ("one", "two")}


def write(source: LiveSource, count: int) -> None:
    for n in range(count):
        customer = f"cust-{n % 40}"
        message = OutboxMessage(
            f"scale-{source.name}-{n}-{uuid.uuid4().hex[:6]}",
            DESTINATION,
            json.dumps({"customer": customer, "order": n, "pad": "x" * 900}),
            "application/json",
        )
        source.monitored.create_item(message.to_document(PK_PATH, customer))


def when(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def drain(stack: LiveAirflow, api: Any, source: LiveSource, count: int) -> tuple[float, float, set[str]]:
    stack.unpause(api, source.drain_dag_id)
    response = api.post(f"/api/v2/dags/{source.drain_dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
    assert response.status_code == 200, response.text
    run = stack.wait_for_run(api, source.drain_dag_id, response.json()["dag_run_id"], timeout_s=900)
    path = f"/api/v2/dags/{source.drain_dag_id}/dagRuns/{run['dag_run_id']}/taskInstances"
    drains = [ti for ti in api.get(path).json()["task_instances"] if ti["task_id"] == "drain"]
    delivered = sum(
        source.monitored.query_items(
            "SELECT VALUE COUNT(1) FROM c WHERE c.status = 'delivered'", enable_cross_partition_query=True
        )
    )
    assert len(drains) == 4 and delivered == count, (len(drains), delivered)
    span = max(when(ti["end_date"]) for ti in drains) - min(when(ti["start_date"]) for ti in drains)
    whole = when(run["end_date"]) - when(run["start_date"])
    return span, whole, {str(ti["hostname"]).split("@")[0] for ti in drains}


def worker(stack: LiveAirflow, action: str) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), action, "2"], env=stack.env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=800)
    parser.add_argument("--latency-ms", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with (
        services() as (endpoint, database, bootstrap),
        stack_for(
            endpoint,
            database,
            bootstrap,
            script=SCRIPT,
            session_prefix="celery-bench-",
            source_names=tuple(SOURCES),
            source_settings=SOURCES,
            partition_ranges=4,
            extra_env={"AIRFLOW_LIVE_CELERY_WORKERS": "2", "AIRFLOW_LIVE_WORKER_CONCURRENCY": "1"},
        ) as stack,
    ):
        api = stack.client("admin")
        for source in stack.sources.values():
            write(source, args.per_source)
        with emulator_configured(endpoint, latency_ms=args.latency_ms):
            worker(stack, "stop-worker")
            one = drain(stack, api, stack.sources["one"], args.per_source)
            worker(stack, "start-worker")
            time.sleep(2)
            two = drain(stack, api, stack.sources["two"], args.per_source)
    print(f"documents per run: {args.per_source} over 4 leases; emulator latency {args.latency_ms} ms per request")
    print(f"1 worker : drains span {one[0]:6.1f} s, run {one[1]:6.1f} s, workers {sorted(one[2])}")
    print(f"2 workers: drains span {two[0]:6.1f} s, run {two[1]:6.1f} s, workers {sorted(two[2])}")
    print(f"drain span 1 worker ÷ 2 workers: {one[0] / two[0]:.2f}  (target ≥ 1.6)")
    print(f"whole run  1 worker ÷ 2 workers: {one[1] / two[1]:.2f}")


if __name__ == "__main__":
    main()
