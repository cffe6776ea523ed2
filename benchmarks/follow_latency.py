"""Follow mode: write → Kafka latency of a following drain, and what one idle following lease costs. One run.

    .venv/bin/python -m benchmarks.follow_latency [--writes 200] [--rate 20] [--idle-seconds 30] [--quick]

Real broker and the project emulator (its switches: docs/emulator.md), in-process (no Airflow): a following drain
(``follow: true``, ``follow_poll_seconds`` 0.25) on its own thread, its monitored and lease containers both in the
emulator, while a writer creates ``--writes`` pending outbox documents at a steady ``--rate`` per second. A
document's latency is from just before its create call to the broker's confirmation of its message (the publisher
is wrapped to note when each ``send_batch`` returned). Printed:

(a) latency p50 / p99 / max, no added latency                        target p50 ≤ 0.5 s, p99 ≤ 2 s
(b) the same with 5 ms added latency per emulator request             target p50 ≤ 0.5 s, p99 ≤ 2 s
(c) RU per idle hour of one following lease: a following drain with nothing written for ``--idle-seconds``, its
    measured charges (feed reads, lease renewals) scaled to an hour. An extrapolation from a short window.

The same three figures on the live Airflow, beside ``on_pending`` and a one-minute cron: ``benchmarks/mode_latency.py``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, create_container
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.follow import Follow, StopRequest
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.ports import OutgoingMessage, Publisher, PublishOutcome
from benchmarks import drain_throughput as base
from benchmarks.stamp_throughput import Emulator, bench_services, print_header

POLL_SECONDS = 0.25


class ConfirmTimes(Publisher):
    """A publisher that notes, per message id, when the broker's confirmation came back."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self.confirmed_at: dict[str, float] = {}

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        outcomes = self.inner.send_batch(messages)
        now = time.time()
        for message, outcome in zip(messages, outcomes, strict=True):
            message_id = dict(message.headers).get("message-id")
            if outcome.confirmed and message_id is not None:
                self.confirmed_at.setdefault(message_id.decode(), now)
        return outcomes

    def close(self) -> None:
        self.inner.close()


def following_engine(
    emu: Emulator, monitored: CosmosDocumentContainer, publisher: Publisher, source: SourceOptions | None = None
) -> tuple[DrainEngine, Any]:
    """A drain engine over ``monitored`` with its own lease container in the emulator (returned too, for the caller
    to delete): ``source``, by default a following source polling every ``POLL_SECONDS``."""
    leases_proxy = create_container(emu.database, f"bench-leases-{uuid.uuid4().hex[:8]}", ("/id",))
    if source is None:
        source = SourceOptions(
            f"follow-{uuid.uuid4().hex[:6]}", ("/tenantId",), follow=True, follow_poll_seconds=POLL_SECONDS
        )
    engine = DrainEngine.open(source, monitored, CosmosDocumentContainer(leases_proxy), publisher, owner="bench")
    return engine, leases_proxy


def measure_latency(emu: Emulator, bootstrap: str, writes: int, rate: float, latency_ms: int) -> list[float]:
    """Latencies (s) of ``writes`` documents written at ``rate``/s while one following drain runs."""
    proxy, monitored = emu.container()
    topic = base.new_topic(bootstrap, "follow")
    publisher = ConfirmTimes(KafkaPublisher(base.producer_settings(bootstrap)))
    assert publisher.send_batch([OutgoingMessage(topic, b"warm-up")])[0].confirmed
    engine, leases_proxy = following_engine(emu, monitored, publisher)
    (lease,) = engine.ensure_leases()  # one feed range in the emulator
    stop = StopRequest()
    result: list[DrainSummary] = []
    emu.configure(latency_ms=latency_ms)
    runner = threading.Thread(
        target=lambda: result.append(engine.drain_lease(lease.id, max_seconds=600, follow=Follow(POLL_SECONDS, stop))),
        name="follow",
    )
    written_at: dict[str, float] = {}
    try:
        runner.start()
        time.sleep(1.0)  # caught up (nothing to read) and polling
        written_at = write_at_rate(monitored, topic, writes, rate)
        await_arrivals(written_at, publisher.confirmed_at, seconds=30)
    finally:
        stop.request()
        runner.join(30)
        emu.configure(latency_ms=0)
        engine.close()
        publisher.close()
        emu.drop(proxy)
        emu.database.delete_container(leases_proxy.id)
    (summary,) = result
    summary.raise_for_error()
    return latencies(written_at, publisher.confirmed_at, "reached Kafka")


