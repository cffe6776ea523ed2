"""Write → Kafka latency of a following drain, ``schedule: on_pending`` and a one-minute cron side by side on the live
loopback Airflow, and what each costs idle. One run.

    .venv/bin/python -m benchmarks.mode_latency [--writes 200] [--rate 2] [--idle-seconds 120] [--quick]

Starts ``scripts/airflow-live.sh`` (api-server, scheduler, dag-processor, triggerer; LocalExecutor, SQLite) against
the project broker and the Cosmos emulator (request charges on), with three sources, each with its own monitored
and lease containers and its own topic:

* ``follow``: ``follow: true``, ``follow_poll_seconds`` 0.25, ``schedule: "@continuous"`` (docs/airflow.md,
  "Following a source"), ``max_seconds`` 3600: one run follows for the whole benchmark (no hand-over measured);
* ``pending``: ``schedule: on_pending``, ``on_pending_poll_seconds`` ``--poll-seconds`` (default 1);
* ``cron``: ``schedule: "* * * * *"``.

After one warm-up write per source (each mode's first run, not measured), two passes: (a) no added latency, (b)
``--added-latency-ms`` (default 5) added to every emulator request (the Airflow components' too: an account-like
round trip). In each pass a writer thread per source creates ``--writes`` pending documents at ``--rate`` per second,
the three concurrently, and a consumer per topic notes when each record arrives. A latency is from just before the
create call to the record's arrival at the consumer. Printed per pass and mode: p50 / p99 / max, the writes that
arrived, and the drain DAG runs that overlapped the pass (at the default 200 writes at 2/s, 100 s of writes and the
cron mode's last run after them: about three cron runs per pass).

Then, with nothing written for ``--idle-seconds``: each source's emulator request charges (monitored plus lease
container, from ``/_chatter/stats``) scaled to an hour: RU per idle hour of one following lease, of the on_pending
watcher's polls and of one cron run a minute. An extrapolation from a short window. The in-process figures without
Airflow are ``benchmarks/follow_latency.py``'s.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from kafka import KafkaConsumer

from airflow_chatter.adapters.kafka.admin import ensure_topics
from benchmarks.celery_scaling import when
from benchmarks.drain_throughput import producer_settings
from benchmarks.event_latency import write_pending
from benchmarks.follow_latency import POLL_SECONDS, quantile
from devkit.live_airflow import LiveAirflow, LiveSource, stack_for, wait_until
from devkit.services import CosmosEndpoint, emulator_configured, emulator_stats, machine, services

#: Mode → (label, the source's settings beyond the live defaults). ``--poll-seconds`` fills in ``pending``'s.
MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "follow": (
        f"follow (@continuous, poll {POLL_SECONDS:g} s)",
        {
            "schedule": "@continuous",
            "follow": True,
            "follow_poll_seconds": POLL_SECONDS,
            "max_seconds": 3600,
            "max_documents": 1_000_000,
        },
    ),
    "pending": ("on_pending (poll {poll:g} s)", {"schedule": "on_pending"}),
    "cron": ("cron (* * * * *)", {"schedule": "* * * * *"}),
}
#: How long the last write of a pass may take to reach Kafka (a cron run, on a loaded machine).
TAIL_TIMEOUT_S = 300


@dataclass
class Arrivals:
    """A consumer of one topic on its own thread, noting when each ``message-id`` first arrived."""

    bootstrap: str
    topic: str
    at: dict[str, float] = field(default_factory=dict)
    duplicates: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        consumer = KafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )

        def run() -> None:
            try:
                while not self._stop.is_set():
                    batches = consumer.poll(timeout_ms=100)
                    now = time.time()
                    for records in batches.values():
                        for record in records:
                            message_id = dict(record.headers).get("message-id", b"").decode()
                            if message_id in self.at:
                                self.duplicates += 1
                            else:
                                self.at[message_id] = now
            finally:
                consumer.close()

        self._thread = threading.Thread(target=run, name=f"consume-{self.topic}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


@dataclass
class Writer:
    """A writer thread: ``count`` pending documents into ``source`` at ``rate`` per second, noting each write time."""

    source: LiveSource
    tag: str
    count: int
    rate: float
    at: dict[str, float] = field(default_factory=dict)
    error: BaseException | None = None

    def run(self, start: float) -> None:
        try:
            for n in range(self.count):
                time.sleep(max(0.0, start + n / self.rate - time.monotonic()))
                message_id = f"{self.tag}-{n}-{uuid.uuid4().hex[:6]}"
                self.at[message_id] = time.time()
                write_pending(self.source, message_id, n)
        except BaseException as error:  # noqa: BLE001 - reported by the pass, after the other writers end
            self.error = error


def runs_during(api: httpx.Client, dag_id: str, start: float, end: float) -> int:
    """Runs of ``dag_id`` that were running at some time in [start, end] (wall clock)."""
    response = api.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100, "order_by": "-start_date"})
    assert response.status_code == 200, response.text
    return sum(
        1
        for run in response.json()["dag_runs"]
        if run["start_date"]
        and when(run["start_date"]) <= end
        and (not run["end_date"] or when(run["end_date"]) >= start)
    )


def warm_up(stack: LiveAirflow, arrivals: dict[str, Arrivals]) -> None:
    """One write per source, until each is in Kafka: the follower is on its lease, the watcher polls, cron ran."""
    ids = {}
    for name, source in stack.sources.items():
        ids[name] = f"warm-{name}-{uuid.uuid4().hex[:6]}"
        write_pending(source, ids[name], 0)
    wait_until(
        lambda: all(ids[name] in arrivals[name].at for name in ids),
        timeout_s=TAIL_TIMEOUT_S + 120,
        what="the warm-up write of each source in Kafka",
        interval_s=0.5,
    )


def measure_pass(
    stack: LiveAirflow, api: httpx.Client, arrivals: dict[str, Arrivals], label: str, writes: int, rate: float
) -> dict[str, tuple[list[float], int, int]]:
    """Write to every source at once; per mode: (latencies of the writes that arrived, writes lost, runs)."""
    writers = {name: Writer(source, f"{label}-{name}", writes, rate) for name, source in stack.sources.items()}
    started_wall = time.time()
    start = time.monotonic() + 0.5
    threads = [threading.Thread(target=w.run, args=(start,), name=f"write-{n}") for n, w in writers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, writer in writers.items():
        if writer.error is not None:
            raise RuntimeError(f"the {name} writer failed after {len(writer.at)} writes") from writer.error
    deadline = time.monotonic() + TAIL_TIMEOUT_S
    while time.monotonic() < deadline and any(
        m not in arrivals[name].at for name, writer in writers.items() for m in writer.at
    ):
        time.sleep(0.5)
    ended_wall = time.time()
    result = {}
    for name, writer in writers.items():
        got = arrivals[name].at
        latencies = [got[m] - t for m, t in writer.at.items() if m in got]
        runs = runs_during(api, stack.sources[name].drain_dag_id, started_wall, ended_wall)
        result[name] = (latencies, len(writer.at) - len(latencies), runs)
    return result


def container_charges(endpoint: CosmosEndpoint, source: LiveSource) -> tuple[int, float]:
    """(requests, RU) the emulator counted so far on the source's monitored and lease containers."""
    stats = [emulator_stats(endpoint, proxy) for proxy in (source.monitored, source.leases)]
    return sum(s["requests"] for s in stats), sum(s["request_charge"] for s in stats)


