"""Airflow DAG file (example): the downstream half. Consume the orders topic in bounded batches, at least once.

``chatter_consume_orders`` reads the ``orders`` source of the sources config (``$CHATTER_SOURCES_FILE`` or
``chatter_sources.yaml`` beside this file) for its Kafka connection and topic; without such a source this file
defines no DAG. Each run consumes at most ``max_messages`` messages or ``max_seconds`` seconds (trigger-form
``Param``s), stops early once it has caught up, calls ``handle_order_event`` once per message and commits the
group's offsets only after every handler call of the batch returned. It returns a JSON summary as XCom.

Delivery is at least once: a failed run commits nothing, so its whole batch is delivered again, and the drain
itself may publish a message twice. The inbox (its own issue) makes the handler idempotent by deduplicating on
the ``message-id`` header: it will wrap the one ``handle(message)`` call below in an Inbox Marker claim.
A message without a ``message-id`` fails the run (spec F-07: no identity → not processed, not acknowledged).
See docs/airflow.md.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_chatter.adapters.kafka.consumer import ConsumedMessage
from airflow_chatter.airflow.config import load_sources_isolated
from airflow_chatter.airflow.dag_factory import START_DATE, sources_file

log = logging.getLogger("airflow_chatter.examples.consume_orders")

SOURCE = "orders"
DAG_ID = f"chatter_consume_{SOURCE}"
#: The destination the demo's orders are written to; an unmapped destination is the topic itself.
ORDERS_DESTINATION = "chatter-demo.orders"
DEFAULT_GROUP_ID = "chatter-example-consume-orders"


def handle_order_event(message: ConsumedMessage) -> None:
    """The business logic of one order event: here, parse it and log one line.

    ``message.message_id`` is the ``message-id`` header (never blank), ``message.key`` the Kafka key (the
    partition key), ``message.value`` the body, ``message.headers`` every header (``content-type``, the
    outbox message's context entries such as ``event-type``). Raising fails the batch: nothing of it is
    committed and all of it is delivered again.
    """
    body = json.loads(message.value) if message.value else None
    log.info(
        "order event %s message-id=%s key=%s at %s[%d]@%d: %s",
        message.header("event-type") or "unknown",
        message.message_id,
        message.key.decode("utf-8", errors="replace") if message.key else None,
        message.topic,
        message.partition,
        message.offset,
        body,
    )


def handle(message: ConsumedMessage) -> None:
    """Per-message handling: the one seam the inbox issue wraps in an Inbox Marker claim on ``message_id``."""
    handle_order_event(message)


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
        doc_md=f"Consumes `{default_topic}` (connection `{source.kafka_conn_id}`) in bounded, at-least-once batches.",
        params={
            "topic": Param(default_topic, type="string", minLength=1, description="The topic to consume."),
            "group_id": Param(
                DEFAULT_GROUP_ID,
                type="string",
                minLength=1,
                description="Consumer group; its offsets are the progress.",
            ),
            "max_messages": Param(1000, type="integer", minimum=1, maximum=100_000, description="Messages per run."),
            "max_seconds": Param(60, type="number", exclusiveMinimum=0, maximum=3600, description="Seconds per run."),
        },
    ) as dag:

        @task(execution_timeout=timedelta(hours=1, minutes=5))
        def consume() -> dict[str, Any]:
            from airflow.sdk import get_current_context
            from airflow.sdk.exceptions import AirflowFailException

            from airflow_chatter.adapters.kafka.consumer import MissingMessageIdError, consume_batch
            from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

            params = get_current_context()["params"]
            topic, group_id = str(params["topic"]), str(params["group_id"])
            consumer = ChatterKafkaHook(source.kafka_conn_id).get_consumer([topic], group_id)
            try:
                # Offsets are committed only after handle() returned for every message of the batch
                # (at least once; the inbox will deduplicate redeliveries on message-id).
                summary = consume_batch(
                    consumer,
                    handle,
                    max_messages=int(params["max_messages"]),
                    max_seconds=float(params["max_seconds"]),
                    topics=[topic],
                    group_id=group_id,
                )
            except MissingMessageIdError as error:
                # A retry would meet the same message: fail now, without retries, and commit nothing.
                raise AirflowFailException(str(error)) from error
            finally:
                consumer.close(autocommit=False)
            result = summary.to_dict()
            log.info(
                "consume topic=%s group=%s consumed=%d by_event_type=%s stopped_by=%s committed=%s",
                topic,
                group_id,
                result["consumed"],
                json.dumps(result["by_event_type"]),
                result["stopped_by"],
                result["committed"],
            )
            return result

        consume()
    # [END chatter_consume_dag]
    return dag


globals().update({dag.dag_id: dag for dag in [_orders_dag()] if dag is not None})
