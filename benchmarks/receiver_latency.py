"""Publish → effect latency of the example receivers on the live loopback deployment: started by messages (an
``AssetWatcher`` on the topic) beside a receiver run every minute, in the same run, on the same topic.

    .venv/bin/python -m benchmarks.receiver_latency [--messages 20] [--interval 7]

Starts ``scripts/airflow-live.sh`` (api-server, scheduler, dag-processor, triggerer; LocalExecutor, SQLite) with one
source, ``orders``, so ``dags/example_chatter_consume_orders.py`` defines both its DAGs for it, against the project
broker and the Cosmos emulator. ``chatter_consume_orders_on_arrival`` (group ``chatter-example-consume-orders``,
watcher poll 2 s) is unpaused; ``chatter_consume_orders`` is triggered at every wall-clock minute with another group,
as a ``* * * * *`` cron would create its runs. Then ``--messages`` times, ``--interval`` seconds apart: publish one
``OrderPlaced`` event to the topic. A delivery's effect is its receipt and its Inbox Marker, committed in one
transactional batch; the marker is per receiver, so each receiver's effect time is when its marker is readable.

Printed: per receiver the median, min and max of publish → effect, and the runs each DAG made; then, for the
watcher, where the seconds go, from the times Airflow records (``stages``): publish → the watcher's first asset
event after it (``timestamp``) → the run that event made (``queued_at``) → the run started (``start_date``) → the
receive task queued (``queued_when``) → the task started (``start_date``) → the effect seen. A message that a run
already running received before its own event's run started has no stages of its own and is left out of them.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
from azure.cosmos import exceptions

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.inbox.markers import marker_id
from devkit.live_airflow import order_placed, stack_for, wait_until
from devkit.services import machine, services

WATCHER_DAG = "chatter_consume_orders_on_arrival"
WATCHER_GROUP = "chatter-example-consume-orders"
CRON_DAG = "chatter_consume_orders"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--interval", type=float, default=7)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    cron_group = f"bench-cron-{uuid.uuid4().hex[:6]}"
    groups = {"watcher": WATCHER_GROUP, "cron": cron_group}
    with (
        services("airflow-chatter-bench") as (endpoint, database, bootstrap),
        stack_for(
            endpoint,
            database,
            bootstrap,
            session_prefix="receiver-bench-",
            source_names=("orders",),
            source_settings={},
        ) as stack,
    ):
        api = stack.client("admin")
        source = stack.sources["orders"]
        settings = KafkaSettings(bootstrap_servers=bootstrap, api_version=(2, 8))
        ensure_topics(settings, [source.topic], partitions=3)
        for dag_id in (WATCHER_DAG, CRON_DAG):
            stack.wait_for_dag(api, dag_id)
            stack.unpause(api, dag_id)
        stack.wait_for_topic_watcher(api, source.topic)  # measured from when it watches, not from the unpause
        published: dict[str, tuple[float, str]] = {}  # message id → (when, partition key)
        effects: dict[tuple[str, str], float] = {}  # (receiver, message id) → publish → effect, seconds
        published_at: dict[str, datetime] = {}  # message id → when, wall clock (Airflow's times are wall clock)
        next_publish = time.monotonic()
        last_minute = datetime.now(UTC).replace(second=0, microsecond=0)
        deadline = time.monotonic() + args.messages * args.interval + 240
        with KafkaPublisher(settings) as publisher:
            while len(effects) < 2 * args.messages and time.monotonic() < deadline:
                now = time.monotonic()
                if len(published) < args.messages and now >= next_publish:
                    event, message_id, key = order_placed(source.topic, len(published), "bench")
                    [outcome] = publisher.send_batch([event])
                    assert outcome.confirmation is not None, outcome.error
                    published[message_id] = (time.monotonic(), key)
                    published_at[message_id] = datetime.now(UTC)
                    next_publish += args.interval
                minute = datetime.now(UTC).replace(second=0, microsecond=0)
                if minute > last_minute:  # what a "* * * * *" schedule does at each minute
                    last_minute = minute
                    response = api.post(
                        f"/api/v2/dags/{CRON_DAG}/dagRuns",
                        json={"logical_date": None, "conf": {"group_id": cron_group}},
                    )
                    assert response.status_code == 200, response.text
                for message_id, (at, key) in published.items():
                    for receiver, group in groups.items():
                        if (receiver, message_id) in effects:
                            continue
                        try:
                            source.monitored.read_item(marker_id(message_id, group), partition_key=key)
                        except exceptions.CosmosResourceNotFoundError:
                            continue
                        effects[receiver, message_id] = time.monotonic() - at
                        print(f"{receiver:7s} {message_id}: {effects[receiver, message_id]:5.1f} s", flush=True)
                time.sleep(0.2)

        def runs(dag_id: str) -> list[dict[str, object]]:
            return list(api.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100}).json()["dag_runs"])

        wait_until(
            lambda: all(r["state"] in ("success", "failed") for d in (WATCHER_DAG, CRON_DAG) for r in runs(d)),
            timeout_s=180,
            what="the receiver runs to finish",
        )
        print(f"{args.messages} messages, {args.interval:g} s apart")
        for receiver, dag_id in (("watcher", WATCHER_DAG), ("cron", CRON_DAG)):
            got = [s for (r, _), s in effects.items() if r == receiver]
            made = runs(dag_id)
            states = sorted({str(r["state"]) for r in made})
            if not got:
                print(f"{receiver}: no effect seen; {len(made)} runs {states}")
                continue
            print(
                f"{receiver} ({dag_id}): publish → effect median {statistics.median(got):.1f} s, "
                f"min {min(got):.1f} s, max {max(got):.1f} s over {len(got)} messages; {len(made)} runs {states}"
            )
        effect_at = {m: published_at[m] + timedelta(seconds=s) for (r, m), s in effects.items() if r == "watcher"}
        print_stages(stages(api, source.topic, published_at, effect_at))


STAGES = (
    "publish → asset event",
    "asset event → run queued",
    "run queued → run started",
    "run started → task queued",
    "task queued → task started",
    "task started → effect",
)


def _at(value: object) -> datetime:
    return datetime.fromisoformat(str(value))


def stages(
    api: httpx.Client, topic: str, published_at: dict[str, datetime], effect_at: dict[str, datetime]
) -> list[dict[str, float]]:
    """Per message the watcher's receiver ran for, the seconds of each of ``STAGES``, from Airflow's records."""
    [asset] = [
        a
        for a in api.get("/api/v2/assets", params={"uri_pattern": topic}).json()["assets"]
        if a["uri"].endswith(f"/{topic}")
    ]
    events = api.get("/api/v2/assets/events", params={"asset_id": asset["id"], "limit": 100}).json()["asset_events"]
    fired = sorted((e for e in events if (e["extra"] or {}).get("from_trigger")), key=lambda e: _at(e["timestamp"]))
    runs = {
        r["dag_run_id"]: r
        for r in api.get(f"/api/v2/dags/{WATCHER_DAG}/dagRuns", params={"limit": 100}).json()["dag_runs"]
    }
    measured = []
    for message, at in published_at.items():
        done = effect_at.get(message)
        # The watcher's first event after the publish, and the run it made (several events may make one run).
        event = next((e for e in fired if _at(e["timestamp"]) >= at), None)
        if done is None or event is None or not event["created_dagruns"]:
            continue
        run = runs[event["created_dagruns"][0]["run_id"]]
        path = f"/api/v2/dags/{WATCHER_DAG}/dagRuns/{run['dag_run_id']}/taskInstances"
        [task] = api.get(path).json()["task_instances"]
        if task["start_date"] is None or _at(task["start_date"]) > done:
            continue  # a run already running received it before its own event's run started
        points = [
            at,
            _at(event["timestamp"]),
            _at(run["queued_at"]),
            _at(run["start_date"]),
            _at(task["queued_when"]),
            _at(task["start_date"]),
            done,
        ]
        spans = zip(STAGES, points[:-1], points[1:], strict=True)
        measured.append({name: (b - a).total_seconds() for name, a, b in spans})
    return measured


def print_stages(measured: list[dict[str, float]]) -> None:
    if not measured:
        print("watcher stages: no message started a run of its own")
        return
    print(f"watcher stages over {len(measured)} messages that started a run of their own (median / min / max, s):")
    for name in STAGES:
        values = [m[name] for m in measured]
        print(f"  {name:28s} {statistics.median(values):5.1f} {min(values):5.1f} {max(values):5.1f}")
    totals = [sum(m.values()) for m in measured]
    print(f"  {'publish → effect':28s} {statistics.median(totals):5.1f} {min(totals):5.1f} {max(totals):5.1f}")


if __name__ == "__main__":
    main()
