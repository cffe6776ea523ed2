"""OpenLineage of the drain, requeue and receive operators, on the memory doubles: what the provider's listener gets
from ``get_openlineage_facets_on_start`` / ``_on_complete`` / ``_on_failure`` after a run. START names no dataset (it
reads no connection: tests/airflow/operators/test_connection_reads.py). Datasets are named per
the OpenLineage naming spec (Cosmos DB: ``azurecosmos://{host}/dbs/{database}`` + ``colls/{container}``; Kafka:
``kafka://{host:port}`` + the topic). The events the listener builds from them: tests/airflow/dags/
test_openlineage_events.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from openlineage.client.serde import Serde

from airflow_chatter.adapters.memory.source import MemoryMessageSource
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.lineage import cosmos_namespace
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.operators.receive import ChatterReceiveOperator
from airflow_chatter.airflow.operators.requeue import ChatterRequeueUndeliverableOperator
from tests.airflow._support import KAFKA_SERVER, break_the_feed, install_world, source

COSMOS = "azurecosmos://127.0.0.1:8081/dbs/shop"  # install_world's endpoint https://127.0.0.1:8081/, database shop
KAFKA = f"kafka://{KAFKA_SERVER}"


def _datasets(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _drain(monkeypatch: pytest.MonkeyPatch, **source_changes: Any) -> tuple[Any, ChatterDrainOperator]:
    world = install_world(monkeypatch)
    config = source(**source_changes)
    [lease] = ChatterListLeasesOperator(task_id="list_leases", source=config).execute(context={})
    return world, ChatterDrainOperator(task_id="drain", source=config, lease_id=lease)


@pytest.mark.parametrize(
    ("endpoint", "namespace"),
    [
        ("https://acct.documents.azure.com:443/", "azurecosmos://acct.documents.azure.com/dbs/db"),
        ("https://acct.documents.azure.com/", "azurecosmos://acct.documents.azure.com/dbs/db"),
        ("https://127.0.0.1:8081/", "azurecosmos://127.0.0.1:8081/dbs/db"),
    ],
)
def test_a_cosmos_namespace_is_the_endpoints_host_and_the_database(endpoint: str, namespace: str) -> None:
    assert cosmos_namespace(endpoint, "db") == namespace, "the port is kept only when it is not HTTPS's 443"


def test_a_drain_reads_the_container_and_writes_the_topics_it_delivered_to(monkeypatch: pytest.MonkeyPatch) -> None:
    world, operator = _drain(monkeypatch, topics={"pay.events": "payments.v1"})
    world.write(tenants=1, per_tenant=3)  # orders.events (unmapped: the topic itself)
    world.write(tenants=1, per_tenant=1, destination="pay.events")
    world.write(tenants=1, per_tenant=2, MessageBody=None)  # violates the contract: stamped undeliverable
    start = operator.get_openlineage_facets_on_start()
    assert start.inputs == [] and start.outputs == [], "naming the container reads the connection: not at START"

    summary = operator.execute(context={})
    complete = operator.get_openlineage_facets_on_complete(None)
    assert _datasets(complete.inputs) == [(COSMOS, "colls/orders")]
    assert _datasets(complete.outputs) == [(KAFKA, "orders.events"), (KAFKA, "payments.v1")]
    assert [o.outputFacets["outputStatistics"].rowCount for o in complete.outputs] == [3, 1], (
        "each topic's messages the broker confirmed"
    )
    assert complete.inputs[0].inputFacets["inputStatistics"].rowCount == summary["documents"]
    facet = Serde.to_dict(complete.run_facets["chatter_drain"])
    assert {k: facet[k] for k in ("delivered", "undeliverable", "skipped", "dropped", "documents")} == {
        k: summary[k] for k in ("delivered", "undeliverable", "skipped", "dropped", "documents")
    }
    assert (facet["delivered"], facet["undeliverable"], facet["lease"]) == (4, 2, summary["lease"])
    assert facet["_schemaURL"].endswith("ChatterDrainRunFacet") and facet["_producer"]
    assert "errorMessage" not in complete.run_facets


def test_a_failed_drain_reports_what_it_delivered_and_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    world, operator = _drain(monkeypatch, max_batch_size=2)
    world.write(tenants=3, per_tenant=2)
    break_the_feed(world, "the feed broke")
    with pytest.raises(RuntimeError, match="the feed broke"):
        operator.execute(context={})
    failure = operator.get_openlineage_facets_on_failure(None)
    assert failure.run_facets["errorMessage"].message == "RuntimeError: the feed broke"
    assert failure.run_facets["errorMessage"].programmingLanguage == "python"
    delivered = len(world.publisher.sent)
    assert 0 < delivered < 6, "the feed broke part way"
    assert _datasets(failure.outputs) == [(KAFKA, "orders.events")], "what it delivered before failing is in Kafka"
    assert failure.outputs[0].outputFacets["outputStatistics"].rowCount == delivered
    assert failure.run_facets["chatter_drain"].delivered == delivered


def test_a_requeue_reads_and_writes_the_container(monkeypatch: pytest.MonkeyPatch) -> None:
    world, operator = _drain(monkeypatch)
    bad = world.write(tenants=1, per_tenant=2, MessageBody=None)
    operator.execute(context={})
    requeue = ChatterRequeueUndeliverableOperator(task_id="requeue", source=source(), document_ids=bad[0]["id"])
    requeue.execute(context={})
    complete = requeue.get_openlineage_facets_on_complete(None)
    assert _datasets(complete.inputs) == _datasets(complete.outputs) == [(COSMOS, "colls/orders")]
    assert complete.outputs[0].outputFacets["outputStatistics"].rowCount == 1
    assert Serde.to_dict(complete.run_facets["chatter_requeue"]) | {"_producer": "", "_schemaURL": ""} == {
        "requeued": 1,
        "changed_meanwhile": 0,
        "not_found": 0,
        "dry_run": False,
        "_producer": "",
        "_schemaURL": "",
    }


# -- the receiver: the topic in, the application container out ------------------------------------------------


def _receive() -> ChatterReceiveOperator:
    return ChatterReceiveOperator(
        task_id="receive",
        topic="orders.events",
        group_id="billing",
        handler="airflow_chatter.examples.orders.record_order_receipt",
        container="app",
        partition_key_paths="/customerId",
        database_name="shop",
    )


def _order(messages: MemoryMessageSource, n: int, *, message_id: bool = True) -> None:
    headers = [("event-type", b"OrderPlaced")] + ([("message-id", f"m-{n}".encode())] if message_id else [])
    body = json.dumps({"orderId": f"o-{n}", "total": n}).encode()
    messages.append("orders.events", body, key=b"c-1", headers=headers)


def test_a_receiver_reads_the_topic_and_writes_the_container(receiving: Any) -> None:
    messages, container = receiving
    for n in range(3):
        _order(messages, n)
    _order(messages, 0)  # the same message again: a duplicate
    operator = _receive()
    start = operator.get_openlineage_facets_on_start()
    assert start.inputs == [] and start.outputs == [], "naming the topic and the container reads the connections"
    result = operator.execute(context={})
    complete = operator.get_openlineage_facets_on_complete(None)
    assert _datasets(complete.inputs) == [(KAFKA, "orders.events")]
    assert _datasets(complete.outputs) == [(COSMOS, "colls/app")]
    assert complete.inputs[0].inputFacets["inputStatistics"].rowCount == 4
    facet = complete.run_facets["chatter_receive"]
    assert (facet.group_id, facet.received, facet.processed, facet.duplicates) == ("billing", 4, 3, 1)
    assert (result["processed"], result["duplicates"]) == (3, 1)
    assert len(list(container.query("SELECT * FROM c WHERE c.type = 'order-receipt'"))) == 3


def test_a_receiver_that_fails_reports_its_error(receiving: Any) -> None:
    messages, _ = receiving
    _order(messages, 1, message_id=False)  # F-07: no identity, not processed
    operator = _receive()
    with pytest.raises(AirflowFailException):
        operator.execute(context={})
    failure = operator.get_openlineage_facets_on_failure(None)
    assert failure.run_facets["errorMessage"].message.startswith("MissingIdentityError: ")
    assert _datasets(failure.inputs) == [(KAFKA, "orders.events")]
