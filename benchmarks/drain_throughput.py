"""Drain throughput and memory, measured side by side in one run. A script that prints ratios; not a test.

    .venv/bin/python -m benchmarks.drain_throughput [--n 20000] [--naive-n 1000] [--emulator-n 2000]

(a) drain rate ÷ raw kafka-python produce rate of the same N 1 KB messages        target ≥ 0.8
(b) drain rate ÷ a naive loop (send, flush, patch one document at a time)         target ≥ 10
    (the drain, the bare relay and the naive loop read a container stub that does no work, ``SyntheticSource``)
(c) peak RSS draining 100k ÷ draining 10k documents (each in its own subprocess)  target ≤ 1.15
(d) the same drain against the Cosmos emulator, with the main thread's time split between store, publisher and engine.

Kafka: ``KAFKA_BOOTSTRAP_SERVERS`` or the project broker (``scripts/kafka.sh start``). The emulator:
``COSMOS_ENDPOINT``/``COSMOS_KEY`` or ``scripts/cosmos-emulator.sh start`` (``devkit.services``). A
service this script started is stopped at the end unless a test session registered itself as a user of it meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.telemetry import DrainTelemetry
from airflow_chatter.outbox.contract import Deliverable, verify
from airflow_chatter.outbox.document import OutboxMessage, is_pending_outbox
from airflow_chatter.outbox.mapping import to_outgoing_message
from airflow_chatter.outbox.partition_keys import partition_key_recoverer
from airflow_chatter.ports import (
    BatchOperation,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    OutgoingMessage,
    PartitionKey,
    PatchOperation,
    Publisher,
    PublishOutcome,
)
from devkit.services import CHECKOUT, CosmosEndpoint, cosmos_service, kafka_service

TENANTS = 64
BODY_BYTES = 1024
BATCH = 1000  # the largest page SourceOptions allows: one send_batch + flush per page
#: The drain's delivered stamp with the default options (RLY-03), for the relays that stand beside it.
DELIVERED = (PatchOperation("set", "/status", "delivered"), PatchOperation("set", "/ttl", 86400))


# ============================================================================================== fixtures


def outbox_document(i: int, topic: str) -> Document:
    """The i-th pending outbox document: a 1 KB body, keyed by one of 64 tenants."""
    tenant = f"tenant-{i % TENANTS}"
    head = json.dumps({"order": i, "tenant": tenant, "pad": ""})
    body = head[:-2] + "x" * (BODY_BYTES - len(head)) + '"}'
    return OutboxMessage(f"bench-{i}", topic, body, "application/json", {"seq": i}).to_document(("/tenantId",), tenant)


def outgoing(doc: Document) -> OutgoingMessage:
    """The Kafka record the drain makes of ``doc`` (for the raw and naive baselines)."""
    verdict = verify(doc)
    assert isinstance(verdict, Deliverable)
    return to_outgoing_message(verdict, doc["tenantId"], "partition_key")


def lease_container() -> MemoryDocumentContainer:
    return MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")


def source(name: str) -> SourceOptions:
    return SourceOptions(name=name, partition_key_paths=("/tenantId",), max_batch_size=BATCH)


def producer_settings(bootstrap: str) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=bootstrap, client_id="chatter-bench")


def new_topic(bootstrap: str, label: str) -> str:
    name = f"chatter-bench.{label}.{uuid.uuid4().hex[:10]}"
    ensure_topics(producer_settings(bootstrap), [name], partitions=3)
    return name


# ============================================================================================== timing proxies


class Stopwatch:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def add(self, what: str, seconds: float) -> None:
        # A plain call, not a context manager: the proxies below run once per document, and their own cost is
        # the benchmark's, not the drain's (raw kafka-python pays none).
        self.seconds[what] += seconds
        self.count[what] += 1


class TimedPublisher(Publisher):
    def __init__(self, inner: Publisher, watch: Stopwatch) -> None:
        self.inner, self.watch = inner, watch

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        started = time.perf_counter()
        try:
            return self.inner.send_batch(messages)
        finally:
            self.watch.add("publisher.send_batch", time.perf_counter() - started)

    def close(self) -> None:
        self.inner.close()


class SyntheticSource(DocumentContainer):
    """A monitored container that does no work: its N documents are generated when a page is read (as a client
    decodes them), stamps are acknowledged without being stored, so its memory is O(1).

    Every drain and relay of this script reads it, not the in-memory test double: a double is built to be right, not
    fast, so a drain over it measures the double (the double's batch path is most of such a drain's time). For the
    RSS ratio, documents held in memory would measure the fixture, not the engine.
    """

    def __init__(self, n: int, topic: str) -> None:
        self.n, self.topic = n, topic

    def properties(self) -> ContainerProperties:
        return ContainerProperties("memory://synthetic/", "bench", "synthetic", ("/tenantId",), -1)

    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        return [FeedRange("all")]

    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        return parent == child

    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        return a if a == b else None

    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        first = int(continuation or 0)
        last = min(self.n, first + max_item_count)
        return ChangeFeedPage(self._documents_between(first, last), str(last))

    def _documents_between(self, first: int, last: int) -> tuple[Document, ...]:
        """The documents ``first`` to ``last`` (exclusive) of the feed, built now."""
        return tuple(self._doc(i) for i in range(first, last))

    def _doc(self, i: int) -> Document:
        doc = outbox_document(i, self.topic)
        doc.update(_etag=f"e{i}", _ts=int(time.time()), _lsn=i + 1)
        return doc

    def patch(
        self,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> Document:
        return {"id": item_id, "status": operations[0].value, "_etag": "stamped"}

    def execute_batch(self, partition_key: PartitionKey, operations: Sequence[Any]) -> list[BatchOperationResult]:
        """The batched stamps (F-10, the default): acknowledged without being stored, like ``patch``."""
        return [
            BatchOperationResult(200, "stamped", {"id": op.id, "status": "delivered", "_etag": "stamped"})
            for op in operations
        ]

    def _unused(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not used by a drain")

    create = read = replace = upsert = delete = query = _unused  # type: ignore[assignment]


# ============================================================================================== measurements


def measure_drain(
    monitored: DocumentContainer, publisher: Publisher, n: int, name: str, topic: str
) -> tuple[float, Stopwatch]:
    """Drain ``monitored`` once; the stopwatch holds the main thread's time at the engine's three seams.

    ``store.feed`` is the main thread reading a page (or waiting for the page read ahead), ``store.stamps`` it writing
    a page's stamps (one of the stamp lanes, then waiting for the others), ``publisher.send_batch`` it publishing.
    A proxy around the container would sum the stamp lanes' and the read-ahead's time with the main thread's (and
    book more than the wall time); these are what the drain waits for, so the rest is the engine's own work.
    """
    # Warm up like the raw baseline does: producer connected, topic metadata known, before the clock starts.
    warm = publisher.send_batch([OutgoingMessage(topic, b"warm-up")])
    assert warm[0].confirmed, warm
    watch = Stopwatch()
    engine = DrainEngine.open(
        source(name), monitored, lease_container(), TimedPublisher(publisher, watch), owner="bench"
    )
    # The engine's own seams, timed on this instance only (attributes shadowing the bound methods).
    engine._feed.read = timed(engine._feed.read, watch, "store.feed")  # type: ignore[method-assign]
    engine._stamps.write = timed(engine._stamps.write, watch, "store.stamps")  # type: ignore[method-assign]
    engine.ensure_leases()
    started = time.perf_counter()
    try:
        summaries = engine.drain_all()
    finally:
        engine.close()
    elapsed = time.perf_counter() - started
    published = sum(s.published for s in summaries)
    failed = [s.to_dict() for s in summaries if s.error is not None]
    assert published == n and not failed, (published, failed)
    return elapsed, watch


def timed(call: Any, watch: Stopwatch, what: str) -> Any:
    """``call``, with the calling thread's time in it added to ``watch`` under ``what``."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            watch.add(what, time.perf_counter() - started)

    return timed


