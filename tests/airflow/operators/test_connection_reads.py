"""A task reads each of its connections once, and OpenLineage's START reads none.

A connection lookup in a task is a request to Airflow's API server (or a secrets backend): a task that read its
connections many times loaded the API server, and a START whose facets read them ran past the listener's few seconds
and was lost. Each task below runs as Airflow runs it, START facets, ``execute``, then COMPLETE (or FAIL) facets,
while ``BaseHook.get_connection`` counts the reads per connection id. A task process parses the task's DAG file
first, and a file that reads a connection while parsed (the example receiver's, to name its topic's asset) shares
that read with the task; the DAG processor, the triggerer and the API server read afresh for every hook.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException

from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.operators.requeue import ChatterRequeueUndeliverableOperator
from tests.airflow._support import install_world, source
from tests.airflow.operators.test_lineage import _order, _receive

COSMOS, KAFKA = "chatter_cosmos_default", "chatter_kafka_default"
CONSUME_ORDERS = Path(__file__).resolve().parents[3] / "dags" / "example_chatter_consume_orders.py"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every connection read from now on, by connection id."""
    counted: Counter[str] = Counter()
    original = BaseHook.get_connection.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BaseHook], conn_id: str) -> Any:
        counted[conn_id] += 1
        return original(cls, conn_id)

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(counting))
    return counted


def run_task(operator: Any, reads: Counter[str], *, fails: bool = False) -> tuple[Counter[str], Counter[str]]:
    """Run ``operator`` as Airflow does with the OpenLineage listener on; the reads of its START facets, and of the
    whole task."""
    reads.clear()
    operator.get_openlineage_facets_on_start()
    at_start = Counter(reads)
    if fails:
        with pytest.raises(AirflowFailException):
            operator.execute(context={})
        operator.get_openlineage_facets_on_failure(None)
    else:
        operator.execute(context={})
        operator.get_openlineage_facets_on_complete(None)
    return at_start, Counter(reads)


def test_a_drain_task_reads_each_connection_once_and_its_start_reads_none(
    monkeypatch: pytest.MonkeyPatch, reads: Counter[str]
) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=2)
    [lease] = ChatterListLeasesOperator(task_id="list_leases", source=source()).execute(context={})
    at_start, in_all = run_task(ChatterDrainOperator(task_id="drain", source=source(), lease_id=lease), reads)
    assert at_start == Counter(), "START does no I/O: no connection read"
    assert in_all == Counter({COSMOS: 1, KAFKA: 1}), "one read per connection per task"
    assert world.statuses() == {"delivered": 4}, "the drain did its work"


def test_a_list_leases_task_reads_the_cosmos_connection_once(
    monkeypatch: pytest.MonkeyPatch, reads: Counter[str]
) -> None:
    install_world(monkeypatch, feed_ranges=2)
    reads.clear()
    leases = ChatterListLeasesOperator(task_id="list_leases", source=source()).execute(context={})
    assert len(leases) == 2 and reads == Counter({COSMOS: 1})


def test_a_requeue_task_reads_the_cosmos_connection_once_and_its_start_reads_none(
    monkeypatch: pytest.MonkeyPatch, reads: Counter[str]
) -> None:
    world = install_world(monkeypatch)
    bad = world.write(tenants=1, per_tenant=1, MessageBody=None)
    [lease] = ChatterListLeasesOperator(task_id="list_leases", source=source()).execute(context={})
    ChatterDrainOperator(task_id="drain", source=source(), lease_id=lease).execute(context={})
    requeue = ChatterRequeueUndeliverableOperator(task_id="requeue", source=source(), document_ids=bad[0]["id"])
    at_start, in_all = run_task(requeue, reads)
    assert (at_start, in_all) == (Counter(), Counter({COSMOS: 1}))
    assert world.statuses() == {"pending": 1}, "the requeue did its work"


@pytest.mark.parametrize("fails", [False, True])
def test_a_receive_task_reads_each_connection_once_and_its_start_reads_none(
    receiving: Any, reads: Counter[str], fails: bool
) -> None:
    messages, _ = receiving
    order: Callable[..., None] = _order
    order(messages, 1, message_id=not fails)  # without a message id the receive fails (F-07)
    at_start, in_all = run_task(_receive(), reads, fails=fails)
    assert at_start == Counter(), "START does no I/O: no connection read"
    assert in_all == Counter({COSMOS: 1, KAFKA: 1}), "one read per connection per task, COMPLETE or FAIL included"


