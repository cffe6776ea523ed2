"""Does the relay yield to the business? A drain working off a backlog beside a steady Unit-of-Work writer.

    .venv/bin/python -m benchmarks.yield_to_business [--backlog 10000] [--writes-per-second 20] [--seconds 60]
                                                     [--drain-in process | thread | process,thread]

Real broker and the project emulator (request charges on, 2 ms added latency). One container is provisioned at
1.5 × the RU/s the writer needs (measured in this run: its Unit of Work's charge × its rate). The writer commits one
Unit of Work (an order and its Outbox Document, one transactional batch, no priority: high) every
1/--writes-per-second s, on schedule, retrying a 429 after its retry-after; its latency runs from the scheduled
moment to the commit. The drain (no cap, ``request_priority: low``, pages of 20, stamp_concurrency 8, leases in an
unthrottled container) works off a backlog of --backlog pending 1 KB documents on 1,000 partition keys, seeded
before. It runs in a process of its own, as an Airflow worker runs it apart from the business service
(``--drain-in process``, the default), or on a thread of the writer's process, sharing its GIL (``thread``); with
both, each gets its group of phases in the order given. Three phases of --seconds each per group, side by side in
this run:

    alone        the writer alone
    priority on  the writer and the drain, the emulator's priority_based_execution on
    priority off the writer and the same drain, priority_based_execution off (the header ignored)

Printed for each drain phase (targets for "priority on"):

    writer attempts per commit with the drain ÷ alone     target ≤ 1.1   (1 + 429s per commit)
    writer p99 latency with the drain ÷ alone            target ≤ 1.5
    drain served RU/s ÷ what the writer leaves            target ≥ 0.8   (provisioned − the writer's RU/s)

Each phase also prints the p99 of the writer's latency parts (queued behind its previous commit, woke late from its
sleep, the commit itself) and the CPU seconds of this process, the drain's process and the emulator's, with how
busy the machine was: what a p99 is made of.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, create_container
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports import BatchOperation, Document, OutgoingMessage, Throttled
from airflow_chatter.ports.request_charges import charged_to
from benchmarks import drain_throughput as base
from benchmarks.stamp_throughput import Emulator, bench_services, print_header
from devkit.services import CosmosEndpoint, emulator_stats

LATENCY_MS = 2
KEYS = 1000
PAGE = 20
HEADROOM = 1.5


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


@dataclass
class Writes:
    """What the writer did in one phase."""

    latencies: list[float] = field(default_factory=list)
    #: Each latency in three parts: waiting for the previous commit (past its own moment), the writer's thread
    #: waking late from its sleep (the OS and the GIL handing it the CPU), and the commit itself.
    queued: list[float] = field(default_factory=list)
    woke_late: list[float] = field(default_factory=list)
    commit_times: list[float] = field(default_factory=list)
    throttled: int = 0
    request_units: float = 0.0
    behind: int = 0  # commits that started after their scheduled moment had passed by more than one period

    @property
    def attempts_per_commit(self) -> float:
        return 1.0 + self.throttled / len(self.latencies)

    @property
    def p99(self) -> float:
        return p99(self.latencies)

    def line(self, seconds: float) -> str:
        return (
            f"{len(self.latencies)} commits, 429s {self.throttled}, p99 {ms(self.p99)} ms (p99 of its parts: queued "
            f"{ms(p99(self.queued))}, woke late {ms(p99(self.woke_late))}, commit {ms(p99(self.commit_times))} ms, "
            f"median commit {ms(statistics.median(self.commit_times))} ms), {self.request_units / seconds:.1f} RU/s, "
            f"behind schedule {self.behind}"
        )


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
        start = done = time.perf_counter()
        for k in range(int(seconds * per_second)):
            due = start + k * period
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)
            elif now - due > period:
                writes.behind += 1
            started = time.perf_counter()
            self.commit_one(writes)
            writes.queued.append(max(0.0, done - due))
            writes.woke_late.append(started - max(due, done))
            done = time.perf_counter()
            writes.latencies.append(done - due)
            writes.commit_times.append(done - started)
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


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far: this process's (the writer's, and the drain's when on a thread), the emulator's Node.js
    process's (``None`` when its pid file is not found), and the machine's busy and total time (/proc/stat)."""

    own: float
    emulator: float | None
    machine_busy: float
    machine_total: float

    @classmethod
    def now(cls, emulator_pid: int | None) -> CpuSample:
        tick = os.sysconf("SC_CLK_TCK")
        emulator = None
        if emulator_pid is not None:
            try:
                fields = Path(f"/proc/{emulator_pid}/stat").read_text().rsplit(")", 1)[1].split()
                emulator = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            except (OSError, IndexError, ValueError):
                emulator = None
        jiffies = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = jiffies[3] + jiffies[4]  # idle, iowait
        return cls(time.process_time(), emulator, (sum(jiffies) - idle) / tick, sum(jiffies) / tick)

    def since(self, before: CpuSample, drain: float | None) -> str:
        cores = (self.machine_total - before.machine_total) / (os.cpu_count() or 1)
        parts = [f"benchmark process {self.own - before.own:.1f}"]
        if drain is not None:
            parts.append(f"drain process {drain:.1f}")
        if self.emulator is not None and before.emulator is not None:
            parts.append(f"emulator {self.emulator - before.emulator:.1f}")
        busy = (self.machine_busy - before.machine_busy) / (self.machine_total - before.machine_total)
        return f"CPU s over {cores:.0f} s: " + ", ".join(parts) + f"; machine {busy:.0%} busy"


