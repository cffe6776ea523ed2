"""A soak: steady writes through the Unit of Work, a scheduled and a following drain on the CeleryExecutor stack,
the inbox receiver writing one effect per message, and faults that follow the writers' progress, for ``--minutes``.

    .venv/bin/python -m tests.reliability.soak [--minutes 30] [--rate 5] [--customers 200] [--no-follow]

What runs: ``scripts/celery-stack.sh`` (PostgreSQL, Redis, api-server, scheduler, dag-processor, triggerer, two Celery
workers sharing a slot per drain of each source and one for its other tasks: six a worker, three with ``--no-follow``)
with two sources of 4 leases each (the emulator gives each container 4 partition key ranges): ``soak`` drained every
minute, and ``follow`` followed (``follow: true``, ``@continuous``, runs of a minute), the writers alternating between
them. A SIGKILLed worker's task is failed after 30 s without a heartbeat (Airflow's default being 300 s). Against the
Cosmos emulator with its account-like switches on (``latency_ms`` 5, request charges, priority-based execution (the
drains' requests go at low priority, the writers' at high), each monitored container
provisioned for its drains' bursts, each drain task capped at what the writers leave of it divided by the drains that
run at once: ``max_request_units_per_second``) and a Kafka broker of the soak's own (``KAFKA_PORT + 2``, so its outage
touches nothing else). In this process: writers commit one order and its outbox message per Unit of Work at ``--rate`` a
second over ``--customers`` partition keys (``--writers`` threads sharing one schedule), each recorded in a ledger with
its commit time; receivers (``--receivers`` consumers of one group) consume both topics through the document-tier inbox
(``IdempotentReceiver``) and write one effect document per message; every 30 s a sampler records the lease documents and
the inbox markers (each container's document count, as a container read with quota info answers it: no query that scans
the container), the effects applied, held-but-expired leases, how far the writers are behind their schedule, and the RSS
and CPU time of every long-lived process.

Faults, scaled to ``--minutes`` (T): a Celery worker's process groups SIGKILLed every ``min(3 min, T/3)``, the
workers taking turns, and started again; the broker stopped once for ``min(60 s, T/6)``; two 429 bursts (each
container's RU/s cut to a tenth for 15 s); a split of one partition key range per container; a scheduler restart.
The plan is in the writers' progress, not the clock: a fault planned at minute m starts once the writers have
attempted m minutes' worth of Units of Work, the fault before it has ended and the writers are on their schedule, so
a loaded machine that stretches a fault delays the ones after it instead of dropping them. The writers run until
they have attempted T's worth and every planned fault has run, bounded by ``BOUND`` times T's worth (the report
names the faults that did not run when the bound is hit). Then the writers stop, and the drains and the receiver
catch up: every write applied and every lease released or taken over (bounded: until ``settle_s`` worth of samples
apply nothing more). One table is printed:

    writes | lost (ledger vs Kafka) | lost (ledger vs effects) | duplicates on Kafka | effects applied twice |
    429s at the monitored containers by priority (the drains' low, the writers' high) |
    p50/p99 write -> Kafka per drain mode and window | leases stuck | RSS start/end, slope per hour and CPU per
    process | lease, marker and effect documents and the backlogs per window | duplicates attributed to the fault
    that caused them (tests/reliability/soak_report.py)

Exits 1 when anything was lost, an effect applied twice, a lease stuck or a planned fault not run.
``tests/reliability/test_soak.py`` runs a short one.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, create_container
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import received_message
from airflow_chatter.inbox.receiver import Delivery, DeliveryOutcome, IdempotentReceiver
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from benchmarks.celery_scaling import SCRIPT, stack_script, worker
from devkit.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, stack_for
from devkit.services import (
    CHECKOUT,
    PROJECT_KAFKA_PORT,
    CosmosEndpoint,
    KafkaBroker,
    configure_emulator,
    cosmos_service,
    emulator_admin,
    emulator_configured,
    kafka_state_dir,
    machine,
)
from tests.reliability.soak_report import (
    Attribution,
    CountRow,
    FaultWindow,
    RssRow,
    Sample,
    attribute_duplicates,
    count_rows,
    fault_kind,
    rss_rows,
)

DATABASE = "airflow-chatter-soak"
SOURCE = "soak"
#: The following source (``--no-follow`` leaves it out): the writers alternate between the two sources.
FOLLOW = "follow"
SETTINGS: dict[str, dict[str, Any]] = {
    SOURCE: {"schedule": "* * * * *", "max_documents": 5000, "max_seconds": 50},
    # Runs of a minute: a SIGKILLed follower's lease is taken over by the next run well within two lease durations.
    FOLLOW: {
        "schedule": "@continuous",
        "follow": True,
        "follow_poll_seconds": 1.0,
        "max_seconds": 60,
        "max_documents": 1_000_000,
    },
}
#: How the report names each source's drain mode (message ids start with the source's name).
MODES = {SOURCE: "cron", FOLLOW: "follow"}
LEASE_SECONDS = 60
#: What a writer's Unit of Work costs (an order and its outbox document of about 1 KB each, 5 RU a write by the
#: emulator's model) and how many drains of one source run at once at most (4 ranges, one of them split in two).
WRITE_RU = 12.0
DRAINS_AT_ONCE = 5
#: Celery workers of the stack (the faults kill them in turn).
WORKERS = 2
#: A 429 burst cuts the monitored container's RU/s to this share of its provisioned throughput.
BURST_SHARE = 0.1
#: How soon the scheduler fails the task of a SIGKILLed worker (Airflow's default is 300 s): until then the source's
#: next run waits (``max_active_runs=1``), so this bounds how long a worker crash stalls the source.
HEARTBEAT_TIMEOUT_S = 30
#: The writers count as on schedule for the next fault while they are at most this many seconds' worth of Units of
#: Work behind it: a fault then hits a run that writes at its rate, not one still catching up from the last fault.
ON_SCHEDULE_S = 10.0
#: The run's bound, in the writers' progress: while planned faults are still to run, the writers may attempt this
#: many times the Units of Work of ``--minutes``; the main loop's passes (a second's sleep each when nothing is due)
#: are bounded the same way, should the writers stop making progress at all. On a 2-core machine at load 6-10 a
#: fault took about 1.5 times its planned length.
BOUND = 4


@dataclass
class Soak:
    """Everything the soak records while it runs."""

    written: dict[str, float] = field(default_factory=dict)  # message id -> commit time (epoch s)
    write_errors: Counter[str] = field(default_factory=Counter)
    processed: Counter[str] = field(default_factory=Counter)  # message id -> receiver PROCESSED outcomes
    receiver_errors: Counter[str] = field(default_factory=Counter)
    samples: list[Sample] = field(default_factory=list)
    #: (offset from t0 in s, schedule entry, epoch s it started, epoch s it ended)
    faults: list[tuple[float, str, float, float]] = field(default_factory=list)
    #: (epoch s, error type) of the drain task attempts that failed (from the task logs, after the run).
    failures: list[tuple[float, str]] = field(default_factory=list)
    #: The writers' schedule: the next slot to take, and how many slots were attempted (committed or refused).
    next_slot: int = 0
    attempted: int = 0
    writers_started: float = 0.0
    rate: float = 1.0
    #: Why the run ended before every planned fault ran (its bound was hit); empty when they all ran.
    unfinished: str = ""
    #: The writer and receiver threads that died of an error (its type and text): the run fails on any.
    died: list[str] = field(default_factory=list)
    #: Leases held and expired at the end of the catch-up: nobody took them over.
    abandoned: int = 0
    #: The emulator's 429s at the monitored containers, summed: ``throttled_low`` (the drains' requests, low priority)
    #: and ``throttled_high`` (the writers' Units of Work, high priority).
    throttled: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    #: Set once the drains have caught up: the receiver stops then.
    drained: threading.Event = field(default_factory=threading.Event)


@dataclass
class Report:
    writes: int
    lost_kafka: int
    lost_effects: int
    kafka_records: int
    max_copies: int
    duplicated_ids: int
    effects_twice: int
    #: Leases still held and expired once the drains had caught up: nobody took them over.
    stuck_leases: int
    #: Leases held and expired for over two lease durations at a sample (the most): how late takeovers came.
    late_leases: int
    #: (drain mode, window, writes, p50, p99 write → Kafka in s)
    windows: list[tuple[str, str, int, float, float]]
    rss: list[RssRow]
    counts: list[CountRow]
    duplicates: list[Attribution]
    #: Ids whose extra copies no fault explains, with their Kafka timestamps (epoch s).
    unexplained: dict[str, list[float]]
    faults: list[tuple[float, str, float, float]]
    failures: list[tuple[float, str]]
    write_errors: dict[str, int]
    receiver_errors: dict[str, int]
    writer_behind_max: int
    t0: float
    #: The emulator's 429s at the monitored containers: the drains' (low priority) and the writers' (high).
    throttled_drains: int = 0
    throttled_writers: int = 0
    #: Why the run ended before every planned fault ran; empty when they all ran.
    unfinished: str = ""
    #: The writer and receiver threads that died of an error.
    died: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            self.lost_kafka == 0
            and self.lost_effects == 0
            and self.effects_twice == 0
            and self.stuck_leases == 0
            and not self.unfinished
            and not self.died
        )

    def table(self) -> str:
        lines = [
            "| measure | value |",
            "|---|---|",
            f"| writes (committed Units of Work) | {self.writes} |",
            f"| lost: ledger vs Kafka | {self.lost_kafka} |",
            f"| lost: ledger vs effect documents | {self.lost_effects} |",
            f"| Kafka records / message ids seen twice or more / most copies of one | "
            f"{self.kafka_records} / {self.duplicated_ids} / {self.max_copies} |",
            f"| effects applied twice | {self.effects_twice} |",
            f"| leases held and expired once the drains caught up (nobody took them over) | {self.stuck_leases} |",
            f"| leases held and expired for over two lease durations (max at a sample) | {self.late_leases} |",
            f"| write errors (not committed, not in the ledger) | {dict(self.write_errors) or 0} |",
            f"| receiver errors (retried) | {dict(self.receiver_errors) or 0} |",
            f"| writers behind their schedule (most Units of Work due but not attempted, at a sample) | "
            f"{self.writer_behind_max} |",
            f"| 429s at the monitored containers (the emulator's count): drains (low priority) / writers (high) | "
            f"{self.throttled_drains} / {self.throttled_writers} |",
        ]
        lines += [
            "",
            "| drain mode | window | writes | p50 write → Kafka (s) | p99 write → Kafka (s) |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {m} | {w} | {n} | {p50:.1f} | {p99:.1f} |" for m, w, n, p50, p99 in self.windows]
        lines += [
            "",
            "| process | restarted at (min) | series (min) | RSS start (MiB) | RSS end (MiB) | slope (MiB/hour) "
            "| CPU (% of a core) |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.name} | {', '.join(f'{m:.1f}' for m in r.restarts) or '–'} | {r.from_min:.1f}–{r.to_min:.1f} "
            f"| {r.start_mib:.0f} | {r.end_mib:.0f} | {r.slope_mib_per_hour:+.0f} | {r.cpu_percent:.0f} |"
            for r in self.rss
        ]
        lines += [
            "",
            "| window | ledger writes (end) | lease documents (max) | inbox markers (end) | effects applied (end) "
            "| written, no effect yet (max) | writers behind schedule (max) |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {c.window} | {c.written} | {c.leases_max} | {c.markers} | {c.effects} "
            f"| {c.receiver_behind_max} | {c.writer_behind_max} |"
            for c in self.counts
        ]
        lines += ["", "| fault | message ids duplicated | extra copies |", "|---|---|---|"]
        lines += [f"| {a.kind} | {a.ids} | {a.extra_copies} |" for a in self.duplicates]
        for mid, stamps in sorted(self.unexplained.items())[:20]:
            minutes = ", ".join(f"{(t - self.t0) / 60:.2f}" for t in stamps)
            lines.append(f"\nnot explained by a fault: {mid} published at minutes {minutes}")
        failed = Counter(error for _, error in self.failures)
        lines.append(f"\ndrain task attempts failed: {dict(failed) or 0}")
        for at, error in self.failures:
            lines.append(f"\ndrain attempt failed at minute {(at - self.t0) / 60:.2f}: {error}")
        lines += ["", "| minute | fault | lasted (s) |", "|---|---|---|"]
        lines += [f"| {at / 60:.1f} | {what} | {end - start:.0f} |" for at, what, start, end in self.faults]
        if self.unfinished:
            lines.append(f"\nNOT EVERY PLANNED FAULT RAN: {self.unfinished}")
        lines += [f"\nA THREAD DIED: {error}" for error in self.died]
        return "\n".join(lines)


# ============================================================================================== processes


def _pids(stack: LiveAirflow) -> dict[str, int]:
    found = {}
    for file in sorted((stack.home / "pids").glob("*.pid")):
        if file.name.endswith(".celery.pid"):
            continue
        pid = int(file.read_text().split()[0])
        if Path(f"/proc/{pid}").exists():
            found[file.stem] = pid
    return found


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # fields from 3 (state) on


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return children


def _descendants(root: int, children: dict[int, list[int]] | None = None) -> list[int]:
    children = _children() if children is None else children
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _pid_file(path: Path) -> int | None:
    """The pid in the first word of ``path`` when that process is alive."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def long_lived(stack: LiveAirflow, endpoint: CosmosEndpoint, broker: KafkaBroker) -> dict[str, int]:
    """Every long-lived process of the soak by name: the Airflow components and workers, PostgreSQL, Redis, the
    emulator, the broker and this process (the writers and the receiver)."""
    state = Path(stack.env.get("CHATTER_STATE_DIR") or CHECKOUT / ".cache" / "services")
    found = _pids(stack)
    files = {
        "postgresql": state / "celery-stack" / "pg" / "postmaster.pid",
        "redis": state / "celery-stack" / "redis.pid",
        "emulator": kafka_state_dir(broker.port).parent
        / f"cosmos-{endpoint.url.rstrip('/').rsplit(':', 1)[-1]}"
        / "server.pid",
        "kafka broker": kafka_state_dir(broker.port) / "kafka.pid",
    }
    for name, path in files.items():
        pid = _pid_file(path)
        if pid is not None:
            found[name] = pid
    found["soak (writers, receivers)"] = os.getpid()
    return found


