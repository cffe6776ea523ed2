"""What the drain engine costs over the least relay, and what its two threads cost, side by side in one run.

    .venv/bin/python benchmarks/engine_overhead.py [--n 20000] [--rounds 7] [--publisher kafka|none]
                                                   [--stub prebuilt|generated]

A script that prints ratios; not a test. It takes apart stamp_throughput.py's (e) (drain ÷ bare relay against a
container that does no work, target ≥ 0.9): every variant reads the same no-work stub (drain_throughput.py's
``PrebuiltSource``: the documents built before the clock starts, a page read is a slice, every batch acknowledged
at once; ``--stub generated``: ``SyntheticSource``, which builds each page's documents when it is read, on the
thread that reads it) and publishes through the real broker (``--publisher kafka``, the default), or through a
publisher stub that confirms every message at once (``--publisher none``, ``NoWorkPublisher``: the engine without
kafka-python and its sender thread). Variants, interleaved in every round:

* ``bare relay``: drain_throughput's ``batched_bare_relay`` (the other side of stamp_throughput's (e)), the least a
  relay does that does the contract's per-document work (read a page; per document the pending gate, the lag, the
  partition key, the contract check and the mapping; send, wait, patch in batches per key);
* ``drain``: ``DrainEngine`` as shipped (F-10: batched stamps on ``stamp_concurrency`` 8 lanes, the next page read
  ahead on a background thread while this one is published and stamped);
* ``drain, no read-ahead``: the same engine with its feed reader's read-ahead off;
* ``drain, stamp_concurrency 1``: every chunk of stamps written on the calling thread;
* ``drain, neither thread``: both;
* ``drain, bare page path``: an upper bound, not a drain. The engine as shipped (leases, checkpoints, the gate, the
  read-ahead, metered requests, the lag summary) with each page's documents handled the bare relay's way instead of
  through ``PublishRun``, send spans, the run's stamp sheet and the stamp writer's lanes: the default publisher
  only, no per-document outcomes, stamps in batches per key (``stamp_in_batches``). What a page path without
  per-document objects could reach; it is what the rest of the engine costs.

For each: its median and best µs per document over the rounds, bare relay ÷ it (what (e) is for the shipped drain),
the main thread's wall time per document at the three store / broker seams (waiting for or reading a feed page,
``send_batch``, writing a page's stamps) and the rest (the engine's or the relay's own work), and the process's CPU
time per document (every thread's). The two threads exist to overlap a real store's waits (docs/benchmarks.md,
D-02); against a store that answers from the CPU there is nothing to overlap, and what they cost shows here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import drain_throughput as base  # noqa: E402
import stamp_throughput as stamps  # noqa: E402

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher  # noqa: E402
from airflow_chatter.drain.engine import DrainEngine  # noqa: E402
from airflow_chatter.drain.options import SourceOptions  # noqa: E402
from airflow_chatter.drain.summary import DrainCounts  # noqa: E402
from airflow_chatter.drain.suspension import ConfirmationReceipt  # noqa: E402
from airflow_chatter.outbox.contract import Deliverable, verify  # noqa: E402
from airflow_chatter.outbox.document import is_pending_outbox  # noqa: E402
from airflow_chatter.outbox.mapping import to_outgoing_message  # noqa: E402
from airflow_chatter.ports import Document, OutgoingMessage, Publisher  # noqa: E402

BARE = "bare relay"
SHIPPED = "drain"
VARIANTS: dict[str, tuple[bool, int]] = {
    # name: (read-ahead, stamp_concurrency)
    SHIPPED: (True, stamps.CONCURRENCY),
    "drain, no read-ahead": (False, stamps.CONCURRENCY),
    "drain, stamp_concurrency 1": (True, 1),
    "drain, neither thread": (False, 1),
}
BARE_PAGE_PATH = "drain, bare page path"
#: The seam each column of the split is timed at, under drain_throughput's Stopwatch names.
SEAMS = {"feed": "store.feed", "publish": "publisher.send_batch", "stamps": "store.stamps"}


@dataclass(frozen=True)
class Measurement:
    us_per_doc: float
    cpu_us_per_doc: float
    seams_us_per_doc: dict[str, float]


class Bench:
    def __init__(self, bootstrap: str | None, n: int, prebuilt: bool) -> None:
        self.bootstrap, self.n, self.prebuilt = bootstrap, n, prebuilt

    def publisher(self, label: str) -> tuple[Publisher, str]:
        if self.bootstrap is None:
            return base.NoWorkPublisher(), "no-work"
        topic = base.new_topic(self.bootstrap, label)
        publisher = KafkaPublisher(base.producer_settings(self.bootstrap))
        # Connected, topic metadata known, before any clock starts (as every relay of the other scripts).
        assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
        return publisher, topic

    def run(self, variant: str) -> Measurement:
        publisher, topic = self.publisher("overhead")
        watch = base.Stopwatch()
        timed_publisher = base.TimedPublisher(publisher, watch)
        stub = (base.PrebuiltSource if self.prebuilt else base.SyntheticSource)(self.n, topic)
        try:
            cpu = time.process_time()
            if variant == BARE:
                stub.read_change_feed = base.timed(stub.read_change_feed, watch, "store.feed")  # type: ignore[method-assign]
                stub.execute_batch = base.timed(stub.execute_batch, watch, "store.stamps")  # type: ignore[method-assign]
                rate = base.batched_bare_relay(stub, timed_publisher, self.n)
                elapsed = self.n / rate
            else:
                elapsed = self._drain(variant, stub, timed_publisher, watch)
            cpu = time.process_time() - cpu
        finally:
            publisher.close()
        per_doc = 1e6 / self.n
        return Measurement(
            elapsed * per_doc, cpu * per_doc, {seam: watch.seconds[what] * per_doc for seam, what in SEAMS.items()}
        )

    def _drain(self, variant: str, stub: base.SyntheticSource, publisher: Publisher, watch: base.Stopwatch) -> float:
        read_ahead, concurrency = VARIANTS[SHIPPED if variant == BARE_PAGE_PATH else variant]
        options = SourceOptions(
            f"overhead-{uuid.uuid4().hex[:6]}",
            ("/tenantId",),
            max_batch_size=stamps.PAGE,
            stamp_concurrency=concurrency,
        )
        engine = DrainEngine(options, stub, base.lease_container(), publisher, owner="bench")
        # The ablation: the feed reader's own switch (on in batched mode), and the engine's seams timed on this
        # instance only (attributes shadowing the bound methods), as drain_throughput.py times them.
        engine._feed.read_ahead = read_ahead
        engine._feed.read = base.timed(engine._feed.read, watch, "store.feed")  # type: ignore[method-assign]
        engine._stamps.write_sheet = base.timed(engine._stamps.write_sheet, watch, "store.stamps")  # type: ignore[method-assign]
        if variant == BARE_PAGE_PATH:
            engine._drain_page_documents = bare_page_path(engine, watch)  # type: ignore[method-assign]
        engine.ensure_leases()
        with engine:
            started = time.perf_counter()
            summaries = engine.drain_all()
            elapsed = time.perf_counter() - started
        failed = [s.to_dict() for s in summaries if s.error is not None]
        delivered = sum(s.delivered for s in summaries)
        assert delivered == self.n and not failed, (delivered, failed)
        return elapsed


def bare_page_path(engine: DrainEngine, watch: base.Stopwatch) -> Any:
    """``engine._drain_page_documents`` done the bare relay's way (the ``drain, bare page path`` variant): every
    admitted document is assumed deliverable to the default publisher and every publish and stamp to succeed, which
    holds for this stub and no real store. Not a drain: a measure of what the rest of the engine costs."""
    strategy, operations = engine.source.key_strategy, engine._delivered_ops

    def page(holder: Any, documents: Sequence[Document], tally: DrainCounts) -> ConfirmationReceipt | None:
        planned: list[tuple[Document, Any]] = []
        messages = []
        for document in documents:
            if not is_pending_outbox(document):
                tally.skipped += 1
                continue
            engine._record_lag(document, tally)
            key = engine._partition_key_of(document)
            verdict = verify(document)
            assert isinstance(verdict, Deliverable)
            planned.append((document, key))
            messages.append(to_outgoing_message(verdict, key, strategy))
        if not messages:
            return None
        outcomes = engine._default.send_batch(messages)
        assert all(outcome.confirmed for outcome in outcomes)
        tally.published += len(outcomes)
        started = time.perf_counter()
        last = base.stamp_in_batches(engine.monitored, planned, operations)
        watch.add("store.stamps", time.perf_counter() - started)
        tally.delivered += len(planned)
        assert last is not None and last.body is not None
        return ConfirmationReceipt.from_status_write(last.body, engine._delivered_value)

    return page


def report(results: dict[str, list[Measurement]]) -> list[str]:
    bare = statistics.median(m.us_per_doc for m in results[BARE])
    header = f"{'':<28} {'µs/doc':>7} {'best':>6} {'bare ÷':>7}   the main thread's µs/doc at: "
    header += " ".join(f"{seam:>7}" for seam in SEAMS) + f" {'rest':>7}   {'CPU/doc':>7}"
    lines = [header]
    for name, measurements in results.items():
        median = statistics.median(m.us_per_doc for m in measurements)
        best = min(m.us_per_doc for m in measurements)
        split = {seam: statistics.median(m.seams_us_per_doc[seam] for m in measurements) for seam in SEAMS}
        rest = median - sum(split.values())
        cpu = statistics.median(m.cpu_us_per_doc for m in measurements)
        line = f"{name:<28} {median:7.1f} {best:6.1f} {bare / median:7.2f}   {'':28} "
        line += " ".join(f"{split[seam]:7.1f}" for seam in SEAMS) + f" {rest:7.1f}   {cpu:7.1f}"
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="documents per drain (pages of 1,000)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds of every variant")
    parser.add_argument("--publisher", choices=("kafka", "none"), default="kafka")
    parser.add_argument(
        "--stub", choices=("prebuilt", "generated"), default="prebuilt", help="PrebuiltSource or SyntheticSource"
    )
    args = parser.parse_args()
    print(f"machine: {stamps.machine()}   load: {os.getloadavg()[0]:.1f}")
    print(f"n={args.n} rounds={args.rounds} publisher={args.publisher} stub={args.stub} page={stamps.PAGE} 64 keys")
    names = [BARE, *VARIANTS, BARE_PAGE_PATH]
    results: dict[str, list[Measurement]] = {name: [] for name in names}

    def rounds(bootstrap: str | None) -> None:
        bench = Bench(bootstrap, args.n, args.stub == "prebuilt")
        for number in range(1, args.rounds + 1):
            for name in names:
                results[name].append(bench.run(name))
            line = "  ".join(f"{name} {results[name][-1].us_per_doc:.1f}" for name in names)
            print(f"round {number}: {line} µs/doc   load {os.getloadavg()[0]:.1f}", flush=True)

    if args.publisher == "kafka":
        with base.kafka_service() as bootstrap:
            rounds(bootstrap)
    else:
        rounds(None)
    print()
    for line in report(results):
        print(line)


if __name__ == "__main__":
    main()
