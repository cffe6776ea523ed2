"""Write → Kafka latency of an event-driven drain (``schedule: on_pending``) on the live loopback deployment.

    .venv/bin/python -m benchmarks.event_latency [--writes 20] [--poll-seconds 1]

Starts ``scripts/airflow-live.sh`` (api-server, scheduler, dag-processor, triggerer; LocalExecutor, SQLite) with
one source scheduled on its pending asset, against the project broker and the Cosmos emulator. Then, ``--writes``
times: write one pending outbox document, and time until its record is in Kafka (a consumer polls the topic), then
wait for the drain run to finish before the next write. Everything between is Airflow's: the watcher's poll in the
triggerer, the asset event, the scheduler creating the run, the list-leases task and the drain task starting.

Printed: median, min, max and every latency (target: median ≤ 10 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid

from kafka import KafkaConsumer

from airflow_chatter.outbox.document import OutboxMessage
from devkit.live_airflow import DESTINATION, PK_PATH, LiveSource, stack_for, wait_until
from devkit.services import services


def write_pending(source: LiveSource, message_id: str, n: int) -> None:
    """Create one pending outbox document (a small JSON body, one of 7 customers) in ``source``'s container."""
    message = OutboxMessage(message_id, DESTINATION, json.dumps({"n": n}), "application/json")
    source.monitored.create_item(message.to_document(PK_PATH, f"cust-{n % 7}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--poll-seconds", type=float, default=1)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    settings = {"event": {"schedule": "on_pending", "on_pending_poll_seconds": args.poll_seconds}}
    latencies: list[float] = []
    with (
        services("airflow-chatter-bench") as (endpoint, database, bootstrap),
        stack_for(
            endpoint,
            database,
            bootstrap,
            session_prefix="event-bench-",
            source_names=("event",),
            source_settings=settings,
        ) as stack,
    ):
        api = stack.client("admin")
        source = stack.sources["event"]
        stack.unpause(api, source.drain_dag_id)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=200)
        consumer.subscribe([source.topic])
        try:
            for n in range(args.writes):
                message_id = f"latency-{n}-{uuid.uuid4().hex[:6]}"
                started = time.monotonic()
                write_pending(source, message_id, n)

                def arrived(message_id: str = message_id) -> bool:
                    for record in consumer:
                        if dict(record.headers).get("message-id", b"").decode() == message_id:
                            return True
                    return False

                wait_until(arrived, timeout_s=180, what=f"write {n} in Kafka", interval_s=0.05)
                latencies.append(time.monotonic() - started)
                print(f"write {n:2d}: {latencies[-1]:5.1f} s", flush=True)

                def idle() -> bool:
                    runs = api.get(f"/api/v2/dags/{source.drain_dag_id}/dagRuns").json()["dag_runs"]
                    return all(r["state"] in ("success", "failed") for r in runs)

                wait_until(idle, timeout_s=180, what="the drain run to finish", interval_s=0.5)
        finally:
            consumer.close()
    print(f"poll interval {args.poll_seconds:g} s; {len(latencies)} writes")
    print(
        f"write → Kafka latency: median {statistics.median(latencies):.1f} s (target ≤ 10 s), "
        f"min {min(latencies):.1f} s, max {max(latencies):.1f} s"
    )


if __name__ == "__main__":
    main()