def measure_idle(emu: Emulator, bootstrap: str, seconds: float) -> DrainSummary:
    """A following drain over an empty feed for ``seconds``: its summary (polls, RU)."""
    proxy, monitored = emu.container()
    publisher = KafkaPublisher(base.producer_settings(bootstrap))
    engine, leases_proxy = following_engine(emu, monitored, publisher)
    try:
        (lease,) = engine.ensure_leases()
        summary = engine.drain_lease(lease.id, max_seconds=seconds, follow=Follow(POLL_SECONDS))
        summary.raise_for_error()
        return summary
    finally:
        engine.close()
        publisher.close()
        emu.drop(proxy)
        emu.database.delete_container(leases_proxy.id)


def write_at_rate(monitored: CosmosDocumentContainer, topic: str, writes: int, rate: float) -> dict[str, float]:
    """Create ``writes`` pending documents at a steady ``rate``/s: message id → wall time just before its create."""
    written_at: dict[str, float] = {}
    start = time.monotonic()
    for i in range(writes):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        doc = base.outbox_document(i, topic)
        written_at[f"bench-{i}"] = time.time()
        monitored.create(doc, doc["tenantId"])
    return written_at


def await_arrivals(written_at: Mapping[str, float], arrived_at: Mapping[str, float], seconds: float) -> None:
    """Poll until every written message id has an arrival time, or ``seconds`` have passed (then ``latencies`` says
    which are missing)."""
    deadline = time.monotonic() + seconds
    while not written_at.keys() <= arrived_at.keys() and time.monotonic() < deadline:
        time.sleep(0.05)


def latencies(written_at: Mapping[str, float], arrived_at: Mapping[str, float], where: str) -> list[float]:
    """Write → arrival latencies (s), one per written message; every message must have arrived ``where``."""
    missing = [m for m in written_at if m not in arrived_at]
    assert not missing, f"{len(missing)} writes never {where}: {missing[:5]}"
    return [arrived_at[m] - t for m, t in written_at.items()]


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def latency_figures(lat: list[float], rate: float) -> str:
    """The printed latency figures of a follow measurement, with their target."""
    return (
        f"writes={len(lat)} at {rate:g}/s  p50={quantile(lat, 0.5):.3f} s  "
        f"p99={quantile(lat, 0.99):.3f} s  max={max(lat):.3f} s   target p50 ≤ 0.5 s, p99 ≤ 2 s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=200, help="documents written per latency measurement")
    parser.add_argument("--rate", type=float, default=20.0, help="writes per second")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="idle window measured for (c)")
    parser.add_argument("--quick", action="store_true", help="40 writes, a 3 s idle window (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.writes, args.idle_seconds = 40, 3.0
    print_header()
    with bench_services() as (bootstrap, emu):
        for label, latency_ms in (("(a) follow, no added latency", 0), ("(b) follow, 5 ms per request", 5)):
            lat = measure_latency(emu, bootstrap, args.writes, args.rate, latency_ms)
            print(f"{label:34} {latency_figures(lat, args.rate)}")
        idle = measure_idle(emu, bootstrap, args.idle_seconds)
        per_hour = 3600 / args.idle_seconds
        print(
            f"(c) idle following lease: {args.idle_seconds:g} s, polls={idle.polls} empty={idle.empty_polls}, "
            f"RU of the empty polls (feed reads + renewals) {idle.empty_poll_request_units:.1f}, whole drain "
            f"{idle.request_units:.1f} {dict(idle.request_units_by_kind)}"
        )
        print(
            f"    RU per idle hour ≈ {idle.empty_poll_request_units * per_hour:,.0f} "
            f"(the empty polls' RU extrapolated ×{per_hour:g} from the window; taking and releasing the lease, "
            "once per run, excluded)"
        )


if __name__ == "__main__":
    main()
