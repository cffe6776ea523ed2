"""airflow-chatter: the transactional outbox and the idempotent receiver on Azure Cosmos DB, delivered to Kafka.

The public API is re-exported here and listed in docs/api.md. The names resolve lazily (PEP 562): Airflow imports
this package in every process (api-server, scheduler, dag-processor, triggerer, workers) because the plugin and the
provider live under it, so ``import airflow_chatter`` must stay cheap and import no SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    # The ports and their values.
    "DocumentContainer": "airflow_chatter.ports",
    "Publisher": "airflow_chatter.ports",
    "OutgoingMessage": "airflow_chatter.ports",
    "ReceivedMessage": "airflow_chatter.ports",
    "MessageSource": "airflow_chatter.ports",
    "PublishOutcome": "airflow_chatter.ports",
    "FeedRange": "airflow_chatter.ports",
    "ChangeFeedPage": "airflow_chatter.ports",
    "BatchOperation": "airflow_chatter.ports",
    "PatchOperation": "airflow_chatter.ports",
    "ContainerError": "airflow_chatter.ports",
    # The write side.
    "OutboxMessage": "airflow_chatter.outbox.document",
    "is_pending_outbox": "airflow_chatter.outbox.document",
    "verify": "airflow_chatter.outbox.contract",
    "Deliverable": "airflow_chatter.outbox.contract",
    "Undeliverable": "airflow_chatter.outbox.contract",
    "UnitOfWork": "airflow_chatter.outbox.unit_of_work",
    "CommitFailedError": "airflow_chatter.outbox.unit_of_work",
    "BatchLimitError": "airflow_chatter.outbox.unit_of_work",
    # The downstream half: the inbox and the idempotent receiver.
    "Inbox": "airflow_chatter.inbox",
    "InboxOptions": "airflow_chatter.inbox",
    "Claim": "airflow_chatter.inbox",
    "IdempotentReceiver": "airflow_chatter.inbox",
    "Delivery": "airflow_chatter.inbox",
    "ReceiveSummary": "airflow_chatter.inbox",
    "receive": "airflow_chatter.inbox.receive",
    "message_id_identity": "airflow_chatter.inbox",
    "topic_partition_offset_identity": "airflow_chatter.inbox",
    "MissingIdentityError": "airflow_chatter.inbox",
    "ForeignDocumentError": "airflow_chatter.inbox",
    "ClaimInFlightError": "airflow_chatter.inbox",
    # The read side.
    "DrainEngine": "airflow_chatter.drain.engine",
    "DrainSummary": "airflow_chatter.drain.summary",
    "SourceOptions": "airflow_chatter.drain.options",
    "DeliverySettings": "airflow_chatter.drain.options",
    "LeaseStore": "airflow_chatter.drain.leases",
    "Lease": "airflow_chatter.drain.leases",
    # Idempotency keys (IDM).
    "IdempotencyStore": "airflow_chatter.ports",
    "MemoryIdempotencyStore": "airflow_chatter.adapters.memory",
    "ContainerIdempotencyStore": "airflow_chatter.idempotency",
    "Reserved": "airflow_chatter.idempotency",
    "AlreadyInFlight": "airflow_chatter.idempotency",
    "Replay": "airflow_chatter.idempotency",
    "BodyHashMismatch": "airflow_chatter.idempotency",
    # Errors (spec F-06).
    "ChatterError": "airflow_chatter.errors",
    "ConfigurationError": "airflow_chatter.errors",
    "ContainerContractError": "airflow_chatter.errors",
    "DrainSuspendedError": "airflow_chatter.errors",
    # Time.
    "Clock": "airflow_chatter.clock",
    "utc_now": "airflow_chatter.clock",
}

__all__ = [
    "AlreadyInFlight",
    "BatchLimitError",
    "BatchOperation",
    "BodyHashMismatch",
    "ChangeFeedPage",
    "ChatterError",
    "Claim",
    "ClaimInFlightError",
    "Clock",
    "CommitFailedError",
    "ConfigurationError",
    "ContainerContractError",
    "ContainerError",
    "ContainerIdempotencyStore",
    "Deliverable",
    "Delivery",
    "DeliverySettings",
    "DocumentContainer",
    "DrainEngine",
    "DrainSummary",
    "DrainSuspendedError",
    "FeedRange",
    "ForeignDocumentError",
    "IdempotencyStore",
    "IdempotentReceiver",
    "Inbox",
    "InboxOptions",
    "Lease",
    "LeaseStore",
    "MemoryIdempotencyStore",
    "MessageSource",
    "MissingIdentityError",
    "OutboxMessage",
    "OutgoingMessage",
    "PatchOperation",
    "PublishOutcome",
    "Publisher",
    "ReceiveSummary",
    "ReceivedMessage",
    "Replay",
    "Reserved",
    "SourceOptions",
    "Undeliverable",
    "UnitOfWork",
    "is_pending_outbox",
    "message_id_identity",
    "receive",
    "topic_partition_offset_identity",
    "utc_now",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_chatter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_chatter.adapters.memory import MemoryIdempotencyStore
    from airflow_chatter.clock import Clock, utc_now
    from airflow_chatter.drain.engine import DrainEngine
    from airflow_chatter.drain.leases import Lease, LeaseStore
    from airflow_chatter.drain.options import DeliverySettings, SourceOptions
    from airflow_chatter.drain.summary import DrainSummary
    from airflow_chatter.errors import ChatterError, ConfigurationError, ContainerContractError, DrainSuspendedError
    from airflow_chatter.idempotency import (
        AlreadyInFlight,
        BodyHashMismatch,
        ContainerIdempotencyStore,
        Replay,
        Reserved,
    )
    from airflow_chatter.inbox import (
        Claim,
        ClaimInFlightError,
        Delivery,
        ForeignDocumentError,
        IdempotentReceiver,
        Inbox,
        InboxOptions,
        MissingIdentityError,
        ReceiveSummary,
        message_id_identity,
        topic_partition_offset_identity,
    )
    from airflow_chatter.inbox.receive import receive
    from airflow_chatter.outbox.contract import Deliverable, Undeliverable, verify
    from airflow_chatter.outbox.document import OutboxMessage, is_pending_outbox
    from airflow_chatter.outbox.unit_of_work import BatchLimitError, CommitFailedError, UnitOfWork
    from airflow_chatter.ports import (
        BatchOperation,
        ChangeFeedPage,
        ContainerError,
        DocumentContainer,
        FeedRange,
        IdempotencyStore,
        MessageSource,
        OutgoingMessage,
        PatchOperation,
        Publisher,
        PublishOutcome,
        ReceivedMessage,
    )
