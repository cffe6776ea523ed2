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
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_chatter.airflow.dags.config import load_sources_isolated
from airflow_chatter.airflow.dags.factory import START_DATE, sources_file
from airflow_chatter.airflow.operators.receive import ChatterReceiveOperator

SOURCE = "orders"
DAG_ID = f"chatter_consume_{SOURCE}"
#: The destination the demo's orders are written to; an unmapped destination is the topic itself.
ORDERS_DESTINATION = "chatter-demo.orders"
DEFAULT_GROUP_ID = "chatter-example-consume-orders"
HANDLER = "airflow_chatter.examples.orders.record_order_receipt"


def _orders_dag() -> DAG | None:
    config = load_sources_isolated(sources_file(Path(__file__).parent)).config  # a broken other entry is no concern
    source = next((s for s in config.sources if s.name == SOURCE), None) if config else None
    if source is None:
        return None
    mapped = sorted(set(source.topics.values()))
    default_topic = source.topics.get(ORDERS_DESTINATION) or (mapped[0] if len(mapped) == 1 else ORDERS_DESTINATION)

    # [START chatter_consume_dag]
    with DAG(
        dag_id=DAG_ID,
        schedule=None,  # manual; give it a schedule (e.g. "*/10 * * * *") to consume periodically
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,  # one consumer of the group per run
        default_args={"owner": "chatter", "retries": 2, "retry_delay": timedelta(seconds=30)},
        tags=["chatter", "inbox", "example"],
        doc_md=f"Receives `{default_topic}` (connection `{source.kafka_conn_id}`) idempotently into "
        f"`{source.database}/{source.monitored_container}`.",
        params={
            "topic": Param(default_topic, type="string", minLength=1, description="The topic to consume."),
            "group_id": Param(
                DEFAULT_GROUP_ID,
                type="string",
                minLength=1,
                description="Consumer group; its offsets are the progress and it names the receiver.",
            ),
            "max_messages": Param(1000, type="integer", minimum=1, maximum=100_000, description="Messages per run."),
            "max_seconds": Param(60, type="number", exclusiveMinimum=0, maximum=3600, description="Seconds per run."),
        },
    ) as dag:
        ChatterReceiveOperator(
            task_id="receive",
            topic="{{ params.topic }}",
            group_id="{{ params.group_id }}",
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
    # [END chatter_consume_dag]
    return dag


globals().update({dag.dag_id: dag for dag in [_orders_dag()] if dag is not None})
