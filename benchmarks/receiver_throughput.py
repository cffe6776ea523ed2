"""Receiver throughput: the document-tier idempotent receiver ÷ the same loop without an inbox, side by side.

    .venv/bin/python -m benchmarks.receiver_throughput [--n 1000] [--rounds 3]

Both variants consume the same N records (1 KB body, 16 partition keys, 4 partitions) from the real broker with the
same loop (``airflow_chatter.inbox.receive.receive``: poll, handle one delivery, commit its offset) and run the
same handler against the Cosmos emulator: one order document and one outbox message per delivery, committed as one
transactional batch. The only difference is the Inbox Marker: the receiver stages it as operation 0 of that batch
(DTI-01); the baseline commits the handler's unit of work without one. Target: receiver ÷ no inbox ≥ 0.8 (the marker
rides the batch the handler writes anyway). Rounds alternate the order of the two variants; the summary uses
medians.

Consumers are assigned their partitions (no group join to wait for), so the timing covers handling only. Kafka:
``KAFKA_BOOTSTRAP_SERVERS`` or the project broker (``scripts/kafka.sh start``). The emulator:
``COSMOS_ENDPOINT``/``COSMOS_KEY``/``COSMOS_VERIFY`` or ``scripts/cosmos-emulator.sh start``. A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import uuid
from typing import Any

from airflow_chatter.adapters.cosmos.container import (
    CosmosDocumentContainer,
    create_container,
    ensure_database,
)
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.consumer import consumer_config
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource
from airflow_chatter.inbox.identity import ReceivedMessage, delivery_identity
from airflow_chatter.inbox.receive import receive
from airflow_chatter.inbox.receiver import Delivery, DeliveryOutcome, IdempotentReceiver
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports import DocumentContainer, OutgoingMessage
from devkit.services import cosmos_service, kafka_service

TENANTS = 16
PARTITIONS = 4
BODY = b'{"order": "' + b"x" * 1000 + b'"}'
TARGET = 0.8


def handler(delivery: Delivery) -> None:
    """The handler both variants run: one order document and one outbox message in the delivery's unit of work."""
    unit = delivery.unit_of_work
    assert unit is not None
    unit.create({"id": f"order-{delivery.identity}", "tenantId": unit.partition_key, "total": 1})
    delivery.send(OutboxMessage(f"placed-{delivery.identity}", "orders.placed", "{}", "application/json"))


class NoInbox(IdempotentReceiver):
    """The baseline: the same unit of work and handler, committed without an Inbox Marker (no deduplication)."""

    def handle_delivery(self, message: ReceivedMessage) -> DeliveryOutcome:
        identity = delivery_identity(message, self.identity)
        unit = UnitOfWork(self.container, self.partition_key_paths, self.partition_key(message))
        self.handler(Delivery(message, identity, self.name, unit))
        unit.commit()
        return DeliveryOutcome.PROCESSED


def produce(bootstrap: str, n: int) -> str:
    settings = KafkaSettings(bootstrap_servers=bootstrap, max_block_ms=30_000)
    topic = f"bench-receiver-{uuid.uuid4().hex[:8]}"
    ensure_topics(settings, [topic], partitions=PARTITIONS)
    messages = [
        OutgoingMessage(
            topic=topic,
            value=BODY,
            key=f"tenant-{i % TENANTS:02d}".encode(),
            headers=(("message-id", f"msg-{i:07d}".encode()),),
        )
        for i in range(n)
    ]
    with KafkaPublisher(settings) as publisher:
        outcomes = publisher.send_batch(messages)
    failed = [o.error for o in outcomes if not o.confirmed]
    if failed:
        raise SystemExit(f"producing the benchmark's records failed: {failed[:3]}")
    return topic


def run_variant(bootstrap: str, topic: str, receiver: IdempotentReceiver, n: int) -> float:
    """Seconds ``receive`` took for all N records, partitions assigned (no group join in the timing)."""
    from kafka import KafkaConsumer, TopicPartition

    group = f"bench-{receiver.name}-{uuid.uuid4().hex[:8]}"
    config = consumer_config(KafkaSettings(bootstrap_servers=bootstrap), group_id=group)
    consumer = KafkaConsumer(**config)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    try:
        started = time.perf_counter()
        summary = receive(
            KafkaMessageSource(consumer), receiver, max_messages=n, max_seconds=max(60.0, n / 5), topics=[topic]
        )
        seconds = time.perf_counter() - started
    finally:
        consumer.close(autocommit=False)
    if summary.processed != n:
        raise SystemExit(f"{receiver.name}: processed {summary.processed} of {n} ({summary.to_dict()})")
    return seconds


def fresh_container(database: Any) -> DocumentContainer:
    return CosmosDocumentContainer(create_container(database, f"bench-{uuid.uuid4().hex[:12]}", ("/tenantId",)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="records per variant per round (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args(argv)
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}")
    with kafka_service() as bootstrap, cosmos_service() as endpoint:
        database = ensure_database(endpoint.client(), "airflow-chatter-bench")
        topic = produce(bootstrap, args.n)
        rates: dict[str, list[float]] = {"receiver": [], "no inbox": []}
        made: list[str] = []
        try:
            for round_number in range(1, args.rounds + 1):
                order = ["receiver", "no inbox"] if round_number % 2 else ["no inbox", "receiver"]
                line: dict[str, float] = {}
                for variant in order:
                    container = fresh_container(database)
                    made.append(container.properties().container_id)
                    kind = IdempotentReceiver if variant == "receiver" else NoInbox
                    receiver = kind(
                        handler, name=variant.replace(" ", "-"), container=container, partition_key_paths="/tenantId"
                    )
                    line[variant] = args.n / run_variant(bootstrap, topic, receiver, args.n)
                    rates[variant].append(line[variant])
                print(
                    f"round {round_number}: receiver {line['receiver']:8,.0f} msg/s   "
                    f"no inbox {line['no inbox']:8,.0f} msg/s   ratio {line['receiver'] / line['no inbox']:.2f}"
                )
        finally:
            for container_id in made:
                try:
                    database.delete_container(container_id)
                except Exception:  # noqa: BLE001 - cleanup must not hide the figures
                    pass
    receiver_rate, baseline_rate = statistics.median(rates["receiver"]), statistics.median(rates["no inbox"])
    ratio = receiver_rate / baseline_rate
    print(f"N={args.n} records per variant, {args.rounds} round(s), medians:")
    print(f"  document-tier receiver        {receiver_rate:8,.0f} msg/s")
    print(f"  same loop, no inbox           {baseline_rate:8,.0f} msg/s")
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"receiver ÷ no inbox            = {ratio:.2f}   (target ≥ {TARGET}: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