def print_pass(
    tag: str, latency_ms: int, measured: dict[str, tuple[list[float], int, int]], labels: dict[str, str]
) -> int:
    """Print one pass's rows; the writes lost."""
    print(f"({tag}) {latency_ms} ms added per emulator request")
    for name, (latencies, lost, runs) in measured.items():
        figures = (
            f"{quantile(latencies, 0.5):7.2f}s {quantile(latencies, 0.99):7.2f}s {max(latencies):7.2f}s"
            if len(latencies) >= 2
            else f"{'–':>8} {'–':>8} {'–':>8}"
        )
        target = "   target p50 ≤ 0.5 s, p99 ≤ 2 s" if name == "follow" else ""
        print(f"    {labels[name]:36} {len(latencies):>5}/{len(latencies) + lost:<3} {runs:>5} {figures}{target}")
    return sum(lost for _, lost, _ in measured.values())


def measure_idle(endpoint: CosmosEndpoint, stack: LiveAirflow, seconds: float, labels: dict[str, str]) -> None:
    """Print each source's emulator charges over ``seconds`` with nothing written, scaled to an hour."""
    before = {name: container_charges(endpoint, s) for name, s in stack.sources.items()}
    time.sleep(seconds)
    after = {name: container_charges(endpoint, s) for name, s in stack.sources.items()}
    per_hour = 3600 / seconds
    print(
        f"idle {seconds:g} s, nothing written: emulator charges on each source's monitored + lease containers, "
        f"extrapolated ×{per_hour:g} to an hour"
    )
    for name in stack.sources:
        requests = after[name][0] - before[name][0]
        charge = after[name][1] - before[name][1]
        print(
            f"    {labels[name]:36} requests={requests:<6} RU={charge:<9.1f} "
            f"RU per idle hour ≈ {charge * per_hour:,.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=200, help="writes per source and pass")
    parser.add_argument("--rate", type=float, default=2.0, help="writes per second, per source")
    parser.add_argument("--idle-seconds", type=float, default=120.0, help="idle window for the RU per idle hour")
    parser.add_argument("--poll-seconds", type=float, default=1.0, help="on_pending_poll_seconds of the pending source")
    parser.add_argument("--added-latency-ms", type=int, default=5, help="emulator latency of pass (b)")
    parser.add_argument("--quick", action="store_true", help="20 writes per source and pass, 30 s idle (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.writes, args.idle_seconds = 20, 30.0
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"machine: {machine()}")
    print(f"command: {' '.join(['.venv/bin/python -m benchmarks.mode_latency', *sys.argv[1:]])}")
    labels = {name: label.format(poll=args.poll_seconds) for name, (label, _) in MODES.items()}
    settings = {name: dict(extra) for name, (_, extra) in MODES.items()}
    settings["pending"]["on_pending_poll_seconds"] = args.poll_seconds
    lost = 0
    with (
        services("airflow-chatter-bench") as (endpoint, database, bootstrap),
        emulator_configured(endpoint, request_charges=True, latency_ms=0, provisioned_ru_per_second=None),
        stack_for(
            endpoint,
            database,
            bootstrap,
            session_prefix="mode-bench-",
            source_names=tuple(MODES),
            source_settings=settings,
        ) as stack,
    ):
        ensure_topics(producer_settings(bootstrap), [s.topic for s in stack.sources.values()], partitions=3)
        arrivals = {name: Arrivals(bootstrap, source.topic) for name, source in stack.sources.items()}
        for consumer in arrivals.values():
            consumer.start()
        try:
            api = stack.client("admin")
            for source in stack.sources.values():
                stack.unpause(api, source.drain_dag_id)
            warm_up(stack, arrivals)
            print(f"{args.writes} writes per source at {args.rate:g}/s, the three sources at once")
            print(f"{'':40} {'arrived':>9} {'runs':>5} {'p50':>8} {'p99':>8} {'max':>8}")
            for tag, latency_ms in (("a", 0), ("b", args.added_latency_ms)):
                with emulator_configured(endpoint, latency_ms=latency_ms):
                    measured = measure_pass(stack, api, arrivals, tag, args.writes, args.rate)
                lost += print_pass(tag, latency_ms, measured, labels)
            print(f"records that arrived twice (at-least-once): { {n: a.duplicates for n, a in arrivals.items()} }")
            measure_idle(endpoint, stack, args.idle_seconds, labels)
        finally:
            for consumer in arrivals.values():
                consumer.stop()
    if lost:
        raise SystemExit(f"{lost} writes did not reach Kafka within {TAIL_TIMEOUT_S} s of their pass")


if __name__ == "__main__":
    main()
