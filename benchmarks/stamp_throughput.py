"""Store-bound throughput: batched stamps, request units, pacing. Ratios side by side, in one run.

    .venv/bin/python -m benchmarks.stamp_throughput [--n 2000] [--rounds 3] [--ceiling-n 10000] [--rss 10000,100000]
                                                   [--parts abcdfgh]

Real broker and the project emulator (its account-like switches: docs/emulator.md). Every figure is a ratio of two
measurements taken in this run, on the same N pending 1 KB documents; (a)-(d) are medians of interleaved rounds:

(a) batched ÷ sequential drain, 64 partition keys, no added latency                 target ≥ 5
(b) the same with 5 ms added latency per request                                    target ≥ 10
(c) every document on its own key at 5 ms: batched ÷ sequential                     target ≥ 3
    and ÷ the emulator's own concurrent point-patch rate (stamp_concurrency threads) target ≥ 0.7
(d) drain ÷ store ceiling (the same feed reads + batched patches, no Kafka), 64 keys target ≥ 0.7
    at 5 ms per request on both sides (with no added latency the pair measures the one process's GIL, not the
    store); its own N, --ceiling-n: both sides of a ratio always drain the same N
(f) max_request_units_per_second = half the unpaced drain's RU/s: measured RU/s ÷ cap      target 0.9..1.1, 0 429s
    (on --ceiling-n documents)
(g) provisioned RU/s a sixth of the unpaced rate, no cap: completes, 429s counted, nothing lost
(h) peak RSS draining 100k ÷ 10k (drain_throughput.py's measurement)                 target ≤ 1.15

``--parts`` names the figures to measure (default all: ``abcdfgh``; (a)-(c) are one set of rounds, (f) and (g)
one step); ``--parts d`` is the store-bound ratio alone, the one an optimisation must move (D-07).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_chatter.adapters.cosmos.container import (
    CosmosDocumentContainer,
    create_container,
    ensure_database,
)
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.stamps import StampRequest, StampWriter
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.ports import (
    BatchOperation,
    ChangeFeedStart,
    Document,
    DocumentContainer,
    OutgoingMessage,
    Publisher,
)
from benchmarks import drain_throughput as base
from devkit.services import (
    CosmosEndpoint,
    configure_emulator,
    cosmos_service,
    kafka_service,
    machine,
)

CONCURRENCY = 8
PAGE = 1000


# ============================================================================================== the emulator


class Emulator:
    """The project emulator: a client, a database, throwaway containers and the admin switches."""

    def __init__(self, endpoint: CosmosEndpoint) -> None:
        # COSMOS_ENDPOINT may name the project emulator too: this benchmark takes it for one.
        self.endpoint = CosmosEndpoint(endpoint.url, endpoint.key, endpoint.verify, is_emulator=True)
        self.client = self.new_client()
        self.database = ensure_database(self.client, "airflow-chatter-bench")

    def new_client(self, *, sdk_throttle_retries: int | None = None) -> Any:
        kwargs: dict[str, Any] = {}
        if sdk_throttle_retries is not None:
            from azure.cosmos.documents import ConnectionPolicy, RetryOptions

            policy = ConnectionPolicy()
            policy.RetryOptions = RetryOptions(max_retry_attempt_count=sdk_throttle_retries)
            kwargs["connection_policy"] = policy
        kwargs["connection_timeout"] = 30
        return self.endpoint.client(**kwargs)

    def configure(self, **settings: Any) -> None:
        configure_emulator(self.endpoint, **settings)

    def container(self, client: Any = None) -> tuple[Any, CosmosDocumentContainer]:
        proxy = create_container(self.database, f"bench-{uuid.uuid4().hex[:10]}", ("/tenantId",), default_ttl=-1)
        if client is not None:
            proxy = client.get_database_client(self.database.id).get_container_client(proxy.id)
        return proxy, CosmosDocumentContainer(proxy)

    def drop(self, proxy: Any) -> None:
        self.database.delete_container(proxy.id)


def document(i: int, topic: str, keys: int | None) -> Document:
    """The i-th pending 1 KB document, on one of ``keys`` partition keys (``None``: its own key)."""
    doc = base.outbox_document(i, topic)
    tenant = f"tenant-{i % keys}" if keys is not None else f"own-{i}"
    doc["tenantId"] = tenant
    return doc


def seed(container: CosmosDocumentContainer, n: int, topic: str, keys: int | None) -> None:
    """Create N pending documents quickly: batched creates per key, concurrently."""
    groups: dict[str, list[Document]] = {}
    for i in range(n):
        doc = document(i, topic, keys)
        groups.setdefault(doc["tenantId"], []).append(doc)

    def create(docs: list[Document]) -> None:
        for start in range(0, len(docs), 100):
            chunk = docs[start : start + 100]
            if len(chunk) == 1:
                container.create(chunk[0], chunk[0]["tenantId"])
            else:
                container.execute_batch(chunk[0]["tenantId"], [BatchOperation.create(d) for d in chunk])

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(create, groups.values()))


def options(name: str, **kwargs: Any) -> SourceOptions:
    return SourceOptions(name, ("/tenantId",), max_batch_size=PAGE, stamp_concurrency=CONCURRENCY, **kwargs)


def drain(monitored: DocumentContainer, publisher: Publisher, n: int, **kwargs: Any) -> tuple[float, DrainSummary]:
    engine = DrainEngine.open(
        options(f"bench-{uuid.uuid4().hex[:6]}", **kwargs), monitored, base.lease_container(), publisher, owner="bench"
    )
    engine.ensure_leases()
    started = time.perf_counter()
    summaries = engine.drain_all()
    elapsed = time.perf_counter() - started
    failed = [s.to_dict() for s in summaries if s.error is not None]
    delivered = sum(s.delivered for s in summaries)
    assert delivered == n and not failed, (delivered, failed)
    total = summaries[0]
    for other in summaries[1:]:
        total = other if other.request_units > total.request_units else total
    units = sum(s.request_units for s in summaries)
    throttled = sum(s.throttled for s in summaries)
    return elapsed, DrainSummary(lease=total.lease, delivered=delivered, request_units=units, throttled=throttled)


def emulator_drain(
    emu: Emulator,
    bootstrap: str,
    n: int,
    keys: int | None,
    latency_ms: int,
    *,
    client: Any = None,
    settings: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[float, DrainSummary]:
    proxy, container = emu.container(client)
    try:
        topic = base.new_topic(bootstrap, "stamps")
        emu.configure(latency_ms=0, provisioned_ru_per_second=None)
        seed(container, n, topic, keys)
        emu.configure(latency_ms=latency_ms, **(settings or {}))
        publisher = KafkaPublisher(base.producer_settings(bootstrap))
        try:
            assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
            return drain(container, publisher, n, **kwargs)
        finally:
            publisher.close()
            emu.configure(latency_ms=0, provisioned_ru_per_second=None)
    finally:
        emu.drop(proxy)


def point_patch_rate(emu: Emulator, n: int, latency_ms: int) -> float:
    """The emulator's own rate for one-by-one delivered patches on CONCURRENCY threads (no drain, no Kafka)."""
    proxy, container = emu.container()
    try:
        seed(container, n, "unused", None)
        emu.configure(latency_ms=latency_ms)
        ids = [(document(i, "unused", None)["id"], f"own-{i}") for i in range(n)]
        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda item: container.patch(item[0], item[1], base.DELIVERED), ids))
        return n / (time.perf_counter() - started)
    finally:
        emu.configure(latency_ms=0)
        emu.drop(proxy)


