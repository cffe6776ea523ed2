"""dag.test() end to end against the Cosmos emulator and a real Kafka broker.

One test, in one process (the first dag.test() pays a ~12 s warm-up), walking the life of a source:
scheduled drain, a second scheduled run that publishes nothing, a backfill from the beginning that
re-drains only what is still pending without touching the scheduled checkpoints, and the deferrable
sensor deferring and resuming.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.partition_keys import partition_key_to_kafka_key
from tests.airflow._support import xcoms
from tests.fixtures.kafka import topic_record_count

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.cosmos]

DAGS = Path(__file__).resolve().parents[3] / "dags"
PK_PATH = "/customerId"
DESTINATION = "orders.events"


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def _orders(container: Any, customers: int, per_customer: int, tag: str) -> list[dict[str, Any]]:
    written = []
    for c in range(customers):
        customer = f"cust-{tag}-{c}"
        for n in range(per_customer):
            message = OutboxMessage(
                message_id=f"order-{tag}-{c}-{n}-{uuid.uuid4().hex[:8]}",
                destination=DESTINATION,
                body=json.dumps({"customer": customer, "order": n}),
                content_type="application/json",
                context={"tenant": "acme"},
            )
            written.append(container.create_item(message.to_document(PK_PATH, customer)))
    return written


def _run(dag: Any, **kwargs: Any) -> Any:
    run = dag.test(**kwargs)
    assert run.state == "success", f"{dag.dag_id} ended {run.state}"
    return run


def test_scheduled_drain_backfill_and_sensor_end_to_end(
    airflow_db: Any,
    cosmos_endpoint: Any,
    cosmos_database: Any,
    cosmos_container_factory: Any,
    kafka_bootstrap: str,
    kafka_topic: str,
    sources_file: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from tests.fixtures.kafka import consume_records

    monitored = cosmos_container_factory(partition_key_paths=(PK_PATH,), default_ttl=-1)
    leases = cosmos_container_factory(partition_key_paths=("/id",))
    verify = cosmos_endpoint.verify
    _conn(
        monkeypatch,
        "chatter_cosmos_e2e",
        conn_type="chattercosmos",
        host=cosmos_endpoint.url,
        password=cosmos_endpoint.key,
        extra={
            "database_name": cosmos_database.id,
            "connection_verify": verify is not False,
            **({"ca_cert_path": verify} if isinstance(verify, str) else {}),
        },
    )
    _conn(monkeypatch, "chatter_kafka_e2e", conn_type="chatterkafka", host=kafka_bootstrap)
    sources_file(
        {
            "sources": [
                {
                    "name": "e2e",
                    "cosmos_conn_id": "chatter_cosmos_e2e",
                    "kafka_conn_id": "chatter_kafka_e2e",
                    "database": cosmos_database.id,
                    "monitored_container": monitored.id,
                    "lease_container": leases.id,
                    "partition_key_paths": PK_PATH,
                    "topics": {DESTINATION: kafka_topic},
                    "max_batch_size": 100,
                    "max_documents": 2000,
                    "max_seconds": 120,
                }
            ]
        }
    )
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    drain_dag, backfill_dag, wait_dag = (
        bag.dags[d] for d in ("chatter_drain_e2e", "chatter_backfill", "chatter_wait_e2e")
    )

    # 1. 500 pending documents over 10 partition keys → 500 Kafka messages.
    orders = _orders(monitored, customers=10, per_customer=50, tag="a")
    run = _run(drain_dag)
    [summary] = xcoms(run, "drain")
    assert summary["published"] == 500 and summary["delivered"] == 500, summary
    records = consume_records(kafka_bootstrap, kafka_topic, 500)
    assert len(records) == 500
    by_id = {d["MessageId"]: d for d in orders}
    for record in records:
        headers = dict(record.headers)
        document = by_id[headers["message-id"].decode()]
        assert record.topic == kafka_topic, "the destination is mapped to the configured topic"
        assert record.key == partition_key_to_kafka_key(document["customerId"]), "keyed by partition key"
        assert headers["content-type"] == b"application/json"
        assert headers["tenant"] == b"acme", "message context entries become headers"
    keys = Counter(record.key for record in records)
    assert len(keys) == 10 and set(keys.values()) == {50}
    stored = list(monitored.query_items("SELECT * FROM c", enable_cross_partition_query=True))
    assert {(d["status"], d.get("ttl")) for d in stored} == {("delivered", 86400)}, (
        "every document delivered, with a ttl"
    )
    scheduled_leases = list(
        leases.query_items("SELECT * FROM c WHERE c.lease_prefix = ''", enable_cross_partition_query=True)
    )
    assert scheduled_leases and all(l["continuation"] and l["checkpointed_at"] for l in scheduled_leases), (
        "checkpointed"
    )
    assert all(l["owner"] is None for l in scheduled_leases), "released after the run"

    # 2. A second run publishes nothing.
    run = _run(drain_dag)
    assert [s["published"] for s in xcoms(run, "drain")] == [0]
    assert topic_record_count(kafka_bootstrap, kafka_topic) == 500, "nothing new on the topic"

    # 3. A backfill from the beginning re-drains only what is still pending; scheduled checkpoints stay.
    checkpoints = {l["id"]: l["continuation"] for l in scheduled_leases}
    late = _orders(monitored, customers=2, per_customer=3, tag="b")
    run = _run(backfill_dag, run_conf={"source": "e2e", "start": "beginning", "dry_run": True})
    [plan] = xcoms(run, "list_backfill_leases", key="plan")
    assert plan["pending"] == len(late), "a dry run counts what a backfill would publish"
    assert not list(
        leases.query_items("SELECT * FROM c WHERE c.lease_prefix = 'backfill-'", enable_cross_partition_query=True)
    ), "a dry run creates no lease"
    # NOTE: dry_run is passed explicitly: in one process dag.test() keeps the previous run's conf in the DAG's params.
    run = _run(backfill_dag, run_conf={"source": "e2e", "start": "beginning", "dry_run": False})
    [summary] = xcoms(run, "backfill_drain")
    assert summary["published"] == len(late), "delivered documents are skipped; only the pending ones go out"
    assert summary["skipped"] >= 500
    after = {
        l["id"]: l
        for l in leases.query_items("SELECT * FROM c WHERE c.lease_prefix = ''", enable_cross_partition_query=True)
    }
    assert {i: l["continuation"] for i, l in after.items()} == checkpoints, "the backfill moved no scheduled checkpoint"
    assert all(l["owner"] is None for l in after.values()), "the backfill released the scheduled lease it held"
    run = _run(drain_dag)
    assert [s["published"] for s in xcoms(run, "drain")] == [0], "the scheduled drain finds them already delivered"
    assert topic_record_count(kafka_bootstrap, kafka_topic) == 506

    # 4. The deferrable sensor defers (its trigger runs inline in dag.test) and resumes into a drain.
    _orders(monitored, customers=1, per_customer=2, tag="c")
    run = _run(wait_dag)
    [event] = xcoms(run, "wait_for_pending")
    assert event["pending"] == 2
    assert [s["published"] for s in xcoms(run, "drain")] == [2]


def test_hooks_test_connection_against_the_services(
    cosmos_endpoint: Any, cosmos_database: Any, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    verify = cosmos_endpoint.verify
    _conn(
        monkeypatch,
        "chatter_cosmos_probe",
        conn_type="chattercosmos",
        host=cosmos_endpoint.url,
        password=cosmos_endpoint.key,
        extra={"database_name": cosmos_database.id, **({"ca_cert_path": verify} if isinstance(verify, str) else {})},
    )
    _conn(monkeypatch, "chatter_kafka_probe", conn_type="chatterkafka", host=kafka_bootstrap)
    assert ChatterCosmosHook("chatter_cosmos_probe").test_connection() == (
        True,
        f"Connected to Cosmos DB; database {cosmos_database.id!r} exists.",
    )
    ok, message = ChatterKafkaHook("chatter_kafka_probe").test_connection(timeout_s=10)
    assert ok, message
