"""Two Celery workers ÷ one, draining the same documents over 4 leases, with an account's round trip and without, in
one run. A script that prints ratios.

    .venv/bin/python -m benchmarks.celery_scaling [--per-source 2000] [--customers 40] [--latency-ms 10]

Starts ``scripts/celery-stack.sh`` (PostgreSQL, Redis, the Airflow components, two workers of one task slot each)
against the project broker and the Cosmos emulator serving 4 partition key ranges per container. Four sources of
``--per-source`` documents each (same customers, same sizes): ``one_rtt`` and ``one_flat`` are drained while
worker2 is stopped, ``two_flat`` and ``two_rtt`` with both workers up; the ``_rtt`` ones with ``--latency-ms``
added to every emulator request (a real account's in-region round trip: the emulator's latency is a timer, so
concurrent requests wait it out side by side, docs/emulator.md), the ``_flat`` ones with none. Each drain DAG run
lists 4 leases and maps 4 drains.

Printed, per latency: each run's drain span (first drain start → last drain end, from the task instances' REST
dates), its whole duration, the mean drain task duration, and the ratios one-worker ÷ two-workers (target ≥ 1.6 on
2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_chatter.outbox.document import OutboxMessage
from devkit.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, stack_for
from devkit.services import CHECKOUT, emulator_configured, services

SCRIPT = CHECKOUT / "scripts" / "celery-stack.sh"
#: Budgets large enough that every drain reads its whole lease (the ratio compares complete drains).
NAMES = ("one_rtt", "one_flat", "two_flat", "two_rtt")
SOURCES = {name: {"schedule": None, "max_documents": 50000, "max_seconds": 900} for name in NAMES}


@dataclass(frozen=True)
class Measured:
    span: float
    whole: float
    mean_drain: float
    workers: frozenset[str]


def write(source: LiveSource, count: int, customers: int) -> None:
    for n in range(count):
        customer = f"cust-{n % customers}"
        message = OutboxMessage(
            f"scale-{source.name}-{n}-{uuid.uuid4().hex[:6]}",
            DESTINATION,
            json.dumps({"customer": customer, "order": n, "pad": "x" * 900}),
            "application/json",
        )
        source.monitored.create_item(message.to_document(PK_PATH, customer))


def when(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def drain(stack: LiveAirflow, api: Any, source: LiveSource, count: int) -> Measured:
    stack.unpause(api, source.drain_dag_id)
    response = api.post(f"/api/v2/dags/{source.drain_dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
    assert response.status_code == 200, response.text
    run = stack.wait_for_run(api, source.drain_dag_id, response.json()["dag_run_id"], timeout_s=1800)
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
    mean = sum(when(ti["end_date"]) - when(ti["start_date"]) for ti in drains) / len(drains)
    return Measured(span, whole, mean, frozenset(str(ti["hostname"]).split("@")[0] for ti in drains))


def stack_script(stack: LiveAirflow, *args: str) -> None:
    """``scripts/celery-stack.sh <args>`` in the stack's environment (e.g. ``stop-worker 2``)."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env=stack.env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def worker(stack: LiveAirflow, action: str, n: int = 2) -> None:
    stack_script(stack, action, str(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=2000, help="documents per run (default 2000)")
    parser.add_argument("--customers", type=int, default=40, help="partition key values (default 40)")
    parser.add_argument("--latency-ms", type=int, default=10, help="the account-like round trip (default 10)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    load_before = os.getloadavg()
    with (
        services("airflow-chatter-bench") as (endpoint, database, bootstrap),
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
            write(source, args.per_source, args.customers)
        measured: dict[str, Measured] = {}

        def timed(name: str, latency_ms: int) -> None:
            with emulator_configured(endpoint, latency_ms=latency_ms):
                measured[name] = drain(stack, api, stack.sources[name], args.per_source)

        # One worker, then two; within each, the two latencies in mirrored order (rtt, flat | flat, rtt), so a
        # drift of the machine's load over the run weighs on both latencies alike.
        worker(stack, "stop-worker")
        timed("one_rtt", args.latency_ms)
        timed("one_flat", 0)
        worker(stack, "start-worker")  # returns once worker2 has said "ready"
        timed("two_flat", 0)
        timed("two_rtt", args.latency_ms)
    load_after = os.getloadavg()
    print(
        f"documents per run: {args.per_source} over 4 leases, {args.customers} partition key values; "
        f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(f"{'':34}{'no added latency':>22}{f'{args.latency_ms} ms per request':>22}")
    rows = (("one_flat", "one_rtt", "1 worker "), ("two_flat", "two_rtt", "2 workers"))
    for flat, rtt, label in rows:
        f, r = measured[flat], measured[rtt]
        print(f"{label} drains span (s)              {f.span:>22.1f}{r.span:>22.1f}")
        print(f"{label} whole run (s)                {f.whole:>22.1f}{r.whole:>22.1f}")
        print(f"{label} mean drain task (s)          {f.mean_drain:>22.1f}{r.mean_drain:>22.1f}")
        names = ",".join(sorted(f.workers)), ",".join(sorted(r.workers))
        print(f"{label} workers                      {names[0]:>22}{names[1]:>22}")
    ratio = {key: measured[f"one_{key}"].span / measured[f"two_{key}"].span for key in ("flat", "rtt")}
    whole = {key: measured[f"one_{key}"].whole / measured[f"two_{key}"].whole for key in ("flat", "rtt")}
    print(f"drain span 1 worker ÷ 2 workers         {ratio['flat']:>22.2f}{ratio['rtt']:>22.2f}  (target ≥ 1.6)")
    print(f"whole run  1 worker ÷ 2 workers         {whole['flat']:>22.2f}{whole['rtt']:>22.2f}")
    for name in ("two_flat", "two_rtt"):
        if measured[name].workers != {"worker1", "worker2"}:
            print(f"WARNING: {name} ran on {sorted(measured[name].workers)} only: not a two-worker figure")


if __name__ == "__main__":
    main()
