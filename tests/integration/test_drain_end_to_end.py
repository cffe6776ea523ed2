"""The drain end to end: Cosmos DB (emulator or account) → DrainEngine → a real Kafka broker → a consumer.

Seeds pending, domain, delivered, undeliverable and malformed documents over several partition keys, drains them,
and checks every claim by reading Kafka back and re-reading the documents and the lease, never by the engine's word.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import Document
from tests.fixtures.cosmos import ContainerFactory
from tests.fixtures.kafka import consume_records

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

TENANTS = ("tenant-a", "tenant-b", "tenant-c")
PER_TENANT = 4


@pytest.fixture
def publisher(kafka_bootstrap: str) -> Iterator[KafkaPublisher]:
    pub = KafkaPublisher(
        KafkaSettings(bootstrap_servers=kafka_bootstrap, client_id="chatter-drain-e2e", max_block_ms=15_000)
    )
    yield pub
    pub.close()


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"chatter-e2e.orders.{uuid.uuid4().hex[:12]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [name], partitions=3)
    return name


def _outbox(message_id: str, tenant: str, topic: str, seq: int, **overrides: Any) -> Document:
    doc = OutboxMessage(
        message_id,
        topic,
        json.dumps({"tenant": tenant, "seq": seq}),
        "application/json",
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "seq": seq},
    ).to_document(("/tenantId",), tenant)
    for key, value in overrides.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def _engine(
    monitored: CosmosDocumentContainer, leases: CosmosDocumentContainer, publisher: KafkaPublisher
) -> DrainEngine:
    source = SourceOptions(name=f"e2e-{uuid.uuid4().hex[:8]}", partition_key_paths=("/tenantId",), max_batch_size=5)
    return DrainEngine.open(source, monitored, leases, publisher, owner="e2e")


def test_drain_end_to_end_publishes_each_pending_document_once_in_order_per_key(
    cosmos_container_factory: ContainerFactory, kafka_bootstrap: str, publisher: KafkaPublisher, topic: str
) -> None:
    monitored = CosmosDocumentContainer(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    run = uuid.uuid4().hex[:8]

    pending: list[Document] = []
    others: dict[str, Document] = {}
    for seq in range(PER_TENANT):
        for tenant in TENANTS:
            doc = _outbox(f"{run}-{tenant}-{seq}", tenant, topic, seq)
            monitored.create(doc, tenant)
            pending.append(doc)
        domain = {"id": f"order-{run}-{seq}", "tenantId": TENANTS[seq % 3], "total": seq}
        monitored.create(domain, domain["tenantId"])
        others[f"domain-{seq}"] = domain
    delivered = _outbox(f"{run}-already", "tenant-a", topic, 99, status="delivered")
    undeliverable = _outbox(f"{run}-gave-up", "tenant-b", topic, 98, status="undeliverable")
    malformed = _outbox(f"{run}-malformed", "tenant-c", topic, 97, Destination=None)
    for name, doc in (("delivered", delivered), ("undeliverable", undeliverable), ("malformed", malformed)):
        monitored.create(doc, doc["tenantId"])
        others[name] = doc

    engine = _engine(monitored, leases, publisher)
    summaries = engine.drain_all()
    assert all(s.error is None for s in summaries), [s.to_dict() for s in summaries]
    assert sum(s.published for s in summaries) == len(pending)
    assert sum(s.undeliverable for s in summaries) == 1

    records = consume_records(kafka_bootstrap, topic, len(pending))
    assert len(records) == len(pending), "exactly one Kafka message per pending document"
    by_id = {dict(r.headers)["message-id"].decode(): r for r in records}
    for doc in pending:
        record = by_id[doc["MessageId"]]
        headers = dict(record.headers)
        assert record.topic == topic and record.key == doc["tenantId"].encode()
        assert record.value == doc["MessageBody"].encode()
        assert (
            headers["content-type"] == b"application/json"
            and headers["seq"] == str(json.loads(doc["MessageBody"])["seq"]).encode()
        )
        assert headers["traceparent"] == b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    per_key: dict[bytes, list[int]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        per_key[record.key].append(json.loads(record.value)["seq"])
    assert all(seqs == list(range(PER_TENANT)) for seqs in per_key.values()), f"feed order per key: {dict(per_key)}"
    assert len({r.partition for r in records if r.key == b"tenant-a"}) == 1, "one key, one partition"

    for doc in pending:
        after = monitored.read(doc["id"], doc["tenantId"])
        assert after["status"] == "delivered" and after["ttl"] == 86400
    assert monitored.read(malformed["id"], "tenant-c")["status"] == "undeliverable"
    assert "ttl" not in monitored.read(malformed["id"], "tenant-c")
    assert monitored.read(delivered["id"], "tenant-a").get("ttl") is None, "already delivered: untouched"
    assert monitored.read(undeliverable["id"], "tenant-b")["status"] == "undeliverable"
    for seq in range(PER_TENANT):
        domain = others[f"domain-{seq}"]
        assert monitored.read(domain["id"], domain["tenantId"])["total"] == seq
    for lease in engine.store.list_leases():
        assert lease.continuation and lease.owner is None and lease.checkpointed_at is not None

    # A second drain publishes nothing. Proved with a barrier: one new document after it must be the only new record.
    second = engine.drain_all()
    assert sum(s.published for s in second) == 0 and all(s.error is None for s in second)
    barrier = _outbox(f"{run}-barrier", "tenant-a", topic, PER_TENANT)
    monitored.create(barrier, "tenant-a")
    third = _engine(monitored, leases, publisher)  # a new process: resumes from the lease
    assert sum(s.published for s in third.drain_all()) == 1
    everything = consume_records(kafka_bootstrap, topic, len(pending) + 1)
    ids = [dict(r.headers)["message-id"].decode() for r in everything]
    assert len(everything) == len(pending) + 1 and ids.count(f"{run}-barrier") == 1
    assert len(set(ids)) == len(ids), "nothing was published twice"


def test_rly_08_a_point_in_time_lease_reads_from_its_start_and_then_resumes_from_its_checkpoint(
    cosmos_container_factory: ContainerFactory, kafka_bootstrap: str, publisher: KafkaPublisher, topic: str
) -> None:
    import time
    from datetime import UTC, datetime

    monitored = CosmosDocumentContainer(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    run = uuid.uuid4().hex[:8]
    before = [monitored.create(_outbox(f"{run}-before-{t}", t, topic, 0), t) for t in TENANTS]
    start = datetime.fromtimestamp(max(doc["_ts"] for doc in before) + 1, tz=UTC)  # _ts is whole seconds
    while datetime.now(UTC) < start:
        time.sleep(0.05)
    after = [monitored.create(_outbox(f"{run}-after-{t}", t, topic, 1), t) for t in TENANTS]
    assert all(doc["_ts"] >= start.timestamp() for doc in after)

    source = SourceOptions(name=f"pit-{run}", partition_key_paths=("/tenantId",), max_batch_size=2)
    engine = DrainEngine.open(source, monitored, leases, publisher, owner="backfill", start_from=start)
    first = engine.drain_all()
    assert all(s.error is None for s in first), [s.to_dict() for s in first]
    assert sum(s.published for s in first) == len(after)
    assert all(monitored.read(d["id"], d["tenantId"])["status"] == "pending" for d in before), "not read at all"

    # The checkpoint is a token from a point-in-time read (azure-sdk-for-python #43018): a new process resumes it.
    late = _outbox(f"{run}-late", "tenant-a", topic, 2)
    monitored.create(late, "tenant-a")
    again = DrainEngine.open(source, monitored, leases, publisher, owner="backfill-2", start_from=start).drain_all()
    assert all(s.error is None for s in again), [s.to_dict() for s in again]
    assert sum(s.published for s in again) == 1
    records = consume_records(kafka_bootstrap, topic, len(after) + 1)
    ids = sorted(dict(r.headers)["message-id"].decode() for r in records)
    assert ids == sorted([d["MessageId"] for d in after] + [late["MessageId"]]), "nothing before the start, once each"


_NEW_PROCESS_DRAIN = """
import json, sys
from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, make_cosmos_client
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.testing.fakes import FakePublisher