def emulator_pid(port: int) -> int | None:
    """The emulator's pid from its pid file (scripts/cosmos-emulator.sh), when this benchmark's state has one."""
    root = os.environ.get("CHATTER_STATE_DIR") or str(Path(__file__).resolve().parents[1] / ".cache" / "services")
    try:
        return int((Path(root) / f"cosmos-{port}" / "server.pid").read_text().strip())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class DrainOutcome:
    """One drain call's figures, the same from a thread or a process (a summary's error does not pickle)."""

    seconds: float
    request_units: float
    delivered: int
    throttled: int
    paced: float | None
    failed: list[dict[str, Any]]
    cpu_seconds: float  # of the drain's process (on a thread: the benchmark's, the writer's included)


def drain_outcome(engine: DrainEngine, seconds: float) -> DrainOutcome:
    started, cpu = time.perf_counter(), time.process_time()
    summaries = engine.drain_all(max_seconds=seconds)
    return DrainOutcome(
        cpu_seconds=time.process_time() - cpu,
        seconds=time.perf_counter() - started,
        request_units=sum(s.request_units for s in summaries),
        delivered=sum(s.delivered for s in summaries),
        throttled=sum(s.throttled for s in summaries),
        paced=summaries[-1].paced_request_units_per_second,
        failed=[s.to_dict() for s in summaries if s.error is not None],
    )


@dataclass(frozen=True)
class DrainSpec:
    """What a drain process needs to open the same drain the benchmark would: names, never clients."""

    endpoint: CosmosEndpoint
    database: str
    container: str
    leases: str
    bootstrap: str
    source: SourceOptions


def open_drain(spec: DrainSpec) -> tuple[DrainEngine, KafkaPublisher]:
    """The drain's own client (the SDK's 429 retries off, as the writer's) and publisher."""
    database = Emulator(spec.endpoint).new_client(sdk_throttle_retries=0).get_database_client(spec.database)
    publisher = KafkaPublisher(base.producer_settings(spec.bootstrap))
    engine = DrainEngine.open(
        spec.source,
        CosmosDocumentContainer(database.get_container_client(spec.container)),
        CosmosDocumentContainer(database.get_container_client(spec.leases)),
        publisher,
        owner="bench",
    )
    return engine, publisher


