"""The ports the core talks through: a document container, a publisher, a message source and an idempotency store.

The drain engine, the inbox and the unit of work only ever see these types. Adapters
(``airflow_chatter.adapters.memory.container``, ``.cosmos``, ``.kafka``) translate SDK objects and SDK
errors into them once, at their edge, so the core never imports ``azure.cosmos`` or ``kafka``.

Nothing here imports Airflow.
"""

from airflow_chatter.ports.container import (
    BadRequest,
    BatchFailed,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    Conflict,
    ContainerError,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PartitionKey,
    PartitionKeyComponent,
    PatchOperation,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
    epk_bounds,
    epk_range,
)
from airflow_chatter.ports.idempotency import IdempotencyStore
from airflow_chatter.ports.messaging import (
    MESSAGE_ID_HEADER,
    MessageRejected,
    MessageSource,
    OutgoingMessage,
    PublishConfirmation,
    Publisher,
    PublishError,
    PublishOutcome,
    ReceivedMessage,
)

__all__ = [
    "BadRequest",
    "BatchFailed",
    "BatchOperation",
    "BatchOperationKind",
    "BatchOperationResult",
    "ChangeFeedPage",
    "ChangeFeedStart",
    "Conflict",
    "ContainerError",
    "ContainerProperties",
    "Document",
    "DocumentContainer",
    "FeedRange",
    "FeedRangeGone",
    "IdempotencyStore",
    "MESSAGE_ID_HEADER",
    "MessageRejected",
    "MessageSource",
    "NotFound",
    "OutgoingMessage",
    "PartitionKey",
    "PartitionKeyComponent",
    "PatchOperation",
    "PreconditionFailed",
    "PublishConfirmation",
    "PublishError",
    "PublishOutcome",
    "Publisher",
    "ReceivedMessage",
    "RequestTimeout",
    "ServiceUnavailable",
    "Throttled",
    "epk_bounds",
    "epk_range",
]