url, key, verify, database, monitored_id, leases_id, name = sys.argv[1:]
verify_arg = {"True": True, "False": False}.get(verify, verify)
db = make_cosmos_client(url, key, verify=verify_arg).get_database_client(database)
publisher = FakePublisher()
engine = DrainEngine.open(
    SourceOptions(name=name, partition_key_paths=("/tenantId",)),
    CosmosDocumentContainer(db.get_container_client(monitored_id)),
    CosmosDocumentContainer(db.get_container_client(leases_id)),
    publisher,
    owner="another-process",
)
(summary,) = engine.drain_all()
print(json.dumps({**summary.to_dict(), "attempted": len(publisher.attempted)}))
"""


@pytest.mark.cosmos
def test_sus_15_drain_suspension_survives_a_new_process(
    cosmos_endpoint: Any, cosmos_database: Any, cosmos_container_factory: ContainerFactory
) -> None:
    import subprocess
    import sys

    from airflow_chatter.ports import PatchOperation, ServiceUnavailable
    from airflow_chatter.testing.fakes import FakePublisher

    class StampsFail(CosmosDocumentContainer):
        def patch(self, item_id: str, partition_key: Any, operations: Any, **kwargs: Any) -> Document:
            if any(isinstance(op, PatchOperation) and op.path == "/status" for op in operations):
                raise ServiceUnavailable("stamp refused")
            return super().patch(item_id, partition_key, operations, **kwargs)

        def execute_batch(self, partition_key: Any, operations: Any) -> Any:
            # F-10: batched stamps (the default stamp_mode) go out as transactional batches of patches.
            raise ServiceUnavailable("stamp batch refused")

    monitored_proxy = cosmos_container_factory(("/tenantId",), -1)
    leases_proxy = cosmos_container_factory(("/id",), None)
    name = f"sus-{uuid.uuid4().hex[:8]}"
    source = SourceOptions(name=name, partition_key_paths=("/tenantId",))
    monitored = StampsFail(monitored_proxy)
    monitored.create(_outbox("msg-1", "tenant-a", "orders", 0), "tenant-a")
    publisher = FakePublisher()
    engine = DrainEngine.open(source, monitored, CosmosDocumentContainer(leases_proxy), publisher, owner="this-process")
    for _ in range(5):
        (summary,) = engine.drain_all()
        assert summary.error_type == "ServiceUnavailable"
    assert summary.suspended and len(publisher.sent) == 5

    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _NEW_PROCESS_DRAIN,
            cosmos_endpoint.url,
            cosmos_endpoint.key,
            str(cosmos_endpoint.verify),
            cosmos_database.id,
            monitored_proxy.id,
            leases_proxy.id,
            name,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["error_type"] == "DrainSuspendedError" and seen["suspended"], seen
    assert seen["attempted"] == 0 and seen["published"] == 0, "the new process refused without publishing"


def test_rly_06_stamps_failing_after_publish_the_summary_counts_what_the_broker_confirmed(
    cosmos_container_factory: ContainerFactory, kafka_bootstrap: str, publisher: KafkaPublisher, topic: str
) -> None:
    """Three records reach Kafka, every delivered stamp fails: ``published`` is what the broker holds, not 1."""
    from airflow_chatter.ports import PatchOperation, ServiceUnavailable

    class StampsFail(CosmosDocumentContainer):
        def patch(self, item_id: str, partition_key: Any, operations: Any, **kwargs: Any) -> Document:
            if any(isinstance(op, PatchOperation) and op.path == "/status" for op in operations):
                raise ServiceUnavailable("stamp refused")
            return super().patch(item_id, partition_key, operations, **kwargs)

        def execute_batch(self, partition_key: Any, operations: Any) -> Any:
            raise ServiceUnavailable("stamp batch refused")  # F-10: batched stamps fall back to ``patch``

    monitored = StampsFail(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    for seq in range(3):
        monitored.create(_outbox(f"stamp-{seq}", "tenant-a", topic, seq), "tenant-a")
    (summary,) = _engine(monitored, leases, publisher).drain_all()
    assert summary.error_type == "ServiceUnavailable" and summary.delivered == 0
    records = consume_records(kafka_bootstrap, topic, 3)
    assert summary.published == len(records) == 3, summary.log_line()