def drain_process(spec: DrainSpec, conn: Connection) -> None:
    """The drain in its own OS process, as an Airflow worker runs it beside the business service: one engine kept
    for both drain phases (its pace carries over, as on a thread), one ``drain_all`` per ``seconds`` received."""
    engine, publisher = open_drain(spec)
    try:
        conn.send("ready")
        while (seconds := conn.recv()) is not None:
            conn.send(drain_outcome(engine, seconds))
    finally:
        engine.close()
        publisher.close()


class Drainer:
    """Runs ``drain_all(max_seconds=...)`` off the writer's thread: on a thread of this process (``thread``, the
    GIL shared with the writer) or in a process of its own (``process``, as in production)."""

    def __init__(self, spec: DrainSpec, where: str) -> None:
        self.where = where
        self._engine: DrainEngine | None = None
        self._publisher: KafkaPublisher | None = None
        self._process: BaseProcess | None = None
        self._outcome: DrainOutcome | None = None
        self._thread: threading.Thread | None = None
        if where == "thread":
            self._engine, self._publisher = open_drain(spec)
        else:
            context = multiprocessing.get_context("spawn")
            self._conn, child = context.Pipe()
            self._process = context.Process(target=drain_process, args=(spec, child), name="bench-drain")
            self._process.start()
            child.close()
            if not self._conn.poll(120) or self._conn.recv() != "ready":
                raise RuntimeError("the drain process did not start within 120 s")

    def start(self, seconds: float) -> None:
        if self._engine is not None:
            engine = self._engine

            def drain() -> None:
                self._outcome = drain_outcome(engine, seconds)

            self._thread = threading.Thread(target=drain, name="bench-drain")
            self._thread.start()
        else:
            self._conn.send(seconds)

    def join(self) -> DrainOutcome:
        if self._thread is not None:
            self._thread.join()
            outcome = self._outcome
        else:
            outcome = self._conn.recv()
        assert outcome is not None
        return outcome

    def close(self) -> None:
        if self._engine is not None and self._publisher is not None:
            self._engine.close()
            self._publisher.close()
        if self._process is not None:
            self._conn.send(None)
            self._process.join(60)


@dataclass
class Phase:
    label: str
    writes: Writes
    drain: DrainOutcome
    server_throttled_low: int = 0
    server_throttled_high: int = 0
    cpu: str = ""


