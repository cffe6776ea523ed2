"""``ChatterReceiveOperator``: consume a topic with a consumer group through the idempotent receiver.

The operator builds the hooks and calls the one receive loop, ``airflow_chatter.inbox.receive.receive``, over the
Kafka message source: a bounded run (``max_messages`` or ``max_seconds``, or until caught up) where each delivery's
writes, outbox messages and Inbox Marker commit together before its offset is committed. See docs/inbox.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_chatter.airflow.operators.base import TaskHooks
from airflow_chatter.airflow.operators.lineage import (
    ChatterLineage,
    LineageRecord,
    cosmos_dataset,
    kafka_dataset,
)
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.receiver import check_tier

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.airflow.hooks.inbox import ChatterInboxHook
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook


def _positive(value: Any, option: str, kind: type[int] | type[float]) -> Any:
    """A rendered template is a string: convert it, naming the option when it is not a positive number."""
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigurationError(option, value, f"must be a positive {kind.__name__}") from None
    if number <= 0:
        raise ConfigurationError(option, value, f"must be a positive {kind.__name__}")
    return number


class ChatterReceiveOperator(ChatterLineage, BaseOperator):
    """Receive deliveries idempotently: the handler's Cosmos writes are applied once per identity and receiver.

    :param topic: the topic to consume (templated).
    :param group_id: the consumer group; its committed offsets are the progress (templated).
    :param handler: dotted path of ``handler(delivery)``, imported at execute, so the DAG stays serializable.
    :param container: the application container (document tier) or the Inbox Marker container (standalone tier).
    :param partition_key_paths: the application container's partition-key path(s) (document tier).
    :param tier: ``"document"`` (default: writes + outbox + marker in one batch) or ``"standalone"``.
    :param receiver_name: scopes every Inbox Marker; default the consumer group (templated).
    :param identity: dotted path of an identity function; default the ``message-id`` header.
    :param partition_key: dotted path of a partition-key resolver; default the Kafka key.
    :param max_messages: at most this many deliveries per run (default 1000).
    :param max_seconds: at most about this many seconds per run (default 60).
    :param claim_lease_seconds: standalone tier: how long a pending claim is left to its owner (default 60).
    :param marker_ttl_seconds: standalone tier: ``ttl`` of markers (default none).
    :param chatter_kafka_conn_id: default ``chatter_kafka_default``.
    :param chatter_cosmos_conn_id: default ``chatter_cosmos_default``.
    :param database_name: overrides the Cosmos connection's ``database_name`` extra.

    OpenLineage (with ``apache-airflow-providers-openlineage``): input the topic (``inputStatistics.rowCount``:
    deliveries received), output the container, run facet ``chatter_receive`` (received, processed, duplicates,
    dispatched); a failed run adds its error.
    """

    template_fields: Sequence[str] = ("topic", "group_id", "receiver_name", "container", "max_messages", "max_seconds")

    def __init__(
        self,
        *,
        topic: str,
        group_id: str,
        handler: str,
        container: str,
        partition_key_paths: str | Sequence[str] = (),
        tier: str = "document",
        receiver_name: str | None = None,
        identity: str | None = None,
        partition_key: str | None = None,
        max_messages: int | str = 1000,
        max_seconds: float | str = 60,
        claim_lease_seconds: float | None = None,
        marker_ttl_seconds: int | None = None,
        chatter_kafka_conn_id: str = "chatter_kafka_default",
        chatter_cosmos_conn_id: str = "chatter_cosmos_default",
        database_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for option, value in (("handler", handler), ("identity", identity), ("partition_key", partition_key)):
            if value is not None and (not isinstance(value, str) or "." not in value):
                raise ConfigurationError(option, value, "must be a dotted import path such as 'package.module.fn'")
        self.tier = check_tier(tier, partition_key_paths)
        self.topic = topic
        self.group_id = group_id
        self.handler = handler
        self.container = container
        self.partition_key_paths = partition_key_paths
        self.receiver_name = receiver_name
        self.identity = identity
        self.partition_key = partition_key
        self.max_messages = max_messages
        self.max_seconds = max_seconds
        self.claim_lease_seconds = claim_lease_seconds
        self.marker_ttl_seconds = marker_ttl_seconds
        self.chatter_kafka_conn_id = chatter_kafka_conn_id
        self.chatter_cosmos_conn_id = chatter_cosmos_conn_id
        self.database_name = database_name
        self.task_hooks = TaskHooks()

    def kafka_hook(self) -> ChatterKafkaHook:
        """The Kafka hook (one per task: the connection is read once)."""
        from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

        return self.task_hooks.get(ChatterKafkaHook, self.chatter_kafka_conn_id)

    def inbox_hook(self) -> ChatterInboxHook:
        """The Cosmos hook of the receiver's side (one per task: the connection is read once)."""
        from airflow_chatter.airflow.hooks.inbox import ChatterInboxHook

        return self.task_hooks.get(ChatterInboxHook, self.chatter_cosmos_conn_id, database_name=self.database_name)

    def lineage_before_run(self) -> LineageRecord:
        topic = kafka_dataset(self.kafka_hook().bootstrap_server(), str(self.topic))
        return LineageRecord(inputs=[topic], outputs=[cosmos_dataset(self.inbox_hook(), str(self.container))])

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.airflow.operators.base import fail_fast

        # A bad option or a refused container fails at once: a retry would meet it again.
        with fail_fast():
            return self._receive()

    def _receive(self) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_chatter.adapters.kafka.source import KafkaMessageSource
        from airflow_chatter.airflow.sources import import_callable
        from airflow_chatter.inbox.errors import ForeignDocumentError, MissingIdentityError
        from airflow_chatter.inbox.receive import receive

        max_messages = _positive(self.max_messages, "max_messages", int)
        max_seconds = _positive(self.max_seconds, "max_seconds", float)
        for option, value in (("topic", self.topic), ("group_id", self.group_id), ("container", self.container)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(option, value, "must be a non-blank string")
        name = self.receiver_name or self.group_id
        receiver = self.inbox_hook().get_receiver(
            import_callable(self.handler, "handler"),  # type: ignore[arg-type]
            name=name,
            container_name=self.container,
            tier=self.tier,
            partition_key_paths=self.partition_key_paths,
            partition_key=import_callable(self.partition_key, "partition_key"),
            identity=import_callable(self.identity, "identity"),
            claim_lease=None if self.claim_lease_seconds is None else timedelta(seconds=self.claim_lease_seconds),
            marker_ttl=None if self.marker_ttl_seconds is None else timedelta(seconds=self.marker_ttl_seconds),
        )
        source = KafkaMessageSource(self.kafka_hook().get_consumer([self.topic], self.group_id))
        try:
            summary = receive(
                source,
                receiver,
                max_messages=max_messages,
                max_seconds=max_seconds,
                topics=[self.topic],
                group_id=self.group_id,
            )
        except Exception as error:
            self.record_lineage_error(error)
            if isinstance(error, (MissingIdentityError, ForeignDocumentError)):
                # A retry would meet the same message: fail now, without retries; its offset stays uncommitted.
                raise AirflowFailException(str(error)) from error
            raise
        finally:
            source.close()
        result = summary.to_dict()
        before = self.lineage_before_run()
        self.record_lineage(
            replace(
                before,
                inputs=[replace(before.inputs[0], rows=summary.received)],
                facet=(
                    "chatter_receive",
                    {k: result[k] for k in ("group_id", "received", "processed", "duplicates", "dispatched")},
                ),
            )
        )
        self.log.info(
            "receive topic=%s group=%s receiver=%s received=%d processed=%d duplicates=%d dispatched=%d stopped_by=%s",
            self.topic,
            self.group_id,
            name,
            result["received"],
            result["processed"],
            result["duplicates"],
            result["dispatched"],
            result["stopped_by"],
        )
        return result


__all__ = ["ChatterReceiveOperator"]
