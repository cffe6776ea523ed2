"""Proving no loss: the drain under injected faults, against the real broker and the Cosmos emulator.

    .venv/bin/python -m tests.reliability.fault_suite [--short] [--only sigkill,broker,...] [--seed 7]

Each scenario seeds a ledger of pending Outbox Documents (unique message ids over many partition keys) in a fresh
emulator container, runs the drain as separate OS processes (``python -m devkit.drain_runner``:
the real ``CosmosDocumentContainer`` and ``KafkaPublisher``, a fresh process per run as Airflow runs tasks) under one
fault, then checks the ledger against what reached Kafka (the topic consumed from the start, counted per
``message-id``) and against the documents' final states. Cosmos faults come from the project's fault-injecting
proxy (``devkit.faultproxy``) between the drain and the emulator, the broker outage from
``scripts/kafka.sh stop``/``start`` of a broker of the suite's own (``devkit.services``). It prints
one table:

    fault | trials | documents | lost | max duplicates | republishes while failing | verdict

``lost`` counts ledger ids never seen on the topic; ``max duplicates`` is the largest number of copies of one
message id; the verdict is PASS only when nothing is lost, every document ended ``delivered`` (or, for the fuzzed
ones, ``undeliverable``) and the scenario's own bound held. ``--short`` is the version the test command runs.

Services: ``KAFKA_PORT`` (the project broker, shared with test sessions) and ``COSMOS_EMULATOR_PORT`` as
``scripts/kafka.sh`` and ``scripts/cosmos-emulator.sh`` read them; the outage scenario starts its own broker on
``KAFKA_PORT + 2`` (controller ``+ 3``) and stops it at the end. Exits 1 when any verdict is FAIL.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from airflow_chatter.adapters.cosmos.container import (
    CosmosDocumentContainer,
    create_container,
    ensure_database,
)
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.outbox.document import OutboxMessage
from devkit.faultproxy import FaultProxy, FaultRule, FaultRules
from devkit.services import (
    CHECKOUT,
    PROJECT_KAFKA_PORT,
    KafkaBroker,
    machine,
    project_emulator,
    shared_project_broker,
)

DATABASE = "airflow-chatter-faults"
PK_PATHS = ("/tenantId",)
#: Kafka timeouts of every drain run: what bounds a run while the broker is away (see the broker scenario).
KAFKA_TIMEOUTS = {"max_block_ms": 3000, "request_timeout_ms": 4000, "delivery_timeout_ms": 8000}
#: A run's wall-clock ceiling when no fault is meant to stop it; a run still going then is reported as hung.
RUN_TIMEOUT_SECONDS = 120.0
#: The Drain Suspension window (SUS-15), which the suspension scenario steps the drains' clock over.
WINDOW_SECONDS = 60.0


def message_id_counts(bootstrap: str, topic: str, *, seconds: float, **consumer_config: Any) -> Counter[str]:
    """Every message id on ``topic``, consumed from the beginning up to the end offsets read now, for at most
    ``seconds``; a record without a ``message-id`` header counts under ``""``. ``consumer_config``: further
    KafkaConsumer settings (the kill ledger reads ``isolation_level="read_committed"``)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, api_version=(2, 8, 0), **consumer_config
    )
    counts: Counter[str] = Counter()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + seconds
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                for record in records:
                    headers = dict(record.headers or [])
                    counts[headers.get("message-id", b"").decode("utf-8", "replace")] += 1
    finally:
        consumer.close()
    return counts


@dataclass
class Row:
    fault: str
    trials: int
    documents: int
    lost: int
    max_duplicates: int
    republishes_while_failing: str
    verdict: str
    notes: list[str] = field(default_factory=list)


# ============================================================================================== services


@dataclass
class Services:
    endpoint: str
    key: str
    cert: str
    tls_key: str
    bootstrap: str
    proxy: FaultProxy
    client: Any
    database: Any

    def rules(self, *rules: FaultRule) -> None:
        self.proxy.rules.replace(list(rules))

    def admin(self, method: str, name: str, body: dict[str, Any] | None = None) -> Any:
        answer = requests.request(method, self.endpoint + f"_chatter/{name}", json=body, verify=self.cert, timeout=10)
        answer.raise_for_status()
        return answer.json()