@pytest.fixture
def task_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path, str, str], Any]]:
    """Parse a DAG file as Airflow's task runner does before it runs a task (``startup``: the file is imported under
    the parsing context that names the task, which stays set while the task runs); returns that task."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions._internal.dag_parsing_context import _airflow_parsing_context_manager
    from airflow.sdk.definitions.context import _AIRFLOW_PARSING_CONTEXT_DAG_ID, _AIRFLOW_PARSING_CONTEXT_TASK_ID

    from airflow_chatter.airflow.hooks import _connection

    context = (_AIRFLOW_PARSING_CONTEXT_DAG_ID, _AIRFLOW_PARSING_CONTEXT_TASK_ID)
    for name in context:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_connection, "_TASK_READS", {})  # this process is the task's for this test only

    def parse(path: Path, dag_id: str, task_id: str) -> Any:
        with _airflow_parsing_context_manager(dag_id=dag_id, task_id=task_id):
            bag = DagBag(dag_folder=str(path))
        assert bag.import_errors == {}, bag.import_errors
        return bag.dags[dag_id].get_task(task_id)

    yield parse
    # Airflow's context manager leaves the parsing context set when none was set before (a task process keeps it),
    # and monkeypatch restores only what it changed: without this, every later test of the session would run as
    # this task, and its hooks would share connections read by earlier tests.
    for name in context:
        os.environ.pop(name, None)


@pytest.mark.parametrize("dag_id", ["chatter_consume_orders", "chatter_consume_orders_on_arrival"])
def test_a_receive_task_reads_each_connection_once_with_its_dag_files_parse(
    receiving: Any, reads: Counter[str], sources_file: Any, task_process: Any, dag_id: str
) -> None:
    """The example receiver's file reads the Kafka connection while it is parsed, to name the topic's ``kafka://``
    asset; a task process parses that file before its task runs, and the parse's read is the task's one read."""
    messages, container = receiving
    topics = {"chatter-demo.orders": "orders.events"}
    orders = {"name": "orders", "database": "shop", "monitored_container": "app", "lease_container": "leases"}
    sources_file({"sources": [{**orders, "partition_key_paths": "/customerId", "topics": topics}]})
    _order(messages, 1)
    reads.clear()
    receive = task_process(CONSUME_ORDERS, dag_id, "receive")
    at_parse = Counter(reads)
    params = {"topic": "orders.events", "group_id": "chatter-example-consume-orders", "max_messages": 10}
    receive.render_template_fields({"params": {**params, "max_seconds": 5}})
    at_start, in_task = run_task(receive, reads)
    assert at_parse == Counter({KAFKA: 1}), "the parse names the topic's asset from the Kafka connection"
    assert at_start == Counter(), "START does no I/O: no connection read"
    assert at_parse + in_task == Counter({COSMOS: 1, KAFKA: 1}), "one read per connection in the task's process"
    assert len(list(container.query("SELECT * FROM c WHERE c.type = 'order-receipt'"))) == 1, "it received"


def test_outside_a_task_process_each_hook_reads_its_connection_afresh(
    monkeypatch: pytest.MonkeyPatch, reads: Counter[str]
) -> None:
    """The DAG processor, the triggerer and the API server have no parsing context: a connection changed meanwhile
    reaches their next parse, trigger or connection test, so nothing is kept past one hook there."""
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    monkeypatch.delenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", raising=False)
    monkeypatch.delenv("_AIRFLOW_PARSING_CONTEXT_TASK_ID", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT", '{"conn_type": "chatterkafka", "host": "old-broker:9092"}')
    assert ChatterKafkaHook(KAFKA).bootstrap_server() == "old-broker:9092"
    monkeypatch.setenv("AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT", '{"conn_type": "chatterkafka", "host": "new-broker:9092"}')
    assert ChatterKafkaHook(KAFKA).bootstrap_server() == "new-broker:9092", "the next hook sees the change"
    assert reads == Counter({KAFKA: 2})
