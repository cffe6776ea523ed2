"""Builders for the Airflow-layer tests: memory containers wired in place of the Cosmos hook, a fake publisher."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.airflow.sources import SourceConfig
from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import Document
from airflow_chatter.testing.fakes import FakePublisher

PK_PATH = "/tenant"
#: The first bootstrap server of the Kafka connection ``install_world`` defines.
KAFKA_SERVER = "broker-1:9092"


def source(**changes: Any) -> SourceConfig:
    """A valid source config; each test changes exactly the fields it is about."""
    values: dict[str, Any] = {
        "name": "orders",
        "database": "shop",
        "monitored_container": "orders",
        "lease_container": "leases",
        "partition_key_paths": PK_PATH,
        "max_documents": 1000,
        "max_seconds": 30,
    }
    values.update(changes)
    return SourceConfig.model_validate(values)


def outbox_document(tenant: str, n: int, *, destination: str = "orders.events", **overrides: Any) -> Document:
    message = OutboxMessage(
        message_id=f"msg-{tenant}-{n}-{uuid.uuid4().hex[:6]}",
        destination=destination,
        body=json.dumps({"order": n, "tenant": tenant}),
        content_type="application/json",
        context={"tenant": tenant},
    )
    document = message.to_document(PK_PATH, tenant)
    document.update(overrides)
    return document


@dataclass
class World:
    """What the operators see through their hooks in a test."""

    monitored: MemoryDocumentContainer
    leases: MemoryDocumentContainer
    publisher: FakePublisher = field(default_factory=FakePublisher)
    closed: int = 0

    def write(self, tenants: int, per_tenant: int, **overrides: Any) -> list[Document]:
        written = []
        for t in range(tenants):
            for n in range(per_tenant):
                document = outbox_document(f"t{t}", n, **overrides)
                written.append(self.monitored.create(document, f"t{t}"))
        return written

    @property
    def cosmos_client(self) -> Any:
        """The Cosmos client the hooks hand out: closing it is counted in ``closed``."""
        world = self

        class _Client:
            def close(self) -> None:
                world.closed += 1

        return _Client()

    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for document in self.monitored.query("SELECT * FROM c"):
            counts[document.get("status", "?")] = counts.get(document.get("status", "?"), 0) + 1
        return counts


def install_world(
    monkeypatch: pytest.MonkeyPatch,
    *,
    feed_ranges: int = 1,
    clock: Clock = utc_now,
    cosmos_extras: dict[str, Any] | None = None,
) -> World:
    """Route ChatterCosmosHook/ChatterKafkaHook to memory containers and a fake publisher.

    ``clock`` gives the monitored container's ``_ts`` (tests about points in time move it by hand). The default
    Cosmos connection exists (the hook reads its extras, e.g. the 429 limits), with ``cosmos_extras``, and so does
    the default Kafka connection (bootstrap servers ``KAFKA_SERVER`` and a second one) unless the test set its own.
    """
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT",
        json.dumps({"conn_type": "chattercosmos", "host": "https://127.0.0.1:8081/", "extra": cosmos_extras or {}}),
    )
    if "AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT" not in os.environ:  # a test's own Kafka connection stands
        monkeypatch.setenv(
            "AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT",
            json.dumps({"conn_type": "chatterkafka", "host": f"{KAFKA_SERVER},broker-2:9092"}),
        )
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    world = World(
        monitored=MemoryDocumentContainer(
            partition_key_paths=(PK_PATH,),
            default_ttl=-1,
            feed_range_count=feed_ranges,
            database_id="shop",
            container_id="orders",
            clock=clock,
        ),
        leases=MemoryDocumentContainer(partition_key_paths=("/id",), database_id="shop", container_id="leases"),
    )

    def get_container(self: ChatterCosmosHook, name: str, *, database_name: str | None = None) -> Any:
        return {"orders": world.monitored, "leases": world.leases}[name]

    monkeypatch.setattr(ChatterCosmosHook, "get_container", get_container)
    monkeypatch.setattr(ChatterCosmosHook, "get_conn", lambda self: world.cosmos_client)
    monkeypatch.setattr(ChatterKafkaHook, "get_publisher", lambda self, **_: world.publisher)
    return world


def xcoms(run: Any, task_id: str, key: str = "return_value") -> list[Any]:
    """Every XCom value one task of a ``dag.test()`` run pushed under ``key`` (one per map index)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == run.dag_id,
                XComModel.run_id == run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == key,
            )
        ).all()
        return [XComModel.deserialize_value(row) for row in rows]


def break_the_feed(world: World, message: str) -> None:
    """Make every change-feed read after a range's first page fail with ``RuntimeError(message)``: a drain
    delivers that page, then fails."""
    from airflow_chatter.adapters.memory.faults import fail
    from airflow_chatter.testing.handlers import first_of

    world.monitored.handler = first_of(
        world.monitored.handler,
        fail(
            "read_change_feed",
            error=RuntimeError(message),
            when=lambda call: call.arguments["continuation"] is not None,
        ),
    )