@contextmanager
def services() -> Iterator[Services]:
    with project_emulator() as emulator, shared_project_broker() as bootstrap:
        cert = str(emulator.verify)
        tls_key = str(Path(cert).with_name("key.pem"))
        proxy = FaultProxy(emulator.url, cert_file=cert, key_file=tls_key, upstream_ca=cert, rules=FaultRules(seed=1))
        proxy.start_in_thread()
        try:
            client = emulator.client()
            yield Services(
                emulator.url, emulator.key, cert, tls_key, bootstrap, proxy, client, ensure_database(client, DATABASE)
            )
        finally:
            proxy.stop_thread()


# ============================================================================================== the ledger


@dataclass
class RunResult:
    report: dict[str, Any] | None
    seconds: float
    killed: bool = False
    hung: bool = False

    @property
    def summaries(self) -> list[dict[str, Any]]:
        return list((self.report or {}).get("summaries", []))

    @property
    def failed(self) -> bool:
        if self.report is None or self.report.get("error"):
            return True
        return any(s.get("error_type") for s in self.summaries)

    def errors(self) -> list[str]:
        found = [str(self.report["error"])] if self.report and self.report.get("error") else []
        return found + [f"{s['error_type']}: {s.get('error_message')}"[:160] for s in self.summaries if s["error_type"]]


