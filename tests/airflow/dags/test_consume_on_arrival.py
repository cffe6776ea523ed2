"""The event-driven receiver of dags/example_chatter_consume_orders.py: ``chatter_consume_orders_on_arrival`` is
scheduled on its topic's ``kafka://`` asset, watched by ``ChatterTopicBacklogTrigger`` for the group's backlog, and a
drain run's asset event for the topic queues it too. Parse and kwargs tests need no services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.airflow._support import KAFKA_SERVER, PK_PATH, install_world

DAGS = Path(__file__).resolve().parents[3] / "dags"
TOPIC = "shop.orders.v1"
GROUP = "chatter-example-consume-orders"


def _bag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / "example_chatter_consume_orders.py"))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def _orders(**changes: Any) -> dict[str, Any]:
    return {
        "sources": [
            {
                "name": "orders",
                "database": "shop",
                "monitored_container": "orders",
                "lease_container": "leases",
                "partition_key_paths": PK_PATH,
                "topics": {"chatter-demo.orders": TOPIC},
                **changes,
            }
        ]
    }


def _kafka_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str = "chatter_kafka_default") -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "chatterkafka", "host": f" {KAFKA_SERVER} , broker-2:9092"}),
    )


def test_the_on_arrival_receiver_is_scheduled_on_the_topics_kafka_asset_watched_for_its_groups_backlog(
    sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk import Asset

    sources_file(_orders(kafka_conn_id="orders_kafka"))
    _kafka_conn(monkeypatch, "orders_kafka")
    dag = _bag().dags["chatter_consume_orders_on_arrival"]
    [asset] = dag.timetable.asset_condition.objects
    assert isinstance(asset, Asset)
    assert asset.uri == f"kafka://{KAFKA_SERVER}/{TOPIC}", (
        "the Kafka provider's asset of the topic, named by the connection's first bootstrap server: the one the "
        "drain emits events for"
    )
    [watcher] = asset.watchers
    assert watcher.trigger.serialize() == (
        "airflow_chatter.airflow.triggers.topic_backlog.ChatterTopicBacklogTrigger",
        {"topic": TOPIC, "group_id": GROUP, "kafka_conn_id": "orders_kafka", "poll_interval": 2.0},
    ), "the watcher waits for the receiver's own group, on the source's connection"
    receive = dag.get_task("receive")
    assert (receive.topic, receive.group_id) == (TOPIC, GROUP), "fixed at parse time: what the watcher watches"
    assert receive.chatter_kafka_conn_id == "orders_kafka"
    assert set(dag.params.keys()) == {"max_messages", "max_seconds"}, "no topic or group to change per run"
    assert dag.max_active_runs == 1, "one consumer of the group at a time"


def test_the_manual_receiver_stays_beside_it(sources_file: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sources_file(_orders())
    _kafka_conn(monkeypatch)
    bag = _bag()
    assert {"chatter_consume_orders", "chatter_consume_orders_on_arrival"} <= set(bag.dag_ids)
    manual = bag.dags["chatter_consume_orders"]
    assert type(manual.timetable).__name__ == "NullTimetable", "manual: a person (or a cron you give it) starts it"
    assert manual.params["topic"] == TOPIC and manual.params["group_id"] == GROUP


def test_without_a_readable_kafka_connection_only_the_manual_receiver_is_defined(
    sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources_file(_orders(kafka_conn_id="not_defined_anywhere"))
    bag = _bag()
    assert "chatter_consume_orders" in bag.dag_ids
    assert "chatter_consume_orders_on_arrival" not in bag.dag_ids, (
        "its asset is named by the connection's bootstrap server; without it the file still parses"
    )


@pytest.mark.airflow
def test_a_drain_runs_asset_event_queues_the_on_arrival_receiver(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DAG scheduled on the topic's kafka:// asset chains to the drain: the drain run's event queues it."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select, update

    sources_file(_orders(pool=None))
    world = install_world(monkeypatch)
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    drain = bag.dags["chatter_drain_orders"]
    assert drain.test().state == "success", "a run with nothing to drain writes the bundle's DAGs to the DB"
    with create_session() as session:  # a paused DAG is never queued by an asset event
        session.execute(
            update(DagModel).where(DagModel.dag_id == "chatter_consume_orders_on_arrival").values(is_paused=False)
        )
    world.write(tenants=2, per_tenant=2, destination="chatter-demo.orders")
    run = drain.test()
    assert run.state == "success"
    assert len(world.publisher.sent) == 4
    with create_session() as session:
        queued = session.execute(
            select(AssetModel.uri, AssetDagRunQueue.target_dag_id).join(
                AssetModel, AssetDagRunQueue.asset_id == AssetModel.id
            )
        ).all()
    assert (f"kafka://{KAFKA_SERVER}/{TOPIC}", "chatter_consume_orders_on_arrival") in queued, queued
