"""A task reads each of its connections once, and OpenLineage's START reads none.

A connection lookup in a task is a request to Airflow's API server (or a secrets backend): a task that read its
connections many times loaded the API server, and a START whose facets read them ran past the listener's few seconds
and was lost. Each task below runs as Airflow runs it, START facets, ``execute``, then COMPLETE (or FAIL) facets,
while ``BaseHook.get_connection`` counts the reads per connection id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
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