def store_ceiling(emu: Emulator, n: int, keys: int, latency_ms: int) -> float:
    """The same feed reads and batched patches as the drain, with no Kafka and no engine."""
    proxy, container = emu.container()
    try:
        seed(container, n, "unused", keys)
        emu.configure(latency_ms=latency_ms)
        writer = StampWriter(container, "batched", CONCURRENCY)
        (feed_range,) = container.read_feed_ranges()
        started = time.perf_counter()
        continuation: str | None = None
        done = 0
        while True:
            page = container.read_change_feed(
                feed_range, continuation=continuation, start=ChangeFeedStart.BEGINNING, max_item_count=PAGE
            )
            continuation = page.continuation
            if not page.documents:
                break
            # The stamps come back through the feed, as the drain sees them; like the drain, skip what is not pending.
            pending = [d for d in page.documents if d.get("status") == "pending"]
            requests = [StampRequest(d["id"], d["tenantId"], base.DELIVERED, "delivered") for d in pending]
            done += sum(1 for outcome in writer.write(requests) if outcome.landed)
        elapsed = time.perf_counter() - started
        writer.close()
        assert done == n, done
        return n / elapsed
    finally:
        emu.configure(latency_ms=0)
        emu.drop(proxy)


# ============================================================================================== report


def row(label: str, value: float, target: str) -> str:
    return f"{label:<64} = {value:7.2f}   (target {target})"