def _usage(pid: int, children: dict[int, list[int]] | None = None) -> tuple[int, int, float]:
    """(pid, resident memory in KiB, CPU seconds) of ``pid`` and its descendants (a component with its workers
    and task runners; the CPU includes descendants that exited). This process counts itself alone."""
    rss, ticks = 0, 0
    for member in [pid] if pid == os.getpid() else _descendants(pid, children):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
            ticks += sum(int(v) for v in _stat(member)[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return pid, rss, ticks / os.sysconf("SC_CLK_TCK")


def drain_failures(stack: LiveAirflow) -> list[tuple[float, str]]:
    """(epoch s, error type) of every drain task attempt that failed, from the task logs."""
    failures = []
    for path in stack.home.glob("logs/dag_id=chatter_drain_*/**/task_id=drain/**/attempt=*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if '"Task failed with exception"' not in line:
                continue
            try:
                event = json.loads(line)
                at = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
                error = (event.get("error_detail") or [{}])[0].get("exc_type", "?")
            except (ValueError, KeyError, TypeError):
                continue
            failures.append((at, str(error)))
    return sorted(failures)


def kill_worker(stack: LiveAirflow, n: int) -> None:
    """SIGKILL Celery worker ``n``'s process group and those of its descendants (Airflow's task runners), as a
    crashed machine would, then start it again."""
    pid = _pids(stack)[f"worker{n}"]
    groups = {pid}
    for member in _descendants(pid):
        try:
            groups.add(int(_stat(member)[2]))
        except (OSError, ValueError, IndexError):
            continue
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(5)
    worker(stack, "start-worker", n)


# ============================================================================================== load


def _writer(soak: Soak, sources: list[LiveSource], customers: int) -> None:
    """One of the writers: each takes the next slot of the shared schedule (``rate`` a second from
    ``writers_started``), waits until it is due and commits it to the sources in turn."""
    containers = [(source.name, CosmosDocumentContainer(source.monitored)) for source in sources]
    while not soak.stop.is_set():
        with soak.lock:
            n = soak.next_slot
            soak.next_slot += 1
        due = soak.writers_started + n / soak.rate
        while due > time.time() and not soak.stop.is_set():
            time.sleep(max(0.0, min(due - time.time(), 0.5)))
        if soak.stop.is_set():
            break
        customer = f"cust-{n % customers}"
        name, container = containers[n % len(containers)]
        message_id = f"{name}-{n}-{uuid.uuid4().hex[:8]}"
        try:
            with UnitOfWork(container, PK_PATH, customer) as unit:
                unit.create({"id": f"order-{message_id}", "customerId": customer, "n": n, "pad": "x" * 300})
                unit.add_message(OutboxMessage(message_id, DESTINATION, json.dumps({"order": n}), "application/json"))
            with soak.lock:
                soak.written[message_id] = time.time()
        except Exception as error:  # noqa: BLE001 - counted and reported; the write was not committed
            with soak.lock:
                soak.write_errors[type(error).__name__] += 1
        with soak.lock:
            soak.attempted += 1


def _record_effect(delivery: Delivery) -> None:
    unit = delivery.unit_of_work
    assert unit is not None
    unit.create({"id": f"effect-{delivery.identity}", "customerId": unit.partition_key, "kind": "effect"})


def _receiver(soak: Soak, bootstrap: str, topics: list[str], effects: Any, group: str) -> None:
    from kafka import KafkaConsumer

    receiver = IdempotentReceiver(
        _record_effect, name="soak", container=CosmosDocumentContainer(effects), partition_key_paths=PK_PATH
    )
    consumer = KafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=2000,
    )
    try:
        while not soak.drained.is_set():
            try:
                batch = consumer.poll(timeout_ms=1000, max_records=200)
            except Exception as error:  # noqa: BLE001 - the broker outage: poll again
                soak.receiver_errors[type(error).__name__] += 1
                time.sleep(1)
                continue
            for records in batch.values():
                for record in records:
                    message = received_message(record)
                    while True:
                        try:
                            outcome = receiver.handle_delivery(message)
                            break
                        except Exception as error:  # noqa: BLE001 - 429s, the outage: the same delivery again
                            soak.receiver_errors[type(error).__name__] += 1
                            time.sleep(1)
                    if outcome is DeliveryOutcome.PROCESSED:
                        with soak.lock:
                            soak.processed[message.header("message-id") or ""] += 1
            if batch:
                try:
                    consumer.commit()
                except Exception as error:  # noqa: BLE001 - uncommitted: redelivered, and the inbox dedupes
                    soak.receiver_errors[type(error).__name__] += 1
    finally:
        consumer.close()


def _unthrottled(call: Callable[[], Any]) -> Any:
    """``call()``, retried for 30 s while the container answers 429 (its RU/s spent by the load the sampler
    observes)."""
    from azure.cosmos.exceptions import CosmosHttpResponseError

    for _ in range(60):
        try:
            return call()
        except CosmosHttpResponseError as error:
            if error.status_code != 429:
                raise
            time.sleep(0.5)
    return call()


def _query(container: Any, query: str) -> list[Any]:
    return _unthrottled(lambda: list(container.query_items(query, enable_cross_partition_query=True)))


def _documents(container: Any) -> int:
    """The container's document count, from a container read with quota info (``x-ms-resource-usage``): a COUNT
    query reads every document on the emulator, and at 100,000 documents held it for a minute per sample."""
    usage: dict[str, str] = {}

    def hook(headers: Any, _body: Any) -> None:
        text = str(headers.get("x-ms-resource-usage") or "")
        usage.update(part.split("=", 1) for part in text.split(";") if "=" in part)

    _unthrottled(lambda: container.read(populate_quota_info=True, response_hook=hook))
    return int(usage["documentsCount"])


def _stuck(leases: Any, expired_for_s: float = 2 * LEASE_SECONDS) -> int:
    """Leases with an owner whose expiry is more than ``expired_for_s`` ago (0: held and expired, nobody has taken
    them over yet)."""
    now = datetime.now(UTC).timestamp()
    stuck = 0
    for lease in _query(leases, "SELECT * FROM c"):
        expires = lease.get("expires_at")
        if lease.get("owner") and expires:
            at = datetime.fromisoformat(str(expires).replace("Z", "+00:00")).timestamp()
            stuck += now - at > expired_for_s
    return stuck


def _sample(soak: Soak, sources: list[LiveSource], effects: Any, processes: dict[str, int]) -> None:
    now = time.time()
    with soak.lock:
        written = len(soak.written)
    _, behind = _progress(soak)
    children = _children()
    # Each effect is committed with its marker in one Unit of Work: the effects container holds both.
    with soak.lock:
        applied = sum(soak.processed.values())
    soak.samples.append(
        Sample(
            now,
            sum(_documents(source.leases) for source in sources),
            _documents(effects) - applied,
            applied,
            sum(_stuck(source.leases) for source in sources),
            written=written,
            writer_behind=behind,
            rss={name: _usage(pid, children) for name, pid in processes.items()},
        )
    )


# ============================================================================================== the run


def schedule(seconds: float) -> list[tuple[float, str]]:
    """(offset in seconds, fault) for a run of ``seconds``, in order. An offset is progress, not a time: the fault
    is due once the writers have attempted ``offset × rate`` Units of Work (``next_step``)."""
    kill_every = min(180.0, seconds / 3)
    plan = [(kill_every * i, f"kill worker{1 + (i - 1) % WORKERS}") for i in range(1, int(seconds / kill_every))]
    plan += [
        (0.15 * seconds, "429 burst"),
        (0.30 * seconds, f"broker stop {min(60.0, seconds / 6):.0f}s"),
        (0.55 * seconds, "split range"),
        (0.70 * seconds, "429 burst"),
        (0.85 * seconds, "restart scheduler"),
    ]
    return sorted(plan)


def _fault(
    what: str, stack: LiveAirflow, endpoint: CosmosEndpoint, broker: KafkaBroker, links: list[str], ru: float
) -> None:
    """Inject ``what``; a burst and a split hit every monitored container."""
    if what.startswith("kill worker"):
        kill_worker(stack, int(what[-1]))
    elif what == "429 burst":
        configure_emulator(
            endpoint, containers={link: {"provisioned_ru_per_second": ru * BURST_SHARE} for link in links}
        )
        time.sleep(15)
        configure_emulator(endpoint, containers={link: {"provisioned_ru_per_second": ru} for link in links})
    elif what.startswith("broker stop"):
        broker.stop()
        time.sleep(float(what.split()[-1].rstrip("s")))
        broker.start()
    elif what == "split range":
        for link in links:
            first = emulator_admin(endpoint, "GET", "ranges", params={"container": link})["ranges"][0]["id"]
            emulator_admin(endpoint, "POST", "split", {"container": link, "range_id": first})
    elif what == "restart scheduler":
        stack_script(stack, "restart-scheduler")


def _progress(soak: Soak) -> tuple[int, int]:
    """(Units of Work the writers attempted, how many more their schedule has due by now: 0 once they stopped)."""
    with soak.lock:
        attempted = soak.attempted
    if not soak.writers_started or soak.stop.is_set():
        return attempted, 0
    return attempted, max(0, int((time.time() - soak.writers_started) * soak.rate) - attempted)


def next_step(
    plan: list[tuple[float, str]], attempted: int, behind: int, *, rate: float, seconds: float, idle_passes: int
) -> Literal["done", "bound", "fault", "wait"]:
    """What the main loop does next, from the writers' progress alone (the fault before has ended: faults run one at
    a time, in the main loop). ``done``: ``seconds``' worth of Units of Work attempted and every planned fault run;
    ``bound``: faults still to run at ``BOUND`` times that worth, or after ``BOUND × seconds`` idle passes; ``fault``:
    the next one's share of the run attempted and the writers on their schedule; ``wait`` otherwise."""
    planned = seconds * rate
    if not plan and attempted >= planned:
        return "done"
    if attempted >= BOUND * planned or idle_passes >= BOUND * seconds:
        return "bound"
    if plan and attempted >= plan[0][0] * rate and behind <= ON_SCHEDULE_S * rate:
        return "fault"
    return "wait"


@contextmanager
def _threads(died: list[str], *targets: Callable[[], None]) -> Iterator[list[threading.Thread]]:
    """The targets on daemon threads; a target that raises is named in ``died`` (the run then fails:
    a writer that died leaves its share of the schedule to the others, and the run would look only slow)."""

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as error:
                died.append(f"{type(error).__name__}: {error}")
                traceback.print_exc()

        return run

    threads = [threading.Thread(target=guarded(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    yield threads


def _final_kafka(bootstrap: str, topics: list[str]) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records: list[Any] = []
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    minutes: float,
    rate: float,
    customers: int,
    settle_s: float = 600.0,
    log: Callable[[str], None] = print,
    *,
    writers: int = 0,
    receivers: int = 0,
    faults: bool = True,
    follow: bool = True,
) -> Report:
    """The soak: ``minutes`` × ``rate`` Units of Work planned, and as many more as the planned faults need to run
    (bounded by ``BOUND``); ``writers`` threads share the schedule of ``rate`` Units of Work a second and ``receivers``
    consumers of one group share the topics (0: one per 10/s, at most 3 receivers, a topic's partitions);
    ``faults=False`` runs without the fault schedule (to measure what rate the machine sustains); ``follow=False``
    leaves out the following source (the cron source takes every write); the catch-up ends early when ``settle_s``
    worth of samples (one each ``sample_s / 2``) applied nothing more."""
    seconds = minutes * 60
    window_s = 600.0 if minutes >= 20 else 60.0
    sample_s = 30.0
    writers = writers or max(1, round(rate / 10))
    receivers = receivers or min(3, max(1, round(rate / 10)))
    soak = Soak(rate=rate)
    names = (SOURCE, FOLLOW) if follow else (SOURCE,)
    # Near each container's load: a write is a two-operation batch; the drains read and stamp each document again,
    # about 9 RU a delivered document. A scheduled drain relays in bursts (50 s runs, a run at a time, retries after
    # a worker kill), so while it runs it must relay well above the write rate: at 40 the cap below left 56 RU/s a
    # task, about 6 documents a second per lease, and the scheduled source fell behind.
    ru = max(50.0, rate / len(names) * 60)
    # As docs/config.md says for a drain sharing its container with the application (F-11): what the writers leave
    # of the RU/s, divided by the drains that run at once. Unpaced, the drains' bursts kept the container throttled
    # until each drain task spent its 30 s of 429 waits and stopped, and the backlog grew.
    cap = round((ru - rate / len(names) * WRITE_RU) / DRAINS_AT_ONCE, 1)
    settings = {name: {**SETTINGS[name], "max_request_units_per_second": cap} for name in names}
    broker = KafkaBroker(PROJECT_KAFKA_PORT + 2, keep_data=True)
    bootstrap = broker.start()
    try:
        with (
            cosmos_service() as endpoint,
            emulator_configured(endpoint, latency_ms=5, request_charges=True, priority_based_execution=True),
            stack_for(
                endpoint,
                endpoint_database(endpoint),
                bootstrap,
                script=SCRIPT,
                session_prefix="soak-",
                source_names=names,
                source_settings=settings,
                partition_ranges=4,
                extra_env={
                    "AIRFLOW_LIVE_CELERY_WORKERS": str(WORKERS),
                    # A slot per drain of each source and one for its small tasks (list_leases, topic_events):
                    # a follower holds its slot all the time, and the scheduled drains run side by side, not
                    # queued behind the followers (the stack's [core] parallelism is every worker slot).
                    "AIRFLOW_LIVE_WORKER_CONCURRENCY": str(len(names) * (DRAINS_AT_ONCE + 1) // WORKERS),
                    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
                },
            ) as stack,
        ):
            sources = [stack.sources[name] for name in names]
            links = [f"dbs/{stack.database}/colls/{source.monitored.id}" for source in sources]
            configure_emulator(endpoint, containers={link: {"provisioned_ru_per_second": ru} for link in links})
            topics = [source.topic for source in sources]
            ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), topics, partitions=3)
            effects = create_container(endpoint_database(endpoint), f"{sources[0].monitored.id}-effects", (PK_PATH,))
            api = stack.client("admin")
            for source in sources:
                stack.unpause(api, source.drain_dag_id)
            t0 = soak.writers_started = time.time()
            log(
                f"soak: {minutes} min at {rate}/s over {customers} customers ({writers} writers, {receivers} "
                f"receivers); sources {', '.join(f'{n} ({MODES[n]})' for n in names)}; RU/s {ru} each, "
                f"{cap} per drain task; "
                f"faults {faults}; stack {stack.url}"
            )
            group = f"soak-{uuid.uuid4().hex[:8]}"
            with _threads(
                soak.died,
                *[lambda: _writer(soak, sources, customers) for _ in range(writers)],
                *[lambda: _receiver(soak, bootstrap, topics, effects, group) for _ in range(receivers)],
            ) as threads:
                plan = schedule(seconds) if faults else []
                passes = 0
                next_sample = 0.0
                while True:
                    elapsed = time.time() - t0
                    attempted, behind = _progress(soak)
                    step = next_step(plan, attempted, behind, rate=rate, seconds=seconds, idle_passes=passes)
                    if step == "done":
                        break
                    if step == "bound":
                        soak.unfinished = (
                            f"the bound was hit ({attempted} Units of Work attempted, {BOUND} × the "
                            f"{seconds * rate:.0f} planned, after {passes} idle passes of the main loop) with "
                            f"{len(plan)} planned faults not run: {', '.join(what for _, what in plan)}; the writers "
                            f"were {behind} Units of Work behind their schedule (on schedule: at most "
                            f"{ON_SCHEDULE_S * rate:.0f})"
                        )
                        log(f"soak: {soak.unfinished}")
                        break
                    if elapsed >= next_sample:
                        _sample(soak, sources, effects, long_lived(stack, endpoint, broker))
                        s = soak.samples[-1]
                        log(
                            f"soak: {elapsed / 60:.1f} min: written {s.written}, writers behind {s.writer_behind}, "
                            f"markers {s.markers}, effects {s.effects}, load {os.getloadavg()[0]:.1f}, "
                            f"sampled in {time.time() - t0 - elapsed:.1f} s"
                        )
                        next_sample += sample_s
                    if step == "fault":
                        _, what = plan.pop(0)
                        log(f"soak: {elapsed / 60:.1f} min: {what} ({attempted} Units of Work attempted)")
                        started = time.time()
                        _fault(what, stack, endpoint, broker, links, ru)
                        soak.faults.append((elapsed, what, started, time.time()))
                        continue
                    time.sleep(1)
                    passes += 1
                soak.stop.set()
                for thread in threads[:writers]:
                    thread.join()
                log(f"soak: writers stopped at {len(soak.written)}; waiting for drains and receiver")
                wanted = set(soak.written)
                # Caught up: every write applied and every lease released or taken over. Bounded by progress: the
                # catch-up ends after settle_s worth of passes in which no further write was applied.
                applied, idle = -1, 0
                while idle < settle_s / (sample_s / 2):
                    _sample(soak, sources, effects, long_lived(stack, endpoint, broker))
                    with soak.lock:
                        now_applied = len(wanted & soak.processed.keys())
                    soak.abandoned = sum(_stuck(source.leases, expired_for_s=0) for source in sources)
                    log(
                        f"soak: catching up: {now_applied} of {len(wanted)} writes applied, "
                        f"{soak.abandoned} leases held and expired"
                    )
                    if now_applied >= len(wanted) and soak.abandoned == 0:
                        break
                    idle = 0 if now_applied > applied else idle + 1
                    applied = now_applied
                    time.sleep(sample_s / 2)
                soak.drained.set()
                for thread in threads[writers:]:
                    thread.join(timeout=30)
            records = _final_kafka(bootstrap, topics)
            soak.failures = drain_failures(stack)
            soak.throttled = monitored_throttled(endpoint, links)
            # The change feed enumerates a container from its log; a query would scan it page by page.
            effect_ids = {
                d["id"].removeprefix("effect-")
                for d in effects.query_items_change_feed(start_time="Beginning", max_item_count=1000)
                if d["id"].startswith("effect-")
            }
    finally:
        if broker.running:
            broker.stop()
    return _report(soak, records, effect_ids, window_s, t0)


def monitored_throttled(endpoint: CosmosEndpoint, links: list[str]) -> dict[str, int]:
    """The emulator's 429s at the monitored containers, by priority, summed: the drains send every request at low
    priority and the writers' Units of Work go at high (the SDK's default), so ``throttled_low`` is what the drains
    met and ``throttled_high`` what the writers met."""
    every = emulator_admin(endpoint, "GET", "stats")["containers"]
    return {
        key: sum(int(every.get(link, {}).get(key, 0)) for link in links) for key in ("throttled_low", "throttled_high")
    }


def endpoint_database(endpoint: CosmosEndpoint) -> Any:
    from airflow_chatter.adapters.cosmos.container import ensure_database

    return ensure_database(endpoint.client(), DATABASE)


def _report(soak: Soak, records: list[Any], effect_ids: set[str], window_s: float, t0: float) -> Report:
    stamps: dict[str, list[float]] = {}
    for record in records:
        headers = dict((k, v) for k, v in record.headers or ())
        mid = (headers.get("message-id") or b"").decode()
        stamps.setdefault(mid, []).append(record.timestamp / 1000)
    copies = Counter({mid: len(at) for mid, at in stamps.items()})
    first_seen = {mid: min(at) for mid, at in stamps.items()}
    written = soak.written
    by_window: dict[tuple[str, int], list[float]] = {}
    for mid, at in written.items():
        if mid in first_seen:
            mode = MODES.get(mid.split("-", 1)[0], "?")
            by_window.setdefault((mode, int((at - t0) // window_s)), []).append(first_seen[mid] - at)
    windows = [
        (
            mode,
            f"{i * window_s / 60:.0f}–{(i + 1) * window_s / 60:.0f} min",
            len(v),
            statistics.median(v),
            _percentile(v, 0.99),
        )
        for (mode, i), v in sorted(by_window.items())
    ]
    duplicates, unexplained = attribute_duplicates(
        stamps, [FaultWindow(fault_kind(what), start, end) for _, what, start, end in soak.faults], soak.failures
    )
    return Report(
        writes=len(written),
        lost_kafka=len(set(written) - set(copies)),
        lost_effects=len(set(written) - effect_ids),
        kafka_records=len(records),
        max_copies=max(copies.values(), default=0),
        duplicated_ids=sum(1 for c in copies.values() if c > 1),
        effects_twice=sum(1 for c in soak.processed.values() if c > 1),
        stuck_leases=soak.abandoned,
        late_leases=max((s.stuck for s in soak.samples), default=0),
        windows=windows,
        rss=rss_rows(soak.samples, t0),
        counts=count_rows(soak.samples, t0, window_s),
        duplicates=duplicates,
        unexplained=unexplained,
        faults=soak.faults,
        failures=soak.failures,
        write_errors=dict(soak.write_errors),
        receiver_errors=dict(soak.receiver_errors),
        writer_behind_max=max((s.writer_behind for s in soak.samples), default=0),
        t0=t0,
        throttled_drains=soak.throttled.get("throttled_low", 0),
        throttled_writers=soak.throttled.get("throttled_high", 0),
        unfinished=soak.unfinished,
        died=list(soak.died),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--minutes",
        type=float,
        default=30.0,
        help="the writers' planned Units of Work (minutes × rate) and the faults' scale; the run lasts until every "
        "planned fault has run (30)",
    )
    parser.add_argument("--rate", type=float, default=5.0, help="Units of Work committed a second (5)")
    parser.add_argument("--customers", type=int, default=200, help="partition key values (200)")
    parser.add_argument("--writers", type=int, default=0, help="writer threads (0: one per 10/s)")
    parser.add_argument("--receivers", type=int, default=0, help="receiver consumers (0: one per 10/s, at most 3)")
    parser.add_argument("--no-faults", action="store_true", help="no fault schedule (to measure a rate)")
    parser.add_argument("--no-follow", action="store_true", help="no following source: the cron source takes all")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}; checkout {CHECKOUT}; load average {os.getloadavg()}")
    print(f"command: python -m tests.reliability.soak {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"started {datetime.now(UTC).isoformat(timespec='seconds')}")
    report = run(
        args.minutes,
        args.rate,
        args.customers,
        writers=args.writers,
        receivers=args.receivers,
        faults=not args.no_faults,
        follow=not args.no_follow,
    )
    print(f"ended {datetime.now(UTC).isoformat(timespec='seconds')}; load average {os.getloadavg()}")
    print(report.table())
    print("PASS" if report.passed else "FAIL")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