class Ledger:
    """Pending Outbox Documents with unique message ids in a fresh container, and what became of them."""

    def __init__(
        self,
        env: Services,
        label: str,
        n: int,
        *,
        tenants: int = 64,
        ranges: int = 1,
        bootstrap: str | None = None,
    ) -> None:
        self.env, self.label = env, label
        self.bootstrap = bootstrap or env.bootstrap
        suffix = uuid.uuid4().hex[:8]
        self.container_id, self.leases_id = f"fs-{label}-{suffix}", f"fs-{label}-{suffix}-leases"
        self.topic = f"chatter-faults.{label}.{suffix}"
        ensure_topics(KafkaSettings(bootstrap_servers=self.bootstrap), [self.topic], partitions=3)
        previous = env.admin("GET", "config").get("partition_ranges", 1)
        if ranges != previous:
            env.admin("POST", "config", {"partition_ranges": ranges})
        try:
            self.proxy = create_container(env.database, self.container_id, PK_PATHS, default_ttl=-1)
            create_container(env.database, self.leases_id, ("/id",))
        finally:
            if ranges != previous:
                env.admin("POST", "config", {"partition_ranges": previous})
        self.container = CosmosDocumentContainer(self.proxy)
        self.tenants = tenants
        self.ids: list[str] = []
        self.owners = 0
        self.add(n)

    def add(self, count: int) -> None:
        """Seed ``count`` more pending documents (new message ids) into the ledger."""
        docs = [self.document(len(self.ids) + i, self.tenants) for i in range(count)]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda d: self.container.create(d, d["tenantId"]), docs))
        self.ids.extend(d["MessageId"] for d in docs)

    def document(self, i: int, tenants: int) -> dict[str, Any]:
        tenant = f"tenant-{i % tenants}"
        body = json.dumps({"order": i, "tenant": tenant, "pad": "x" * 200})
        message = OutboxMessage(f"{self.label}-{i}", self.topic, body, "application/json", {"seq": i})
        return message.to_document(PK_PATHS, tenant)

    def spec(self, **overrides: Any) -> dict[str, Any]:
        self.owners += 1
        spec: dict[str, Any] = {
            "endpoint": self.env.proxy.url,
            "key": self.env.key,
            "verify": self.env.cert,
            "database": DATABASE,
            "container": self.container_id,
            "leases": self.leases_id,
            "bootstrap": self.bootstrap,
            "source": f"faults-{self.label}",
            "partition_key_paths": list(PK_PATHS),
            "owner": f"{self.label}-drain-{self.owners}",
            "max_seconds": 60.0,
            "max_batch_size": 100,
            "lease_duration_seconds": 60.0,
            "kafka": KAFKA_TIMEOUTS,
        }
        spec.update(overrides)
        return spec

    def start(self, **overrides: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "devkit.drain_runner", json.dumps(self.spec(**overrides))],
            cwd=CHECKOUT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def finish(process: subprocess.Popen[str], started: float, timeout: float = RUN_TIMEOUT_SECONDS) -> RunResult:
        try:
            out, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=30)
            return RunResult(None, time.monotonic() - started, hung=True)
        seconds = time.monotonic() - started
        lines = [line for line in out.splitlines() if line.startswith("{")]
        report = json.loads(lines[-1]) if lines else None
        return RunResult(report, seconds, killed=process.returncode == -signal.SIGKILL)

    def drain(self, timeout: float = RUN_TIMEOUT_SECONDS, **overrides: Any) -> RunResult:
        started = time.monotonic()
        return self.finish(self.start(**overrides), started, timeout)

    def drain_to_end(self, *, max_runs: int = 12, offset_step: float = 0.0, **overrides: Any) -> list[RunResult]:
        """Run drains until nothing is pending (bounded); ``offset_step`` moves each run's clock one window on, so a
        Drain Suspension opened by the fault is probed at once instead of a minute later."""
        runs: list[RunResult] = []
        offset = float(overrides.pop("clock_offset_seconds", 0.0))
        for _ in range(max_runs):
            runs.append(self.drain(clock_offset_seconds=offset, **overrides))
            if self.pending() == 0:
                break
            offset += offset_step
        return runs

    def statuses(self) -> Counter[str]:
        return Counter(str(d.get("status")) for d in self.container.query("SELECT c.status FROM c"))

    def pending(self) -> int:
        return self.statuses().get("pending", 0)

    def lease_documents(self) -> list[dict[str, Any]]:
        leases = CosmosDocumentContainer(self.env.database.get_container_client(self.leases_id))
        return list(leases.query("SELECT * FROM c"))

    def kafka_counts(self) -> Counter[str]:
        """Every message id on the topic, consumed from the beginning up to the end offsets read now."""
        return message_id_counts(self.bootstrap, self.topic, seconds=60, consumer_timeout_ms=1000)

    def outcome(self, counts: Counter[str] | None = None) -> tuple[int, int, bool]:
        """(lost, max duplicates, every ledger document delivered)."""
        counts = self.kafka_counts() if counts is None else counts
        lost = sum(1 for i in self.ids if counts.get(i, 0) == 0)
        dup = max((counts.get(i, 0) for i in self.ids), default=0)
        status = {
            d.get("MessageId"): d.get("status") for d in self.container.query("SELECT c.MessageId, c.status FROM c")
        }
        return lost, dup, all(status.get(i) == "delivered" for i in self.ids)

    def close(self) -> None:
        for name in (self.container_id, self.leases_id):
            try:
                self.env.database.delete_container(name)
            except Exception:  # noqa: BLE001 - cleanup must not mask the scenario's outcome
                pass


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def stamp_rule(ledger: Ledger, **kwargs: Any) -> FaultRule:
    """A rule on the delivered stamps of this ledger: patches and transactional batches of its container."""
    return FaultRule(operations=("patch", "batch"), container=ledger.container_id, **kwargs)


# ============================================================================================== scenarios


