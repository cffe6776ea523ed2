"""OpenLineage START and COMPLETE for every drain, backfill and receive task of a live run of many tasks, and the
connection reads of each task. A bounded script (the suite's short version: tests/live/test_openlineage_live.py).

    .venv/bin/python -m benchmarks.openlineage_live [--drain-runs 4] [--backfill-runs 4] [--receive-runs 12]
        [--documents 100] [--load-procs 0] [--timeout 3600]

Starts ``scripts/airflow-live.sh`` (LocalExecutor, parallelism 4) with the OpenLineage provider's file transport,
against the project broker and the Cosmos emulator serving 4 partition key ranges per container, for three sources:
``lina`` and ``linb`` (drained and backfilled: 4 leases, so 4 mapped drains per run) and ``orders`` (received by
``chatter_consume_orders``, dags/example_chatter_consume_orders.py). The connections are stored in the metadata DB,
as in a deployment, so every read reaches the api-server (``devkit.live_tasks``). It writes ``--documents`` outbox
documents per drained source and as many ``OrderPlaced`` messages to the orders topic, triggers every run at once
(each DAG runs one at a time), waits for all of them, and prints per task id: instances, tries, START / COMPLETE /
FAIL events, and min/mean/max reads per instance of each connection (target: 1 each for the connections a task
uses). ``--load-procs`` adds busy-looping processes for the whole run; the 1-minute load average is sampled every
10 s and printed. It exits 1 when a drain, backfill or receive task lacks its START or COMPLETE.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.outbox.document import OutboxMessage
from devkit.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, order_placed, stack_for, wait_until
from devkit.live_tasks import connection_reads, lineage_events, store_connections, tally, task_instances
from devkit.services import services

COSMOS_CONN, KAFKA_CONN = "chatter_cosmos_stored", "chatter_kafka_stored"
DRAINED = ("lina", "linb")
SETTINGS = {
    name: {"schedule": None, "cosmos_conn_id": COSMOS_CONN, "kafka_conn_id": KAFKA_CONN}
    for name in (*DRAINED, "orders")
}
RECEIVE_DAG = "chatter_consume_orders"
#: The tasks the requirement names, and the connections each reads.
CHECKED = {"drain": (COSMOS_CONN, KAFKA_CONN), "backfill_drain": (COSMOS_CONN, KAFKA_CONN)}
CHECKED["receive"] = (COSMOS_CONN, KAFKA_CONN)


def _busy() -> None:
    while True:
        pass


@contextmanager
def load(processes: int) -> Iterator[list[float]]:
    """``processes`` busy loops, and the 1-minute load average sampled every 10 s meanwhile."""
    workers = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(processes)]
    for worker in workers:
        worker.start()
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10):
            samples.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        done.set()
        for worker in workers:
            worker.terminate()
            worker.join(10)


def write(source: LiveSource, count: int) -> None:
    for n in range(count):
        customer = f"cust-{n % 8}"
        message = OutboxMessage(
            f"lineage-{source.name}-{n}-{uuid.uuid4().hex[:6]}",
            DESTINATION,
            json.dumps({"customer": customer, "order": n}),
            "application/json",
        )
        source.monitored.create_item(message.to_document(PK_PATH, customer))


def trigger(api: Any, dag_id: str, conf: dict[str, Any]) -> tuple[str, str]:
    response = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 200, f"{dag_id}: {response.status_code} {response.text}"
    return dag_id, str(response.json()["dag_run_id"])


def run(args: argparse.Namespace, stack: LiveAirflow, events_path: Path) -> int:
    api = stack.client("admin")
    store_connections(stack, api, COSMOS_CONN, KAFKA_CONN)
    for name in DRAINED:
        write(stack.sources[name], args.documents)
    orders = stack.sources["orders"]
    settings = KafkaSettings(bootstrap_servers=stack.kafka_bootstrap, api_version=(2, 8))
    ensure_topics(settings, [orders.topic], partitions=3)
    with KafkaPublisher(settings) as publisher:
        outcomes = publisher.send_batch([order_placed(orders.topic, n, "lineage")[0] for n in range(args.documents)])
    assert all(o.confirmation is not None for o in outcomes), "the orders topic has its messages"

    dags = [stack.sources[name].drain_dag_id for name in DRAINED] + ["chatter_backfill", RECEIVE_DAG]
    for dag_id in dags:
        stack.unpause(api, dag_id)
    runs = [trigger(api, stack.sources[name].drain_dag_id, {}) for _ in range(args.drain_runs) for name in DRAINED]
    backfill = {"start": "beginning", "dry_run": False, "document_budget": 1000}
    runs += [
        trigger(api, "chatter_backfill", {"source": DRAINED[n % 2], **backfill}) for n in range(args.backfill_runs)
    ]
    limits = {"max_messages": max(1, args.documents // max(1, args.receive_runs)), "max_seconds": 20}
    runs += [trigger(api, RECEIVE_DAG, limits) for _ in range(args.receive_runs)]
    started = time.monotonic()

    def finished() -> list[dict[str, Any]] | None:
        states = [api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json() for dag_id, run_id in runs]
        return states if all(s.get("state") in ("success", "failed") for s in states) else None

    states = wait_until(finished, timeout_s=args.timeout, what=f"{len(runs)} runs to finish", interval_s=10)
    elapsed = time.monotonic() - started
    instances = [ti for dag_id, run_id in runs for ti in task_instances(api, dag_id, run_id)]
    # The listener writes COMPLETE after the task's state: give the last ones a moment to land.
    wanted = [ti for ti in instances if ti["task_id"] in CHECKED]

    def all_written() -> list[dict[str, Any]] | None:
        found = tally(wanted, lineage_events(events_path), {}, ()).values()
        return lineage_events(events_path) if all(t.events["COMPLETE"] >= t.instances for t in found) else None

    try:
        events = wait_until(all_written, timeout_s=60, what="every COMPLETE event", interval_s=5)
    except AssertionError:
        events = lineage_events(events_path)
    reads = connection_reads((stack.home / "process-logs" / "api-server.log").read_text())
    tallies = tally(instances, events, reads, (COSMOS_CONN, KAFKA_CONN))

    failed = [f"{s['dag_id']}/{s['dag_run_id']}" for s in states if s["state"] != "success"]
    print(f"runs: {len(runs)} ({len(failed)} failed{': ' + ', '.join(failed) if failed else ''}), {elapsed:.0f} s")
    print(f"task instances: {len(instances)}, of them drain/backfill/receive: {len(wanted)}")
    print("per task id (reads per instance, min/mean/max):")
    for task_id in sorted(tallies):
        print("  " + tallies[task_id].line((COSMOS_CONN, KAFKA_CONN)))
    print(f"reads no task instance was named for: {dict(reads.get('unattributed', {}))}")
    missing = [
        t.task_id
        for t in tallies.values()
        if t.task_id in CHECKED and min(t.events["START"], t.events["COMPLETE"]) < t.instances
    ]
    if missing:
        print(f"MISSING START or COMPLETE for: {', '.join(missing)}")
    return 1 if missing or failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drain-runs", type=int, default=4, help="drain runs per drained source (default 4)")
    parser.add_argument("--backfill-runs", type=int, default=4, help="backfill runs (default 4)")
    parser.add_argument("--receive-runs", type=int, default=12, help="receive runs (default 12)")
    parser.add_argument("--documents", type=int, default=100, help="documents per source and messages (default 100)")
    parser.add_argument("--load-procs", type=int, default=0, help="busy-looping processes meanwhile (default 0)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the runs (default 3600)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    events_path = Path(tempfile.mkdtemp(prefix="lineage-load-")) / "events.jsonl"
    print(f"events: {events_path}")
    with services("airflow-chatter-bench") as (endpoint, database, bootstrap), load(args.load_procs) as samples:
        transport = {"type": "file", "log_file_path": str(events_path), "append": True}
        with stack_for(
            endpoint,
            database,
            bootstrap,
            session_prefix="lineage-load-",
            source_names=(*DRAINED, "orders"),
            source_settings=SETTINGS,
            partition_ranges=4,
            extra_env={
                "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
                "AIRFLOW__OPENLINEAGE__NAMESPACE": "chatter-load",
            },
        ) as stack:
            code = run(args, stack, events_path)
    shown = (
        f"min {min(samples):.1f}, mean {sum(samples) / len(samples):.1f}, max {max(samples):.1f}" if samples else "-"
    )
    print(f"load: {args.load_procs} busy loops added; 1-minute load average over the run: {shown}")
    raise SystemExit(code)


if __name__ == "__main__":
    main()
