"""The pending-age check (``ChatterPendingAgeCheckOperator``) at execute level, its gauge, and its DAG: it fails,
so Airflow's notifiers alert, while a source's oldest Pending Outbox Document is older than
``max_pending_age_seconds``, and passes again once the source drained."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_chatter.airflow.dags.factory import PENDING_AGE_DAG_ID, build_pending_age_dag
from airflow_chatter.airflow.notifiers import ChatterPendingAgeNotifier
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.operators.pending_age import ChatterPendingAgeCheckOperator, PendingAgeExceededError
from airflow_chatter.airflow.sources import SourcesFile
from airflow_chatter.operations import pending_age
from airflow_chatter.testing.clock import ManualClock
from tests.airflow._support import install_world, source
from tests.unit.drain._drain_support import Metrics


def _check(**changes: Any) -> ChatterPendingAgeCheckOperator:
    return ChatterPendingAgeCheckOperator(task_id="pending_age_orders", source=source(**changes))


def test_a_document_pending_longer_than_the_limit_fails_the_check_naming_the_age_and_a_drain_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = ManualClock(datetime.now(UTC) - timedelta(minutes=10))  # the documents were written 10 min ago
    world = install_world(monkeypatch, clock=written)
    (lease_id,) = ChatterListLeasesOperator(task_id="list_leases", source=source()).execute(context={})
    world.write(tenants=1, per_tenant=2)

    with pytest.raises(PendingAgeExceededError, match=r"source orders: .*waited 6\d\d s, over max_pending_age_s"):
        _check(max_pending_age_seconds=300).execute(context={})

    ChatterDrainOperator(task_id="drain", source=source(), lease_id=lease_id).execute(context={})
    cleared = _check(max_pending_age_seconds=300).execute(context={})
    assert cleared == {
        "source": "orders",
        "oldest_pending_age_seconds": 0.0,
        "max_pending_age_seconds": 300.0,
        "verdict": "within",
    }, "drained: caught up, the check passes and the alert clears"


def test_a_source_without_leases_has_an_unknown_age_and_passes_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    result = _check(max_pending_age_seconds=300).execute(context={})
    assert (result["oldest_pending_age_seconds"], result["verdict"]) == (None, "unknown"), "unknown, never 0"


def test_the_gauge_records_a_known_age_and_nothing_for_an_unknown_one() -> None:
    metrics = Metrics()
    pending_age.record_pending_age("orders", pending_age.oldest_pending_age([], 300), metrics.provider)
    assert metrics.points(pending_age.PENDING_AGE_GAUGE) == [], "unknown is not recorded as 0"
    pending_age.record_pending_age("orders", pending_age.oldest_pending_age([12.0, 420.5], 300), metrics.provider)
    (point,) = metrics.points(pending_age.PENDING_AGE_GAUGE)
    assert point.value == 420.5 and dict(point.attributes) == {pending_age.ATTR_SOURCE: "orders"}


def test_max_pending_age_seconds_is_validated_naming_the_field() -> None:
    from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources

    entry = source().model_dump(mode="json")
    with pytest.raises(SourcesConfigError, match=r"max_pending_age_seconds"):
        parse_sources({"sources": [{**entry, "max_pending_age_seconds": 0}]})
    with pytest.raises(SourcesConfigError, match=r"max_pending_age_seconds"):
        parse_sources({"sources": [{**entry, "max_pending_age_seconds": "soon"}]})


def test_the_check_dag_has_one_task_per_watched_source_no_retries_and_the_notifier_on_failure() -> None:
    watched = source(max_pending_age_seconds=300)
    other = source(name="billing", monitored_container="billing", lease_container="leases-b")
    dag = build_pending_age_dag(SourcesFile(sources=[watched, other]))
    assert dag is not None and dag.dag_id == PENDING_AGE_DAG_ID
    (task,) = dag.tasks
    assert task.task_id == "pending_age_orders" and task.retries == 0, "a failed check alerts at once"
    assert [type(n) for n in task.on_failure_callback] == [ChatterPendingAgeNotifier]  # type: ignore[union-attr]
    assert build_pending_age_dag(SourcesFile(sources=[other])) is None, "no limit anywhere: no DAG"


def test_the_default_notifier_logs_the_alert_at_error(caplog: pytest.LogCaptureFixture) -> None:
    class Ti:
        task_id = "pending_age_orders"

    error = PendingAgeExceededError("source orders: the oldest Pending Outbox Document has waited 601 s")
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.alerts"):
        ChatterPendingAgeNotifier().notify({"ti": Ti(), "exception": error})
    assert "Pending-age alert (pending_age_orders): source orders: the oldest Pending" in caplog.text
