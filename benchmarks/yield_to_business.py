"""Does the relay yield to the business? A drain working off a backlog beside a steady Unit-of-Work writer.

    .venv/bin/python -m benchmarks.yield_to_business [--backlog 10000] [--writes-per-second 20] [--seconds 60]

Real broker and the project emulator (request charges on, 2 ms added latency). One container is provisioned at
1.5 × the RU/s the writer needs (measured in this run: its Unit of Work's charge × its rate). The writer commits one
Unit of Work (an order and its Outbox Document, one transactional batch, no priority: high) every
1/--writes-per-second s, on schedule, retrying a 429 after its retry-after; its latency runs from the scheduled
moment to the commit. The drain (no cap, ``request_priority: low``, pages of 20, stamp_concurrency 8) works off a
backlog of --backlog pending 1 KB documents on 1,000 partition keys, seeded before. Three phases of --seconds each,
side by side in this run:

    alone        the writer alone
    priority on  the writer and the drain, the emulator's priority_based_execution on
    priority off the writer and the same drain, priority_based_execution off (the header ignored)

Printed for each drain phase (targets for "priority on"):

    writer attempts per commit with the drain ÷ alone     target ≤ 1.1   (1 + 429s per commit)
    writer p99 latency with the drain ÷ alone            target ≤ 1.5
    drain served RU/s ÷ what the writer leaves            target ≥ 0.8   (provisioned − the writer's RU/s)
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports import BatchOperation, Document, OutgoingMessage, Throttled
from airflow_chatter.ports.request_charges import charged_to
from benchmarks import drain_throughput as base
from benchmarks.stamp_throughput import bench_services, print_header
from devkit.services import emulator_stats

LATENCY_MS = 2
KEYS = 1000
PAGE = 20
HEADROOM = 1.5


@dataclass
class Writes:
    """What the writer did in one phase."""

    latencies: list[float] = field(default_factory=list)
    throttled: int = 0
    request_units: float = 0.0
    behind: int = 0  # commits that started after their scheduled moment had passed by more than one period

    @property
    def attempts_per_commit(self) -> float:
        return 1.0 + self.throttled / len(self.latencies)

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.latencies, n=100)[98]


class Writer:
    """One Unit of Work per period, on schedule, on its own client with the SDK's 429 retries off."""

    def __init__(self, container: CosmosDocumentContainer, topic: str) -> None:
        self.container = container
        self.topic = topic
        self.sequence = 0

    def commit_one(self, writes: Writes) -> None:
        self.sequence += 1
        n = self.sequence
        tenant = f"shop-{n % 50}"
        message = OutboxMessage(f"order-{uuid.uuid4().hex}", self.topic, f'{{"order": {n}}}', "application/json", {})

        def add(charge: float) -> None:
            writes.request_units += charge

        while True:
            try:
                with charged_to(add), UnitOfWork(self.container, "/tenantId", tenant) as unit:
                    unit.create({"id": f"order-{n}-{uuid.uuid4().hex[:6]}", "tenantId": tenant, "total": n})
                    unit.add_message(message)
                return
            except Throttled as throttled:
                writes.throttled += 1
                time.sleep((throttled.retry_after_ms or 100) / 1000.0)

    def run(self, per_second: float, seconds: float, stop: threading.Event | None = None) -> Writes:
        writes = Writes()
        period = 1.0 / per_second
        start = time.perf_counter()
        for k in range(int(seconds * per_second)):
            due = start + k * period
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)
            elif now - due > period:
                writes.behind += 1
            self.commit_one(writes)
            writes.latencies.append(time.perf_counter() - due)
        if stop is not None:
            stop.set()
        return writes


def seed(container: CosmosDocumentContainer, n: int, topic: str) -> None:
    """N pending 1 KB documents on KEYS partition keys, batched per key, concurrently."""
    groups: dict[str, list[Document]] = {}
    for i in range(n):
        doc = base.outbox_document(i, topic)
        doc["tenantId"] = f"backlog-{i % KEYS}"
        groups.setdefault(doc["tenantId"], []).append(doc)

    def create(docs: list[Document]) -> None:
        for start in range(0, len(docs), 100):
            chunk = docs[start : start + 100]
            container.execute_batch(chunk[0]["tenantId"], [BatchOperation.create(d) for d in chunk])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, groups.values()))


@dataclass
class Phase:
    label: str
    writes: Writes
    drain_request_units: float = 0.0
    drain_seconds: float = 0.0
    drain_delivered: int = 0
    drain_throttled: int = 0
    drain_paced: float | None = None
    server_throttled_low: int = 0
    server_throttled_high: int = 0