def print_header() -> None:
    """The first lines of an emulator benchmark's report: the machine and the command line, printed as they come."""
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")


@contextmanager
def bench_services() -> Iterator[tuple[str, Emulator]]:
    """The real broker's bootstrap address and the project emulator, reporting request charges, with no added
    latency and no throughput limit (the state each emulator benchmark starts from)."""
    with kafka_service() as bootstrap, cosmos_service() as endpoint:
        emu = Emulator(endpoint)
        emu.configure(request_charges=True, latency_ms=0, provisioned_ru_per_second=None)
        yield bootstrap, emu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="documents per emulator measurement")
    parser.add_argument("--ceiling-n", type=int, default=10000, help="documents for the drain ÷ store ceiling pair")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the emulator pairs (medians)")
    parser.add_argument("--rss", default="10000,100000", help="small,large N for the RSS ratio ('' to skip)")
    parser.add_argument("--parts", default="abcdfgh", help="the figures to measure, by letter (default: all)")
    args = parser.parse_args()
    unknown = set(args.parts) - set("abcdfgh")
    if unknown or not args.parts:
        parser.error(f"--parts takes letters of 'abcdfgh', got {args.parts!r}")
    parts = set(args.parts)
    n = args.n
    print_header()
    lines: list[str] = []
    with bench_services() as (bootstrap, emu):
        # Interleaved rounds, medians of each round's ratios: the pairs are measured next to each other, so a
        # load spike from the shared machine hits both sides of one ratio, and one noisy round does not decide it.
        ratios: dict[str, list[float]] = {}
        unpaced_ru_per_s = ru_per_doc = 0.0
        for round_no in range(1, (args.rounds if parts & set("abc") else 0) + 1):
            for label, keys, latency in (
                ("64 keys, 0 ms", 64, 0),
                ("64 keys, 5 ms", 64, 5),
                ("own keys, 5 ms", None, 5),
            ):
                seq_s, _ = emulator_drain(emu, bootstrap, n, keys, latency, stamp_mode="sequential")
                bat_s, bat = emulator_drain(emu, bootstrap, n, keys, latency, stamp_mode="batched")
                ratios.setdefault(label, []).append(seq_s / bat_s)
                line = f"round {round_no} drain {label:<15} sequential {n / seq_s:8,.0f} doc/s"
                line += f"   batched {n / bat_s:8,.0f} doc/s"
                if label == "64 keys, 0 ms" and round_no == 1:
                    unpaced_ru_per_s = bat.request_units / bat_s
                    ru_per_doc = bat.request_units / n
                if label == "own keys, 5 ms":
                    patch_rate = point_patch_rate(emu, n, 5)
                    ratios.setdefault("own/patches", []).append((n / bat_s) / patch_rate)
                    line += f"   point patches ({CONCURRENCY} threads) {patch_rate:8,.0f}/s"
                print(line)
            print(f"round {round_no} load average {os.getloadavg()[0]:.1f}")
        # (d) on more documents: at 2,000 a drain takes half a second against this emulator, which is then mostly
        # its warm-up and its garbage collector (the pair's ratio varied 0.5-0.8 round to round); at 10,000 it
        # settles. Both sides drain the same N, interleaved, medians.
        for round_no in range(1, (args.rounds if "d" in parts else 0) + 1):
            m, latency = args.ceiling_n, 5
            bat_s, _ = emulator_drain(emu, bootstrap, m, 64, latency, stamp_mode="batched")
            ceiling = store_ceiling(emu, m, 64, latency)
            ratios.setdefault("drain/ceiling", []).append((m / bat_s) / ceiling)
            print(
                f"round {round_no} N={m:,}, {latency} ms: batched drain {m / bat_s:8,.0f} doc/s   "
                f"store ceiling {ceiling:8,.0f} doc/s   load average {os.getloadavg()[0]:.1f}"
            )

        def median(key: str) -> float:
            return statistics.median(ratios[key])

        if parts & set("abc"):
            lines += [
                row("(a) batched ÷ sequential, 64 keys, 0 ms", median("64 keys, 0 ms"), "≥ 5"),
                row("(b) batched ÷ sequential, 64 keys, 5 ms", median("64 keys, 5 ms"), "≥ 10"),
                row("(c) batched ÷ sequential, own keys, 5 ms", median("own keys, 5 ms"), "≥ 3"),
                row("(c) batched own keys ÷ emulator point patches, 5 ms", median("own/patches"), "≥ 0.7"),
            ]
        if "d" in parts:
            lines.append(
                row(f"(d) drain ÷ store ceiling, 64 keys, 5 ms, N={args.ceiling_n:,}", median("drain/ceiling"), "≥ 0.7")
            )
        if parts & set("fg"):
            if not unpaced_ru_per_s:
                bat_s, bat = emulator_drain(emu, bootstrap, n, 64, 0, stamp_mode="batched")
                unpaced_ru_per_s, ru_per_doc = bat.request_units / bat_s, bat.request_units / n
            print(f"unpaced batched drain: {unpaced_ru_per_s:,.0f} RU/s, {ru_per_doc:.2f} RU per delivered document")
        if "f" in parts:
            cap = unpaced_ru_per_s / 2
            # (f) drains the larger N: the run ends in debt by the charges still in flight (up to stamp_concurrency
            # stamps and a feed read), a share of the total that only a run of several seconds makes small.
            paced_n = max(n, args.ceiling_n)
            paced_s, paced = emulator_drain(emu, bootstrap, paced_n, 64, 0, max_request_units_per_second=cap)
            paced_rate = paced.request_units / paced_s
            print(f"paced at {cap:,.0f} RU/s: measured {paced_rate:,.0f} RU/s, 429s {paced.throttled}")
            lines.append(
                row("(f) paced RU/s ÷ cap", paced_rate / cap, "0.9..1.1, 0 429s") + f"  429s={paced.throttled}"
            )
        if "g" in parts:
            # A sixth of the unpaced rate: the run then spans several of the emulator's 1 s throttle windows.
            provisioned = max(50.0, unpaced_ru_per_s / 6)
            throttled_s, throttled = emulator_drain(
                emu,
                bootstrap,
                n,
                64,
                0,
                client=emu.new_client(sdk_throttle_retries=0),
                settings={"provisioned_ru_per_second": provisioned},
                max_throttle_retries=1000,
                max_throttle_wait_seconds=3600,
            )
            print(
                f"provisioned {provisioned:,.0f} RU/s, no cap: delivered {throttled.delivered}/{n}, "
                f"429s counted {throttled.throttled}, {n / throttled_s:,.0f} doc/s"
            )
            lines.append(
                row("(g) provisioned below the rate: delivered ÷ N", throttled.delivered / n, "1.00, 429s > 0")
                + f"  429s={throttled.throttled}"
            )
        if args.rss and "h" in parts:
            small, large = (int(x) for x in args.rss.split(","))
            rss_small, rss_large = base.measure_rss(small, bootstrap), base.measure_rss(large, bootstrap)
            lines.append(row(f"(h) peak RSS {large} ÷ {small}", rss_large / rss_small, "≤ 1.15"))
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
