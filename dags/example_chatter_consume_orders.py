"""Airflow DAG file (example): the downstream half. Receive the orders topic idempotently, in bounded runs.

``chatter_consume_orders`` reads the ``orders`` source of the sources config (``$CHATTER_SOURCES_FILE`` or
``chatter_sources.yaml`` beside this file) for its Kafka and Cosmos connections, its container and its topic;
without such a source this file defines no DAG. Each run receives at most ``max_messages`` deliveries or
``max_seconds`` seconds (trigger-form ``Param``s) and stops early once it has caught up.

Per delivery, ``ChatterReceiveOperator`` opens one Unit of Work on the order's partition (the Kafka key), stages the
Inbox Marker (scoped to the consumer group), runs ``airflow_chatter.examples.orders.record_order_receipt`` (one
``receipt-<orderId>`` document per ``OrderPlaced``), commits the receipt and the marker in one transactional batch,
and only then commits the offset. A redelivered event, from a failed run or from the drain publishing twice, finds
its marker and writes nothing again. A message without a ``message-id`` fails the run (spec F-07: no identity → not
processed, not acknowledged). See docs/inbox.md.

``chatter_consume_orders_on_arrival`` is the same receiver started by messages instead of a person or a clock: it
is scheduled on the topic's ``kafka://<bootstrap server>/<topic>`` asset (``topic_backlog_asset``), whose
``AssetWatcher`` runs ``ChatterTopicBacklogTrigger`` in the triggerer and fires when the consumer group has records
past its committed offsets; a drain's asset event for the topic starts it too. Its topic and group are fixed when
this file is parsed (the trigger watches them); the bootstrap server is read from the Kafka connection then (in a
task's process, that read is the task's one read of it: docs/decisions.md D-15). Unpause one of the two DAGs, not
both: they share the consumer group, and ``max_active_runs`` holds per DAG only.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Param
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_chatter.airflow.assets import topic_backlog_asset
from airflow_chatter.airflow.dags.factory import START_DATE, sources_file
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.airflow.operators.receive import ChatterReceiveOperator
from airflow_chatter.airflow.sources import SourceConfig, load_sources_isolated
from airflow_chatter.errors import ConfigurationError

SOURCE = "orders"
DAG_ID = f"chatter_consume_{SOURCE}"
WATCHER_DAG_ID = f"{DAG_ID}_on_arrival"
#: Seconds between the watcher's looks at the group's backlog (a read of end and committed offsets).
WATCH_POLL_SECONDS = 2.0
#: The destination the demo's orders are written to; an unmapped destination is the topic itself.
ORDERS_DESTINATION = "chatter-demo.orders"
DEFAULT_GROUP_ID = "chatter-example-consume-orders"
HANDLER = "airflow_chatter.examples.orders.record_order_receipt"
log = logging.getLogger(__name__)


def _receive(source: SourceConfig, topic: str, group_id: str) -> ChatterReceiveOperator:
    return ChatterReceiveOperator(
        task_id="receive",
        topic=topic,
        group_id=group_id,
        handler=HANDLER,
        container=source.monitored_container,
        partition_key_paths=source.partition_key_paths,
        database_name=source.database,
        max_messages="{{ params.max_messages }}",
        max_seconds="{{ params.max_seconds }}",
        chatter_kafka_conn_id=source.kafka_conn_id,
        chatter_cosmos_conn_id=source.cosmos_conn_id,
        execution_timeout=timedelta(hours=1, minutes=5),
    )


_LIMITS = {
    "max_messages": Param(1000, type="integer", minimum=1, maximum=100_000, description="Messages per run."),
    "max_seconds": Param(60, type="number", exclusiveMinimum=0, maximum=3600, description="Seconds per run."),
}
_COMMON: dict[str, object] = {
    "start_date": START_DATE,
    "catchup": False,
    "max_active_runs": 1,  # one consumer of the group per run
    "default_args": {"owner": "chatter", "retries": 2, "retry_delay": timedelta(seconds=30)},
    "tags": ["chatter", "inbox", "example"],
}


def _orders_dags() -> list[DAG]:
    config = load_sources_isolated(sources_file(Path(__file__).parent)).config  # a broken other entry is no concern
    source = next((s for s in config.sources if s.name == SOURCE), None) if config else None
    if source is None:
        return []
    mapped = sorted(set(source.topics.values()))
    default_topic = source.topics.get(ORDERS_DESTINATION) or (mapped[0] if len(mapped) == 1 else ORDERS_DESTINATION)
    doc = (
        f"Receives `{default_topic}` (connection `{source.kafka_conn_id}`) idempotently into "
        f"`{source.database}/{source.monitored_container}`."
    )

    # [START chatter_consume_dag]
    with DAG(
        dag_id=DAG_ID,
        schedule=None,  # manual; give it a schedule (e.g. "*/10 * * * *") to consume periodically
        doc_md=doc,
        params={
            "topic": Param(default_topic, type="string", minLength=1, description="The topic to consume."),
            "group_id": Param(
                DEFAULT_GROUP_ID,
                type="string",
                minLength=1,
                description="Consumer group; its offsets are the progress and it names the receiver.",
            ),
            **_LIMITS,
        },
        **_COMMON,  # type: ignore[arg-type]
    ) as manual:
        _receive(source, "{{ params.topic }}", "{{ params.group_id }}")
    # [END chatter_consume_dag]

    try:
        server = ChatterKafkaHook(source.kafka_conn_id).bootstrap_server()  # a connection read, no network I/O
    except (AirflowNotFoundException, ConfigurationError) as error:
        log.warning("%s not defined: the Kafka connection cannot name the topic's asset (%s)", WATCHER_DAG_ID, error)
        return [manual]

    # [START chatter_consume_on_arrival_dag]
    # --8<-- [start:chatter_consume_on_arrival_dag]
    with DAG(
        dag_id=WATCHER_DAG_ID,
        # Runs when the group has records past its committed offsets (the watcher, in the triggerer), and on
        # every asset event of the topic (a drain's, or a Kafka-provider producer's).
        schedule=[
            topic_backlog_asset(
                default_topic,
                DEFAULT_GROUP_ID,
                kafka_conn_id=source.kafka_conn_id,
                server=server,
                poll_interval=WATCH_POLL_SECONDS,
            )
        ],
        doc_md=doc + " Started when messages arrive.",
        params=dict(_LIMITS),
        **_COMMON,  # type: ignore[arg-type]
    ) as on_arrival:
        _receive(source, default_topic, DEFAULT_GROUP_ID)
    # --8<-- [end:chatter_consume_on_arrival_dag]
    # [END chatter_consume_on_arrival_dag]
    return [manual, on_arrival]


globals().update({dag.dag_id: dag for dag in _orders_dags()})