def with_drain(
    label: str,
    writer: Writer,
    drainer: Drainer,
    per_second: float,
    seconds: float,
    stats: Callable[[], dict[str, Any]],
    cpu: Callable[[], CpuSample],
) -> Phase:
    """The writer for ``seconds`` with the drain running beside it the whole time."""
    before, cpu_before = stats(), cpu()
    drainer.start(seconds)
    writes = writer.run(per_second, seconds)
    outcome = drainer.join()
    after = stats()
    used = cpu().since(cpu_before, outcome.cpu_seconds if drainer.where == "process" else None)
    assert not outcome.failed, outcome.failed
    return Phase(
        label,
        writes,
        outcome,
        server_throttled_low=after["throttled_low"] - before["throttled_low"],
        server_throttled_high=after["throttled_high"] - before["throttled_high"],
        cpu=used,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=10_000, help="pending documents seeded before the drain")
    parser.add_argument("--writes-per-second", type=float, default=20.0, help="the writer's Units of Work per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    parser.add_argument(
        "--drain-in",
        default="process",
        help="where the drain runs, one group of phases each, in this order: 'process' (its own, as an Airflow "
        "worker: the default), 'thread' (beside the writer, sharing its GIL), or 'process,thread'",
    )
    args = parser.parse_args()
    wheres = [w.strip() for w in args.drain_in.split(",")]
    if not wheres or any(w not in ("process", "thread") for w in wheres) or len(set(wheres)) != len(wheres):
        parser.error(f"--drain-in takes 'process', 'thread' or both, comma-separated; got {args.drain_in!r}")
    print_header()
    groups: list[tuple[str, Writes, list[Phase]]] = []
    with bench_services() as (bootstrap, emu):
        no_retries = emu.new_client(sdk_throttle_retries=0)
        proxy, _ = emu.container(no_retries)
        container = CosmosDocumentContainer(proxy)
        # Leases in the emulator, unthrottled, as in production: a later drain continues where the earlier one
        # stopped, in whichever process it runs.
        leases = create_container(emu.database, f"bench-leases-{uuid.uuid4().hex[:10]}", ("/id",))
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
            publisher.close()
            source = SourceOptions(
                f"yield-{uuid.uuid4().hex[:6]}", ("/tenantId",), max_batch_size=PAGE, stamp_concurrency=8
            )
            spec = DrainSpec(emu.endpoint, emu.database.id, proxy.id, leases.id, bootstrap, source)

            def stats() -> dict[str, Any]:
                return emulator_stats(emu.endpoint, proxy)

            pid = emulator_pid(urlsplit(emu.endpoint.url).port or 0)

            def cpu() -> CpuSample:
                return CpuSample.now(pid)

            for where in wheres:
                drainer = Drainer(spec, where)
                print(
                    f"drain {where}: "
                    + ("in its own process" if where == "process" else "on a thread beside the writer")
                )
                try:
                    # On before the writer runs alone: the emulator keeps for high-priority requests what they asked
                    # for in the last windows, so the switch must not reset that history when the drain starts.
                    emu.configure(priority_based_execution=True)
                    cpu_before = cpu()
                    alone = writer.run(args.writes_per_second, args.seconds)
                    print(f"{where}, alone: writer {alone.line(args.seconds)}")
                    print(f"  {cpu().since(cpu_before, None)}")
                    phases = []
                    for label, on in (("priority on", True), ("priority off", False)):
                        emu.configure(priority_based_execution=on)
                        phase = with_drain(label, writer, drainer, args.writes_per_second, args.seconds, stats, cpu)
                        phases.append(phase)
                        d = phase.drain
                        print(
                            f"{where}, {label}: writer {phase.writes.line(args.seconds)}; drain delivered "
                            f"{d.delivered}, {d.request_units / d.seconds:.1f} RU/s served, 429s {d.throttled}, "
                            f"paced to {d.paced} RU/s; emulator 429s low {phase.server_throttled_low} high "
                            f"{phase.server_throttled_high}"
                        )
                        print(f"  {phase.cpu}")
                    groups.append((where, alone, phases))
                finally:
                    drainer.close()
        finally:
            emu.configure(
                latency_ms=0,
                provisioned_ru_per_second=None,
                priority_based_execution=False,
                containers={proxy.container_link: None},
            )
            emu.drop(proxy)
            emu.drop(leases)
    print()
    heads = [f"{where} {state}" for where, _, _ in groups for state in ("on", "off")]
    print(f"{'ratio (drain in: priority on / off)':<52} " + " ".join(f"{h:>12}" for h in heads))
    rows: list[tuple[str, str, list[float]]] = [
        ("writer attempts per commit with the drain ÷ alone", "≤ 1.1", []),
        ("writer p99 latency with the drain ÷ alone", "≤ 1.5", []),
        ("drain served RU/s ÷ what the writer leaves", "≥ 0.8", []),
    ]
    for _, alone, phases in groups:
        for p in phases:
            left = provisioned - p.writes.request_units / args.seconds
            rows[0][2].append(p.writes.attempts_per_commit / alone.attempts_per_commit)
            rows[1][2].append(p.writes.p99 / alone.p99)
            rows[2][2].append((p.drain.request_units / p.drain.seconds) / left)
    for name, target, values in rows:
        print(f"{name:<50} = " + " ".join(f"{v:12.2f}" for v in values) + f"   (target {target}, priority on)")


if __name__ == "__main__":
    main()
