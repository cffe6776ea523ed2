"""Exactly once ÷ at least once: drain throughput, and follow-mode latency, side by side in one run.

    .venv/bin/python -m benchmarks.exactly_once [--n 10000] [--rounds 3] [--writes 100] [--rate 20] [--quick]

Real broker and the project emulator (its switches: docs/emulator.md). The same N pending 1 KB documents on 64
partition keys, ``max_batch_size`` 100, drained once with ``guarantee: at_least_once`` and once with
``exactly_once`` (one Kafka transaction per page plus its checkpoint record), in interleaved rounds whose order
alternates (at least once first in odd rounds, second in even ones); the figure is the median of the rounds' ratios:

(a) exactly-once ÷ at-least-once drain rate, no added latency                      target ≥ 0.8
(b) the same with 5 ms added latency per emulator request                          target ≥ 0.8
(c) follow mode, exactly once: write → read by a ``read_committed`` consumer, p50 / p99 / max
    (a following drain on its own thread, ``--writes`` documents at ``--rate``/s)    target p50 ≤ 0.5 s, p99 ≤ 2 s

(c) measures to the moment a read_committed consumer of our own reads the message, i.e. after the page's commit,
which is the latency an exactly-once consumer sees.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from typing import Any

from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.drain.engine import DrainEngine, DrainSummary
from airflow_chatter.drain.follow import Follow, StopRequest
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.ports import OutgoingMessage
from benchmarks import drain_throughput as base
from benchmarks.follow_latency import (
    POLL_SECONDS,
    await_arrivals,
    following_engine,
    latencies,
    latency_figures,
    write_at_rate,
)
from benchmarks.stamp_throughput import CONCURRENCY, Emulator, bench_services, print_header, seed

PAGE = 100
KEYS = 64


def checkpoint_topic(bootstrap: str) -> str:
    name = f"chatter-bench.checkpoints.{uuid.uuid4().hex[:10]}"
    ensure_topics(base.producer_settings(bootstrap), [name], partitions=3, configs=CHECKPOINT_TOPIC_CONFIGS)
    return name


def source(guarantee: str, checkpoints: str, **kwargs: Any) -> SourceOptions:
    return SourceOptions(
        f"bench-eo-{uuid.uuid4().hex[:6]}",
        ("/tenantId",),
        max_batch_size=PAGE,
        stamp_concurrency=CONCURRENCY,
        guarantee=guarantee,
        checkpoint_topic=checkpoints,
        **kwargs,
    )


def timed_drain(emu: Emulator, bootstrap: str, n: int, latency_ms: int, guarantee: str, checkpoints: str) -> float:
    """Seconds to drain N documents (seeded without latency) with ``guarantee`` at ``latency_ms`` per request."""
    proxy, container = emu.container()
    publisher = KafkaPublisher(base.producer_settings(bootstrap))
    try:
        topic = base.new_topic(bootstrap, "eo")
        seed(container, n, topic, KEYS)
        assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
        engine = DrainEngine.open(
            source(guarantee, checkpoints), container, base.lease_container(), publisher, owner="bench"
        )
        engine.ensure_leases()
        emu.configure(latency_ms=latency_ms)
        started = time.perf_counter()
        summaries = engine.drain_all()
        elapsed = time.perf_counter() - started
        engine.close()
        failed = [s.to_dict() for s in summaries if s.error is not None]
        assert sum(s.delivered for s in summaries) == n and not failed, failed
        return elapsed
    finally:
        emu.configure(latency_ms=0)
        publisher.close()
        emu.drop(proxy)


def follow_latency(emu: Emulator, bootstrap: str, writes: int, rate: float, checkpoints: str) -> list[float]:
    """Write → read_committed latencies (s) of ``writes`` documents while an exactly-once following drain runs."""
    from kafka import KafkaConsumer

    proxy, monitored = emu.container()
    topic = base.new_topic(bootstrap, "eo-follow")
    publisher = KafkaPublisher(base.producer_settings(bootstrap))
    options = source("exactly_once", checkpoints, follow=True, follow_poll_seconds=POLL_SECONDS)
    engine, leases_proxy = following_engine(emu, monitored, publisher, options)
    (lease,) = engine.ensure_leases()
    stop, done = StopRequest(), threading.Event()
    result: list[DrainSummary] = []
    read_at: dict[str, float] = {}

    def read() -> None:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"bench-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        try:
            while not done.is_set():
                for records in consumer.poll(timeout_ms=50).values():
                    now = time.time()
                    for record in records:
                        read_at.setdefault(dict(record.headers)["message-id"].decode(), now)
        finally:
            consumer.close()

    runner = threading.Thread(
        target=lambda: result.append(engine.drain_lease(lease.id, max_seconds=600, follow=Follow(POLL_SECONDS, stop)))
    )
    reader = threading.Thread(target=read)
    written_at: dict[str, float] = {}
    try:
        reader.start()
        runner.start()
        time.sleep(8.0)  # the drain is caught up and polling, the consumer has joined its group
        written_at = write_at_rate(monitored, topic, writes, rate)
        await_arrivals(written_at, read_at, seconds=60)
    finally:
        stop.request()
        runner.join(30)
        done.set()
        reader.join(30)
        engine.close()
        publisher.close()
        emu.drop(proxy)
        emu.database.delete_container(leases_proxy.id)
    (summary,) = result
    summary.raise_for_error()
    return latencies(written_at, read_at, "reached a read_committed consumer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10000, help="documents per drain (the claim's N)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per ratio")
    parser.add_argument("--writes", type=int, default=100, help="documents written for the follow latency")
    parser.add_argument("--rate", type=float, default=20.0, help="writes per second for the follow latency")
    parser.add_argument("--quick", action="store_true", help="N=400, 1 round, 40 writes (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds, args.writes = 400, 1, 40
    print_header()
    with bench_services() as (bootstrap, emu):
        checkpoints = checkpoint_topic(bootstrap)
        for label, latency_ms in (("(a) no added latency", 0), ("(b) 5 ms per request", 5)):
            ratios = []
            for round_no in range(1, args.rounds + 1):
                # The order alternates per round: on a shared machine whose load drifts during a run, whichever
                # side always ran second would take the drift alone.
                order = ("at_least_once", "exactly_once") if round_no % 2 else ("exactly_once", "at_least_once")
                took = {g: timed_drain(emu, bootstrap, args.n, latency_ms, g, checkpoints) for g in order}
                alo, eo = took["at_least_once"], took["exactly_once"]
                ratios.append(alo / eo)
                print(
                    f"  round {round_no} N={args.n:,}, {latency_ms} ms: at least once {args.n / alo:7,.0f} doc/s   "
                    f"exactly once {args.n / eo:7,.0f} doc/s"
                )
            print(
                f"{label:24} exactly-once ÷ at-least-once drain rate, max_batch_size {PAGE}: "
                f"{statistics.median(ratios):.2f}   target ≥ 0.8"
            )
        lat = follow_latency(emu, bootstrap, args.writes, args.rate, checkpoints)
        print(f"(c) follow, exactly once   {latency_figures(lat, args.rate)}")


if __name__ == "__main__":
    main()