def measure_raw_produce(bootstrap: str, messages: Sequence[OutgoingMessage]) -> float:
    """kafka-python alone: the same records with the same producer settings, sent then flushed once."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**producer_settings(bootstrap).producer_config())
    try:
        producer.send(messages[0].topic, value=b"warm-up").get(timeout=30)
        started = time.perf_counter()
        futures = [producer.send(m.topic, value=m.value, key=m.key, headers=list(m.headers)) for m in messages]
        producer.flush()
        assert all(f.succeeded() for f in futures)
        return time.perf_counter() - started
    finally:
        producer.close()


def measure_publisher_pages(bootstrap: str, messages: Sequence[OutgoingMessage]) -> float:
    """``KafkaPublisher.send_batch`` alone over pre-built records, in the drain's pages: the ceiling of any drain
    through it (no container, no engine), so (a) splits into what the page-at-a-time publish with a confirmation per
    message costs and what the engine and the container add."""
    publisher = KafkaPublisher(producer_settings(bootstrap))
    try:
        assert publisher.send_batch([OutgoingMessage(messages[0].topic, b"warm-up")])[0].confirmed
        started = time.perf_counter()
        for first in range(0, len(messages), BATCH):
            outcomes = publisher.send_batch(messages[first : first + BATCH])
            assert all(o.confirmed for o in outcomes)
        return time.perf_counter() - started
    finally:
        publisher.close()


def measure_bare_relay(bootstrap: str, container: DocumentContainer, n: int, topic: str) -> float:
    """The per-document work the contract asks of a drain, with none of the engine around it; its seconds.

    Per page of 1000 from the change feed: the pending gate (PND-01), the lag reading into its histogram (MET-01), the
    partition key from its path, the contract check and the record mapping, one ``send_batch``, the delivered patches
    in transactional batches of up to 100 per key (F-10), every result assumed to succeed. No lease, checkpoint,
    suspension gate, summary, per-document outcome, fail-closed bookkeeping or threads. The drain's rate over this
    one is what the engine's structure costs; this one over raw is what the required work costs.
    """
    record_lag = DrainTelemetry().record_lag
    partition_key_of = partition_key_recoverer(("/tenantId",))
    feed = container.read_feed_ranges()[0]
    publisher = KafkaPublisher(producer_settings(bootstrap))
    try:
        assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
        started = time.perf_counter()
        continuation: str | None = None
        done = 0
        while True:
            page = container.read_change_feed(feed, continuation=continuation, max_item_count=BATCH)
            continuation = page.continuation
            if not page.documents:
                break
            planned: list[tuple[Document, PartitionKey]] = []
            messages = []
            for doc in page.documents:
                if not is_pending_outbox(doc):
                    continue
                record_lag(max(0.0, time.time() - doc["_ts"]))
                key = partition_key_of(doc)
                verdict = verify(doc)
                assert isinstance(verdict, Deliverable)
                planned.append((doc, key))
                messages.append(to_outgoing_message(verdict, key, "partition_key"))
            outcomes = publisher.send_batch(messages)
            assert all(o.confirmed for o in outcomes)
            stamp_in_batches(container, planned, DELIVERED)
            done += len(planned)
        elapsed = time.perf_counter() - started
        assert done == n, (done, n)
        return elapsed
    finally:
        publisher.close()


def stamp_in_batches(
    container: DocumentContainer, planned: Sequence[tuple[Document, PartitionKey]], operations: Sequence[PatchOperation]
) -> None:
    """The bare relay's stamps: ``operations`` patched onto each ``(document, key)`` in transactional batches of up to
    100 per key."""
    groups: dict[PartitionKey, list[Document]] = {}
    for doc, key in planned:
        groups.setdefault(key, []).append(doc)
    for key, docs in groups.items():
        for first in range(0, len(docs), 100):
            container.execute_batch(key, [BatchOperation.patch(d["id"], operations) for d in docs[first : first + 100]])


def measure_naive_loop(bootstrap: str, container: DocumentContainer, n: int) -> float:
    """What a hand-written relay does: per document send, wait for the ack, patch."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**producer_settings(bootstrap).producer_config())
    feed = container.read_feed_ranges()[0]
    documents = container.read_change_feed(feed, max_item_count=n).documents
    try:
        producer.send(outgoing(documents[0]).topic, value=b"warm-up").get(timeout=30)
        started = time.perf_counter()
        for doc in documents:
            m = outgoing(doc)
            producer.send(m.topic, value=m.value, key=m.key, headers=list(m.headers))
            producer.flush()
            container.patch(doc["id"], doc["tenantId"], DELIVERED)
        return time.perf_counter() - started
    finally:
        producer.close()