def scenario_sigkill(env: Services, short: bool, rng: random.Random) -> Row:
    """1. SIGKILL at random moments, then run to the end: nothing lost, duplicates per kill bounded by one page."""
    n, kills, page, latency = (300, 4, 50, 10) if short else (2000, 20, 50, 40)
    ledger = Ledger(env, "sigkill", n)
    try:
        mid_drain = made = 0
        # Every emulator request slower for the kills (latency_ms), so that the drain is still going at the 20th.
        env.admin("POST", "config", {"latency_ms": latency})
        try:
            for _ in range(kills):
                before = ledger.pending()
                if before == 0:
                    break
                # A fresh owner each time: the killed run's lease must lapse (4 s) before another drain may take it.
                process = ledger.start(max_batch_size=page, lease_duration_seconds=4.0)
                time.sleep(rng.uniform(1.2, 3.5))  # the interpreter and the clients start in about a second
                process.send_signal(signal.SIGKILL)
                process.communicate(timeout=30)
                made += 1
                mid_drain += 1 if ledger.pending() > 0 else 0
                time.sleep(4.2)
        finally:
            env.admin("POST", "config", {"latency_ms": 0})
        runs = ledger.drain_to_end(max_batch_size=page, lease_duration_seconds=4.0)
        lost, dup, delivered = ledger.outcome()
        counts = ledger.kafka_counts()
        extra = sum(max(0, counts.get(i, 0) - 1) for i in ledger.ids)
        bound = made * page
        ok = lost == 0 and delivered and extra <= bound and not any(r.hung for r in runs)
        return Row(
            "SIGKILL at random moments",
            made,
            n,
            lost,
            dup,
            f"{extra} extra copies ≤ {made} kills × page {page}",
            verdict(ok),
            [f"{mid_drain} kills left documents pending; {len(runs)} runs to finish"],
        )
    finally:
        ledger.close()


def scenario_broker_outage(env: Services, short: bool, rng: random.Random) -> Row:
    """2. The broker stopped mid-drain and started again: runs meanwhile fail cleanly within their timeouts."""
    outage = 12.0 if short else 60.0
    n = 300 if short else 1000
    broker = KafkaBroker(PROJECT_KAFKA_PORT + 2, keep_data=True)
    bootstrap = broker.start()
    ledger = Ledger(env, "broker", n, bootstrap=bootstrap)
    try:
        first = ledger.start(max_batch_size=20)
        t0 = time.monotonic()
        time.sleep(2.0)
        pending_at_stop = ledger.pending()
        broker.stop()
        stopped_at = time.monotonic()
        during: list[RunResult] = [Ledger.finish(first, t0)]
        # At least two runs start while the broker is down, however long the first one took to fail on it (it may
        # take up to max_block + delivery timeout, longer than the short outage): the outage lasts until then.
        while time.monotonic() - stopped_at < outage or len(during) < 3:
            ledger.add(10)  # the services keep writing: every run in the outage has pending work to fail on
            during.append(ledger.drain(timeout=RUN_TIMEOUT_SECONDS))
        outage_seconds = time.monotonic() - stopped_at
        broker.start()
        runs = ledger.drain_to_end()
        lost, dup, delivered = ledger.outcome()
        outage_runs = during[1:]
        bound = (KAFKA_TIMEOUTS["max_block_ms"] + KAFKA_TIMEOUTS["delivery_timeout_ms"]) / 1000
        slowest = max((r.seconds for r in outage_runs), default=0.0)
        clean = all(r.report is not None and r.failed and not r.hung for r in outage_runs)
        ok = lost == 0 and delivered and clean and bool(outage_runs) and not any(r.hung for r in runs)
        errors = sorted({e.split(":")[0] for r in outage_runs for e in r.errors()})
        return Row(
            f"broker stopped {outage:.0f} s mid-drain",
            len(during),
            len(ledger.ids),
            lost,
            dup,
            f"{len(outage_runs)} runs in the outage, all failed cleanly: {clean}",
            verdict(ok),
            [
                f"{pending_at_stop} documents pending when the broker stopped, for {outage_seconds:.0f} s; "
                f"slowest outage run {slowest:.1f} s, process start included (configured: max_block "
                f"{KAFKA_TIMEOUTS['max_block_ms']} ms + delivery {KAFKA_TIMEOUTS['delivery_timeout_ms']} ms = "
                f"{bound:.0f} s per publish); errors {errors}"
            ],
        )
    finally:
        ledger.close()
        broker.keep_data = False
        broker.stop()


