"""``ChatterInboxHook``: the downstream half's adapters from a Cosmos connection (docs/inbox.md).

A hook only handles connections: it turns the Cosmos connection into the core's Unit of Work, standalone Inbox and
idempotent receiver, so a task's own code never builds clients. The Kafka side stays with ``ChatterKafkaHook``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

if TYPE_CHECKING:
    from airflow_chatter.inbox.gate import Inbox
    from airflow_chatter.inbox.identity import IdentityFunction, PartitionKeyResolver
    from airflow_chatter.inbox.receiver import Handler, IdempotentReceiver, Tier
    from airflow_chatter.outbox.unit_of_work import UnitOfWork
    from airflow_chatter.ports import DocumentContainer, PartitionKey


class ChatterInboxHook(ChatterCosmosHook):
    """The Cosmos connection (``chattercosmos`` type) seen from the write side and the inbox.

    :param chatter_cosmos_conn_id: the connection id; default ``chatter_cosmos_default``.
    :param database_name: overrides the connection's ``database_name`` extra.
    """

    hook_name = "Chatter Inbox (Cosmos DB)"

    def get_container(self, container_name: str, *, database_name: str | None = None) -> DocumentContainer:
        """The container, its 429s retried within the connection's ``max_throttle_retries`` /
        ``max_throttle_wait_seconds`` (``airflow_chatter.ports.throttle``): the project's clients leave 429s to
        their callers, and a marker or a commit should not fail a delivery on the first one. Past the limits the
        429 is raised (INB-06: the claim was not written, the handler does not run) and the delivery comes again."""
        return self.retrying(super().get_container(container_name, database_name=database_name))

    def get_unit_of_work(
        self, container_name: str, partition_key_paths: str | Sequence[str], partition_key: PartitionKey
    ) -> UnitOfWork:
        """A Unit of Work over one partition of ``container_name`` (no I/O until it commits)."""
        from airflow_chatter.outbox.unit_of_work import UnitOfWork

        return UnitOfWork(self.get_container(container_name), partition_key_paths, partition_key)

    def get_inbox(self, container_name: str, **options: Any) -> Inbox:
        """The standalone Inbox over ``container_name`` (partitioned on ``/idempotencyKey`` unless ``options``
        say ``partition_key_path``); ``options`` are ``InboxOptions`` fields."""
        from airflow_chatter.inbox.gate import Inbox, InboxOptions

        return Inbox(self.get_container(container_name), InboxOptions(**options))

    def get_receiver(
        self,
        handler: Handler,
        *,
        name: str,
        container_name: str,
        tier: Tier = "document",
        partition_key_paths: str | Sequence[str] = (),
        partition_key: PartitionKeyResolver | None = None,
        identity: IdentityFunction | None = None,
        claim_lease: timedelta | None = None,
        marker_ttl: timedelta | None = None,
    ) -> IdempotentReceiver:
        """The idempotent receiver: document tier over the application container ``container_name``, or
        standalone tier with its Inbox Markers in ``container_name``."""
        from airflow_chatter.inbox.identity import message_id_identity
        from airflow_chatter.inbox.receiver import IdempotentReceiver

        chosen = identity or message_id_identity
        if tier == "standalone":
            options: dict[str, Any] = {"receiver": name, "marker_ttl": marker_ttl}
            if claim_lease is not None:
                options["claim_lease"] = claim_lease
            return IdempotentReceiver(
                handler, name=name, inbox=self.get_inbox(container_name, **options), tier=tier, identity=chosen
            )
        return IdempotentReceiver(
            handler,
            name=name,
            container=self.get_container(container_name),
            partition_key_paths=partition_key_paths,
            partition_key=partition_key,
            tier=tier,
            identity=chosen,
        )


__all__ = ["ChatterInboxHook"]
