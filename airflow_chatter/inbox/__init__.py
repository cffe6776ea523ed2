"""The downstream half: Inbox Markers, the standalone two-phase inbox, and the idempotent receiver (docs/inbox.md).

Nothing here imports Airflow.
"""

from __future__ import annotations

from airflow_chatter.inbox.errors import (
    ClaimInFlightError,
    ForeignDocumentError,
    InboxIdentityError,
    MarkerNotFoundError,
    MissingIdentityError,
)
from airflow_chatter.inbox.gate import Claim, ClaimDecision, Inbox, InboxOptions
from airflow_chatter.inbox.identity import (
    ReceivedMessage,
    kafka_key_partition_key,
    message_id_identity,
    topic_partition_offset_identity,
)
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.inbox.receiver import Delivery, DeliveryOutcome, IdempotentReceiver, ReceiveSummary

__all__ = [
    "Claim",
    "ClaimDecision",
    "ClaimInFlightError",
    "Delivery",
    "DeliveryOutcome",
    "ForeignDocumentError",
    "IdempotentReceiver",
    "Inbox",
    "InboxIdentityError",
    "InboxOptions",
    "MarkerNotFoundError",
    "MissingIdentityError",
    "ReceiveSummary",
    "ReceivedMessage",
    "kafka_key_partition_key",
    "marker_id",
    "message_id_identity",
    "topic_partition_offset_identity",
]