def scenario_suspension(env: Services, short: bool, rng: random.Random) -> Row:
    """3. Every delivered stamp fails (503) after the publish: the Drain Suspension bound across processes."""
    n = 60
    ledger = Ledger(env, "suspension", n, tenants=6)
    try:
        env.rules(stamp_rule(ledger, status=503))
        opening = 7  # runs within the first window: five open the suspension, the rest must be refused
        offsets = [0.0] * opening + [WINDOW_SECONDS + 1, WINDOW_SECONDS + 2, 2 * WINDOW_SECONDS + 1]
        trail: list[int] = []
        for offset in offsets:
            ledger.drain(clock_offset_seconds=offset, max_batch_size=20)
            trail.append(max(ledger.kafka_counts().values(), default=0))
        suspended = any(
            (lease.get("suspension") or {}).get("suspended")
            for lease in ledger.lease_documents()
            if "suspension" in lease
        )
        env.rules()
        healed = ledger.drain_to_end(clock_offset_seconds=3 * WINDOW_SECONDS + 1, max_batch_size=20)
        lost, dup, delivered = ledger.outcome()
        still_suspended = any((lease.get("suspension") or {}).get("suspended") for lease in ledger.lease_documents())
        at_open = trail[opening - 1]
        windows = 2
        ok = (
            at_open <= 5
            and trail[-1] <= at_open + windows
            and suspended
            and not still_suspended
            and lost == 0
            and delivered
        )
        return Row(
            "503 on every stamp (Drain Suspension)",
            len(offsets) + len(healed),
            n,
            lost,
            dup,
            f"{at_open} publishes to open (≤5), then {trail[-1] - at_open} probes in {windows} windows (≤{windows})",
            verdict(ok),
            [
                f"copies of the most published document after each failing run: {trail}; "
                f"suspended while failing: {suspended}; suspended after the heal: {still_suspended}; "
                "later windows by the drains' clock offset (+61 s, +62 s, +121 s), not by waiting"
            ],
        )
    finally:
        env.rules()
        ledger.close()


def scenario_lost_acks(env: Services, short: bool, rng: random.Random) -> Row:
    """4. The stamp landed, its response was lost: nothing stuck, at most one republish."""
    n = 200 if short else 1000
    ledger = Ledger(env, "lostack", n)
    try:
        env.rules(stamp_rule(ledger, action="lost_ack", probability=0.3, count=6 if short else 20))
        runs = ledger.drain_to_end(offset_step=WINDOW_SECONDS + 1, max_runs=20)
        fired = env.proxy.rules.snapshot()["rules"][0]["hits"]
        env.rules()
        lost, dup, delivered = ledger.outcome()
        ok = lost == 0 and delivered and dup <= 2 and not any(r.hung for r in runs)
        return Row(
            "lost acknowledgements on stamps",
            fired,
            n,
            lost,
            dup,
            f"{sum(1 for r in runs if r.failed)} failed runs of {len(runs)}",
            verdict(ok),
            [f"{fired} stamp responses dropped after the stamp landed"],
        )
    finally:
        env.rules()
        ledger.close()


def _throttle_rules(ledger: Ledger, status: int, probability: float, count: int) -> list[FaultRule]:
    extra: dict[str, Any] = {"retry_after_ms": 25, "substatus": 3200} if status == 429 else {}
    return [
        FaultRule(
            status=status,
            operations=("feed", "patch", "batch"),
            container=ledger.container_id,
            probability=probability,
            count=count,
            **extra,
        ),
        FaultRule(
            status=status,
            operations=("write",),
            container=ledger.leases_id,
            probability=probability,
            count=count,
            **extra,
        ),
    ]