def rss_child(n: int, bootstrap: str) -> None:
    """Subprocess body: drain ``n`` synthetic documents to Kafka, print peak RSS in KiB."""
    topic = new_topic(bootstrap, f"rss{n}")
    publisher = KafkaPublisher(producer_settings(bootstrap))
    try:
        measure_drain(SyntheticSource(n, topic), publisher, n, f"rss-{n}", topic)
    finally:
        publisher.close()
    print(json.dumps({"n": n, "peak_rss_kib": peak_rss_kib()}))


def peak_rss_kib() -> int:
    """This process's peak RSS. ``VmHWM`` resets at exec; ``ru_maxrss`` would inherit the parent's at fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def measure_rss(n: int, bootstrap: str) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.drain_throughput", "--rss-child", str(n), "--bootstrap", bootstrap],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return int(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_kib"])


def measure_emulator(endpoint: CosmosEndpoint, bootstrap: str, n: int) -> tuple[float, Stopwatch]:
    from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, create_container, ensure_database

    database = ensure_database(endpoint.client(), "airflow-chatter-bench")
    proxy = create_container(database, f"bench-{uuid.uuid4().hex[:10]}", ("/tenantId",), default_ttl=-1)
    try:
        monitored = CosmosDocumentContainer(proxy)
        topic = new_topic(bootstrap, "emulator")
        for i in range(n):
            doc = outbox_document(i, topic)
            monitored.create(doc, doc["tenantId"])
        publisher = KafkaPublisher(producer_settings(bootstrap))
        try:
            return measure_drain(monitored, publisher, n, "emulator", topic)
        finally:
            publisher.close()
    finally:
        database.delete_container(proxy.id)


# ============================================================================================== report


def breakdown(elapsed: float, watch: Stopwatch) -> str:
    store = watch.seconds.get("store.feed", 0.0) + watch.seconds.get("store.stamps", 0.0)
    publisher = watch.seconds.get("publisher.send_batch", 0.0)
    engine = max(0.0, elapsed - store - publisher)
    return f"store {store / elapsed:5.1%}  publisher {publisher / elapsed:5.1%}  engine {engine / elapsed:5.1%}"


def stub_drain_round(bootstrap: str, n: int) -> tuple[float, str]:
    topic = new_topic(bootstrap, "drain")
    publisher = KafkaPublisher(producer_settings(bootstrap))
    try:
        seconds, watch = measure_drain(SyntheticSource(n, topic), publisher, n, "stub", topic)
    finally:
        publisher.close()
    return n / seconds, breakdown(seconds, watch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--naive-n", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rss", default="10000,100000")
    parser.add_argument("--emulator-n", type=int, default=2_000)
    parser.add_argument("--rss-child", type=int)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.bootstrap)
        return

    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}, "
        f"Python {platform.python_version()}"
    )
    with kafka_service() as bootstrap:
        print(f"kafka: {bootstrap}; N={args.n} documents of {BODY_BYTES} B body, {TENANTS} keys, pages of {BATCH}")

        # Interleaved rounds, medians: this box is shared, so a single sequential pass mostly measures who else ran.
        # The naive loop runs in every round too: it is bound by one acks=all round trip per message, which drifts
        # with the broker's and the box's state, so (b) is also reported per round, from figures taken together.
        drain_rates: list[float] = []
        raw_rates: list[float] = []
        naive_rates: list[float] = []
        pages_rates: list[float] = []
        bare_rates: list[float] = []
        for round_no in range(1, args.rounds + 1):
            rate, split = stub_drain_round(bootstrap, args.n)
            drain_rates.append(rate)
            raw_topic = new_topic(bootstrap, "raw")
            messages = [outgoing(outbox_document(i, raw_topic)) for i in range(args.n)]
            raw_rates.append(args.n / measure_raw_produce(bootstrap, messages))
            pages_topic = new_topic(bootstrap, "pages")
            page_messages = [outgoing(outbox_document(i, pages_topic)) for i in range(args.n)]
            pages_rates.append(args.n / measure_publisher_pages(bootstrap, page_messages))
            bare_topic = new_topic(bootstrap, "bare")
            bare_rates.append(
                args.n / measure_bare_relay(bootstrap, SyntheticSource(args.n, bare_topic), args.n, bare_topic)
            )
            naive_topic = new_topic(bootstrap, "naive")
            naive_rates.append(
                args.naive_n / measure_naive_loop(bootstrap, SyntheticSource(args.naive_n, naive_topic), args.naive_n)
            )
            print(
                f"round {round_no}: drain(stub) {rate:7,.0f} [{split}]   raw {raw_rates[-1]:7,.0f}   "
                f"publisher {pages_rates[-1]:7,.0f}   bare relay {bare_rates[-1]:7,.0f}   "
                f"naive {naive_rates[-1]:5,.0f} msg/s   "
                f"(a) {rate / raw_rates[-1]:.2f}  (b) {rate / naive_rates[-1]:.2f}"
            )
        drain_rate, raw_rate, naive_rate, pages_rate, bare_rate = (
            statistics.median(drain_rates),
            statistics.median(raw_rates),
            statistics.median(naive_rates),
            statistics.median(pages_rates),
            statistics.median(bare_rates),
        )
        print(f"drain (stub → kafka)        {drain_rate:7,.0f} msg/s (median)")
        print(f"raw kafka-python            {raw_rate:7,.0f} msg/s (median)")
        print(f"KafkaPublisher alone, pages {pages_rate:7,.0f} msg/s (median; pre-built records, pages of {BATCH})")
        print(f"bare relay, same doc work   {bare_rate:7,.0f} msg/s (median; no lease, checkpoint or gate)")
        print(f"naive send+flush+patch      {naive_rate:7,.0f} msg/s (median, N={args.naive_n} per round)")

        small, large = (int(x) for x in args.rss.split(","))
        rss_small, rss_large = measure_rss(small, bootstrap), measure_rss(large, bootstrap)
        print(
            f"peak RSS {small:,}: {rss_small / 1024:.1f} MiB   {large:,}: {rss_large / 1024:.1f} MiB "
            "(synthetic O(1) source, so the engine's own memory is measured)"
        )

        emulator_line = "emulator: skipped"
        if args.emulator_n:
            with cosmos_service() as endpoint:
                emu_s, emu_watch = measure_emulator(endpoint, bootstrap, args.emulator_n)
                emulator_line = (
                    f"drain (emulator → kafka) {args.emulator_n / emu_s:9,.0f} msg/s   "
                    f"(N={args.emulator_n}) [{breakdown(emu_s, emu_watch)}]"
                )
        print(emulator_line)

    print()
    print(f"(a) drain ÷ raw produce      = {drain_rate / raw_rate:6.2f}   target ≥ 0.8")
    print(f"    publisher alone ÷ raw     = {pages_rate / raw_rate:6.2f}   (the ceiling of any drain through it)")
    print(f"    bare relay ÷ raw          = {bare_rate / raw_rate:6.2f}   (the required per-document work alone)")
    print(f"    drain ÷ bare relay        = {drain_rate / bare_rate:6.2f}   (what the engine around that work costs)")
    print(f"(b) drain ÷ naive loop       = {drain_rate / naive_rate:6.2f}   target ≥ 10")
    print(f"(c) peak RSS {large:,} ÷ {small:,} = {rss_large / rss_small:6.2f}   target ≤ 1.15")


if __name__ == "__main__":
    main()