def with_drain(
    label: str,
    writer: Writer,
    engine: DrainEngine,
    per_second: float,
    seconds: float,
    stats: Callable[[], dict[str, Any]],
) -> Phase:
    """The writer for ``seconds`` with the drain running beside it the whole time."""
    before = stats()
    outcome: dict[str, Any] = {}

    def drain() -> None:
        started = time.perf_counter()
        summaries = engine.drain_all(max_seconds=seconds)
        outcome["seconds"] = time.perf_counter() - started
        outcome["summaries"] = summaries

    thread = threading.Thread(target=drain, name="bench-drain")
    thread.start()
    writes = writer.run(per_second, seconds)
    thread.join()
    after = stats()
    summaries = outcome["summaries"]
    failed = [s.to_dict() for s in summaries if s.error is not None]
    assert not failed, failed
    return Phase(
        label,
        writes,
        drain_request_units=sum(s.request_units for s in summaries),
        drain_seconds=outcome["seconds"],
        drain_delivered=sum(s.delivered for s in summaries),
        drain_throttled=sum(s.throttled for s in summaries),
        drain_paced=summaries[-1].paced_request_units_per_second,
        server_throttled_low=after["throttled_low"] - before["throttled_low"],
        server_throttled_high=after["throttled_high"] - before["throttled_high"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=10_000, help="pending documents seeded before the drain")
    parser.add_argument("--writes-per-second", type=float, default=20.0, help="the writer's Units of Work per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    args = parser.parse_args()
    print_header()
    with bench_services() as (bootstrap, emu):
        no_retries = emu.new_client(sdk_throttle_retries=0)
        proxy, _ = emu.container(no_retries)
        container = CosmosDocumentContainer(proxy)
        try:
            topic = base.new_topic(bootstrap, "yield")
            seed(container, args.backlog, topic)
            emu.configure(latency_ms=LATENCY_MS)
            # The writer's own client: the drain's 8 stamp lanes and read-ahead would otherwise share its pool.
            own = emu.new_client(sdk_throttle_retries=0).get_database_client(emu.database.id)
            writer = Writer(CosmosDocumentContainer(own.get_container_client(proxy.id)), topic)
            probe = Writes()
            for _ in range(20):
                writer.commit_one(probe)
            need = probe.request_units / 20 * args.writes_per_second
            provisioned = round(HEADROOM * need, 1)
            print(
                f"writer: {args.writes_per_second:g} Units of Work/s at {probe.request_units / 20:.2f} RU each = "
                f"{need:.1f} RU/s; container provisioned at {provisioned} RU/s; backlog {args.backlog:,} documents"
            )
            link = proxy.container_link
            emu.configure(containers={link: {"provisioned_ru_per_second": provisioned}})
            publisher = KafkaPublisher(base.producer_settings(bootstrap))
            assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
            leases = base.lease_container()
            source = SourceOptions(
                f"yield-{uuid.uuid4().hex[:6]}", ("/tenantId",), max_batch_size=PAGE, stamp_concurrency=8
            )
            engine = DrainEngine.open(source, container, leases, publisher, owner="bench")

            def stats() -> dict[str, Any]:
                return emulator_stats(emu.endpoint, proxy)

            try:
                # On before the writer runs alone: the emulator keeps for high-priority requests what they asked for
                # in the last windows, so the switch must not reset that history when the drain starts.
                emu.configure(priority_based_execution=True)
                alone = writer.run(args.writes_per_second, args.seconds)
                print(
                    f"alone: {len(alone.latencies)} commits, 429s {alone.throttled}, p99 {alone.p99 * 1000:.0f} ms, "
                    f"{alone.request_units / args.seconds:.1f} RU/s, behind schedule {alone.behind}"
                )
                phases = []
                for label, on in (("priority on", True), ("priority off", False)):
                    if not on:
                        emu.configure(priority_based_execution=False)
                    phase = with_drain(label, writer, engine, args.writes_per_second, args.seconds, stats)
                    phases.append(phase)
                    w = phase.writes
                    print(
                        f"{label}: writer {len(w.latencies)} commits, 429s {w.throttled}, "
                        f"p99 {w.p99 * 1000:.0f} ms, {w.request_units / args.seconds:.1f} RU/s, behind schedule "
                        f"{w.behind}; drain delivered {phase.drain_delivered}, "
                        f"{phase.drain_request_units / phase.drain_seconds:.1f} RU/s served, 429s "
                        f"{phase.drain_throttled}, paced to {phase.drain_paced} RU/s; emulator 429s low "
                        f"{phase.server_throttled_low} high {phase.server_throttled_high}"
                    )
            finally:
                engine.close()
                publisher.close()
        finally:
            emu.configure(
                latency_ms=0,
                provisioned_ru_per_second=None,
                priority_based_execution=False,
                containers={proxy.container_link: None},
            )
            emu.drop(proxy)
    print()
    print(f"{'ratio':<60}   {'priority on':>11} {'priority off':>12}")
    figures = [
        (
            "writer attempts per commit with the drain ÷ alone",
            "≤ 1.1",
            [p.writes.attempts_per_commit / alone.attempts_per_commit for p in phases],
        ),
        ("writer p99 latency with the drain ÷ alone", "≤ 1.5", [p.writes.p99 / alone.p99 for p in phases]),
    ]
    leaves = [provisioned - p.writes.request_units / args.seconds for p in phases]
    figures.append(
        (
            "drain served RU/s ÷ what the writer leaves",
            "≥ 0.8",
            [(p.drain_request_units / p.drain_seconds) / left for p, left in zip(phases, leaves, strict=True)],
        )
    )
    for name, target, (on, off) in figures:
        print(f"{name:<60} = {on:11.2f} {off:12.2f}   (target {target}, priority on)")


if __name__ == "__main__":
    main()