def scenario_throttled(env: Services, short: bool, rng: random.Random, status: int) -> Row:
    """5. 429 (with retry-after) or 503 on feed reads, stamps and lease writes: retried within limits."""
    n = 300 if short else 1000
    ledger = Ledger(env, f"s{status}", n)
    try:
        probability, count = (0.25, 40) if status == 429 else (0.1, 8)
        env.rules(*_throttle_rules(ledger, status, probability, count))
        runs = ledger.drain_to_end(offset_step=WINDOW_SECONDS + 1)
        fired = sum(rule["hits"] for rule in env.proxy.rules.snapshot()["rules"])
        env.rules()
        lost, dup, delivered = ledger.outcome()
        failed = [r for r in runs if r.failed]
        # 429s are retried (the SDK's retry-after, then F-11's limits): no run may fail of them. A 503 may outlast the
        # SDK's retry of it and fail a run; nothing may be lost, and the next run finishes the work.
        ok = lost == 0 and delivered and (status != 429 or not failed) and not any(r.hung for r in runs)
        label = "429 + retry-after" if status == 429 else "503"
        return Row(
            f"{label} on feed reads, stamps, lease writes",
            fired,
            n,
            lost,
            dup,
            f"{len(failed)} failed runs of {len(runs)}",
            verdict(ok),
            [f"{fired} {status}s injected; errors {sorted({e[:80] for r in failed for e in r.errors()})}"],
        )
    finally:
        env.rules()
        ledger.close()


def scenario_two_drains(env: Services, short: bool, rng: random.Random) -> Row:
    """6. Two drains of one source at once (two scheduled processes; a scheduled drain and a backfill)."""
    n = 300 if short else 1200
    trials = 0
    notes: list[str] = []
    worst_dup, worst_lost, all_ok = 0, 0, True
    for label, second in (("twin", {}), ("backfill", {"mode": "backfill", "lease_prefix": "backfill-"})):
        ledger = Ledger(env, label, n, ranges=4)
        try:
            started = time.monotonic()
            a, b = ledger.start(max_batch_size=50), ledger.start(max_batch_size=50, **second)
            ra, rb = Ledger.finish(a, started), Ledger.finish(b, started)
            trials += 2
            runs = ledger.drain_to_end()
            lost, dup, delivered = ledger.outcome()
            worst_dup, worst_lost = max(worst_dup, dup), worst_lost + lost
            # A lease id ends with a digest of its feed range: its last 8 characters tell the ranges apart.
            drained_a = {s["lease"][-8:] for s in ra.summaries if s.get("published")}
            drained_b = {s["lease"][-8:] for s in rb.summaries if s.get("published")}
            held = len((ra.report or {}).get("held", [])) + len((rb.report or {}).get("held", []))
            refused = sum(
                1 for r in (ra, rb) for s in r.summaries if s.get("error_type") in ("LeaseHeldError", "LeaseLostError")
            )
            ok = lost == 0 and dup == 1 and delivered and not any(r.hung for r in (ra, rb, *runs))
            all_ok = all_ok and ok
            notes.append(
                f"{label}: leases published by A {sorted(drained_a)}, by B {sorted(drained_b)}; "
                f"{held + refused} lease takes refused as held"
            )
        finally:
            ledger.close()
    return Row(
        "two drains at once (2 processes; scheduled + backfill)",
        trials,
        2 * n,
        worst_lost,
        worst_dup,
        "n/a (no fault)",
        verdict(all_ok),
        notes,
    )


def fuzzed_documents(rng: random.Random, topic: str, count: int) -> list[dict[str, Any]]:
    """Outbox-looking documents with every field mangled some way, plus huge and deeply nested values."""

    def nested(depth: int) -> Any:
        value: Any = "leaf"
        for i in range(depth):
            value = {"k": value} if i % 2 else [value]
        return value

    weird: list[Any] = [
        None,
        True,
        0,
        -1.5,
        "",
        " ",
        "\ud800",
        "bad \udcff escape",
        [],
        {},
        nested(40),
        "x" * 300_000,
        ["y" * 1000] * 50,
    ]
    fields = ("Destination", "MessageBody", "MessageContentType", "MessageContext", "status", "_chatterType")
    docs: list[dict[str, Any]] = []
    for i in range(count):
        message_id = f"fuzz-{i}"
        doc = OutboxMessage(message_id, topic, json.dumps({"i": i}), "application/json", {}).to_document(
            PK_PATHS, f"tenant-{i % 16}"
        )
        for name in rng.sample(fields, rng.randint(1, 3)):
            doc[name] = rng.choice(weird)
        if rng.random() < 0.2:
            doc["extra"] = nested(rng.randint(10, 60))
        docs.append(doc)
    return docs


def _short(counts: Counter[str]) -> dict[str, int]:
    return {(k if len(k) <= 20 else k[:17] + "..."): v for k, v in counts.items()}


def scenario_fuzz(env: Services, short: bool, rng: random.Random) -> Row:
    """7. Fuzzed documents: the contract check never raises, and the lease always advances past them."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from airflow_chatter.outbox.contract import verify
    from airflow_chatter.outbox.document import is_pending_outbox

    examples = 300 if short else 3000
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
    keys = st.sampled_from(["id", "_chatterType", "status", "MessageId", "Destination", "MessageBody"])
    documents = st.dictionaries(keys | st.text(max_size=8), json_values, max_size=8).map(
        lambda d: {"_chatterType": "outbox", "status": "pending", **d}
    )
    raised: list[str] = []

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(documents)
    def never_raises(document: dict[str, Any]) -> None:
        try:
            verify(document)
        except Exception as error:  # noqa: BLE001 - the finding this scenario looks for
            raised.append(f"{type(error).__name__}: {error}"[:120])

    never_raises()

    count = 60 if short else 300
    probe = Ledger(env, "fuzz", 0)
    try:
        topic = probe.topic
        fuzzed = fuzzed_documents(rng, topic, count)
        valid = [probe.document(10_000 + i, 16) for i in range(count)]
        mixed = [doc for pair in zip(fuzzed, valid, strict=True) for doc in pair]
        refused = 0
        for doc in mixed:
            try:
                probe.container.create(doc, doc["tenantId"])
            except Exception:  # noqa: BLE001 - a document the emulator itself refuses never reaches the feed
                refused += 1
        probe.ids = [d["MessageId"] for d in valid]
        runs = probe.drain_to_end(offset_step=WINDOW_SECONDS + 1)
        lost, dup, delivered = probe.outcome()
        statuses = probe.statuses()
        # Still an outbox document the drain should have taken (documents whose type or id the fuzz broke are not).
        stuck = [d["id"] for d in probe.container.query("SELECT * FROM c") if is_pending_outbox(d)]
        ok = not raised and lost == 0 and delivered and not stuck and not any(r.hung for r in runs)
        return Row(
            "fuzzed documents (hypothesis + emulator)",
            examples + count,
            count * 2,
            lost,
            dup,
            f"contract raised {len(raised)}×; {len(stuck)} outbox documents left pending",
            verdict(ok),
            [
                f"{examples} hypothesis documents through verify(); {count} fuzzed + {count} valid documents "
                f"drained ({refused} refused by the emulator); final states {_short(statuses)}; "
                f"errors {sorted({e[:100] for r in runs for e in r.errors()})[:3]}; raised {raised[:3]}"
            ],
        )
    finally:
        probe.close()


def scenario_split_memory(short: bool) -> tuple[int, int, int, int]:
    """8a. A feed range split between two pages of one drain, in memory: (documents, lost, max duplicates, splits)."""
    from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
    from airflow_chatter.drain.engine import DrainEngine
    from airflow_chatter.drain.options import SourceOptions
    from airflow_chatter.testing.fakes import FakePublisher

    n = 400 if short else 2000
    monitored = MemoryDocumentContainer(partition_key_paths=PK_PATHS, default_ttl=-1)
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")
    for i in range(n):
        doc = OutboxMessage(f"mem-{i}", "t", "{}", "application/json", {}).to_document(PK_PATHS, f"tenant-{i % 64}")
        monitored.create(doc, doc["tenantId"])
    publisher = FakePublisher()
    engine = DrainEngine.open(
        SourceOptions(name="split-mem", partition_key_paths=PK_PATHS, max_batch_size=50), monitored, leases, publisher
    )
    splits = 0
    for _ in range(40):
        summaries = engine.drain_all(max_documents=100)
        if splits < 3:
            for feed_range in monitored.read_feed_ranges()[:1]:
                monitored.split_feed_range(feed_range)
                splits += 1
        if not any(s.published for s in summaries) and not any(
            d.get("status") == "pending" for d in monitored.query("SELECT * FROM c")
        ):
            break
    counts = Counter(dict(m.headers)["message-id"].decode() for m in publisher.sent)
    lost = sum(1 for i in range(n) if counts.get(f"mem-{i}", 0) == 0)
    return n, lost, max(counts.values(), default=0), splits


def scenario_split(env: Services, short: bool, rng: random.Random) -> Row:
    """8. A feed range split in the middle of a drain: nothing skipped (in memory, and on the emulator)."""
    mem_n, mem_lost, mem_dup, mem_splits = scenario_split_memory(short)
    n = 400 if short else 1500
    ledger = Ledger(env, "split", n, ranges=2)
    try:
        # Every request 10 ms slower while the first drain runs, so that the split lands in its middle.
        env.admin("POST", "config", {"latency_ms": 10})
        try:
            process = ledger.start(max_batch_size=20)
            started = time.monotonic()
            time.sleep(3.0)
            ranges = env.admin("GET", f"ranges?container={ledger.container_id}")["ranges"]
            pending_at_split = ledger.pending()
            env.admin("POST", "split", {"container": ledger.container_id, "range_id": ranges[0]["id"]})
            first = Ledger.finish(process, started)
        finally:
            env.admin("POST", "config", {"latency_ms": 0})
        runs = ledger.drain_to_end(max_batch_size=20)
        lost, dup, delivered = ledger.outcome()
        ok = mem_lost == 0 and lost == 0 and delivered and not first.hung and not any(r.hung for r in runs)
        return Row(
            "feed range split mid-drain (memory; emulator)",
            mem_splits + 1,
            mem_n + n,
            mem_lost + lost,
            max(mem_dup, dup),
            "n/a (no fault)",
            verdict(ok),
            [
                f"memory: {mem_splits} splits between pages over {mem_n} documents, {mem_lost} lost; emulator: range "
                f"{ranges[0]['id']} of 2 split under a running drain process with {pending_at_split} of {n} documents "
                f"still pending, {lost} lost, {len(runs)} runs after it"
            ],
        )
    finally:
        ledger.close()


SCENARIOS: dict[str, Callable[[Services, bool, random.Random], Row]] = {
    "sigkill": scenario_sigkill,
    "broker": scenario_broker_outage,
    "suspension": scenario_suspension,
    "lostack": scenario_lost_acks,
    "throttle429": lambda env, short, rng: scenario_throttled(env, short, rng, 429),
    "unavailable503": lambda env, short, rng: scenario_throttled(env, short, rng, 503),
    "twodrains": scenario_two_drains,
    "fuzz": scenario_fuzz,
    "split": scenario_split,
}


def print_table(rows: Sequence[Row]) -> None:
    header = ("fault", "trials", "documents", "lost", "max duplicates", "republishes while failing", "verdict")
    cells = [header] + [
        (
            r.fault,
            str(r.trials),
            str(r.documents),
            str(r.lost),
            str(r.max_duplicates),
            r.republishes_while_failing,
            r.verdict,
        )
        for r in rows
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in cells[1:]:
        print("| " + " | ".join(row) + " |")
    print()
    for r in rows:
        for note in r.notes:
            print(f"* {r.fault}: {note}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the test command's version: fewer documents and kills")
    parser.add_argument("--only", default="", help=f"comma-separated scenarios of {list(SCENARIOS)}")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    chosen = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}")
    rng = random.Random(args.seed)
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])}")
    rows: list[Row] = []
    started = time.monotonic()
    with services() as env:
        for name in chosen:
            t = time.monotonic()
            try:
                rows.append(SCENARIOS[name](env, args.short, rng))
            except Exception as error:  # noqa: BLE001 - a scenario that breaks is a FAIL row, not a lost table
                rows.append(
                    Row(name, 0, 0, -1, -1, "-", "FAIL", [f"the scenario raised {type(error).__name__}: {error}"])
                )
            print(f"({name}: {time.monotonic() - t:.0f} s)", file=sys.stderr, flush=True)
    print(f"wall time: {time.monotonic() - started:.0f} s")
    print_table(rows)
    return 0 if all(r.verdict == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
