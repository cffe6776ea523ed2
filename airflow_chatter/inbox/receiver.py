"""The idempotent receiver: the reliability envelope around the handling of one *delivery* (contract C, F-07).

For each receive attempt of a delivery:

1. open one Unit of Work for the delivery (document tier), or nothing (standalone tier);
2. claim the delivery's identity: stage the Inbox Marker as operation 0 (DTI-01), or create the pending marker;
3. run the handler; whatever it dispatches in-process (``Delivery.dispatch``: commands and events alike) joins the
   same unit of work and is **not** separately gated (C-01: a nested message never completes or skips the delivery);
4. commit handler writes + outbox messages + marker as one transactional batch (document tier), or complete the
   marker (standalone tier);
5. only then commit the delivery at its source (``airflow_chatter.inbox.receive``).

A failed attempt leaves nothing half-committed: in the document tier the batch is all-or-nothing, in the standalone
tier the marker stays pending and the redelivery takes it over after its lease. Side effects outside the container
are at least once (a process killed after them and before step 4 repeats them): see docs/inbox.md.

Nothing here imports Airflow.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Literal, TypeVar

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.errors import ForeignDocumentError
from airflow_chatter.inbox.gate import Inbox, read_back
from airflow_chatter.inbox.identity import (
    IdentityFunction,
    PartitionKeyResolver,
    ReceivedMessage,
    delivery_identity,
    kafka_key_partition_key,
    message_id_identity,
)
from airflow_chatter.inbox.markers import check_marker_partition_paths, document_tier_marker, foreign_reason, marker_id
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import CommitFailedError, UnitOfWork
from airflow_chatter.ports import Document, DocumentContainer

log = logging.getLogger(__name__)

T = TypeVar("T")
Tier = Literal["document", "standalone"]
#: Read-back budget for the confirm read after a 409 on the marker (DTI-02), as the standalone default (INB-05).
_READ_BACK_ATTEMPTS = 5
_READ_BACK_INTERVAL_S = 0.05


class DeliveryOutcome(str, Enum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"


@dataclass
class Delivery:
    """What a handler gets: the message, its identity, and (document tier) the delivery's Unit of Work."""

    message: ReceivedMessage
    identity: str
    receiver: str
    unit_of_work: UnitOfWork | None
    #: How many messages were dispatched in-process while handling this delivery (``dispatch``); the receiver adds
    #: them to its ``dispatched`` once the delivery is processed.
    dispatched: int = 0

    def send(self, message: OutboxMessage) -> Document:
        """Stage an outbox message in the delivery's unit of work; it is published after the commit (document tier)."""
        if self.unit_of_work is None:
            raise ConfigurationError(
                "tier", "standalone", "has no unit of work: outbox messages need the document tier"
            )
        return self.unit_of_work.add_message(message)

    def dispatch(self, handler: Callable[[Delivery, T], Any], message: T) -> Any:
        """Handle ``message`` in-process, inside this delivery: same unit of work, no inbox claim of its own (C-01)."""
        self.dispatched += 1
        return handler(self, message)


#: The user's handler of one delivery.
Handler = Callable[[Delivery], Any]


def check_tier(tier: str, partition_key_paths: str | Sequence[str]) -> Tier:
    """``tier`` when it is known and has what it needs, or ``ConfigurationError`` naming the option; the operator
    calls it when its DAG is built, so a bad tier fails there and not at the first run."""
    if tier not in ("document", "standalone"):
        raise ConfigurationError("tier", tier, "must be 'document' or 'standalone'")
    if tier == "document" and not partition_key_paths:
        raise ConfigurationError("partition_key_paths", partition_key_paths, "is required in the document tier")
    return "document" if tier == "document" else "standalone"


class IdempotentReceiver:
    """Handles deliveries once per identity and receiver. See the module docstring for the steps.

    ``tier="document"`` (default): ``container`` is the application's container (partitioned on
    ``partition_key_paths``), ``partition_key`` resolves each delivery's partition (default: the Kafka key, F-02).
    ``tier="standalone"``: ``inbox`` is the standalone ``Inbox`` (its receiver scope is set to ``name``) and the
    handler writes wherever it likes. ``name`` scopes every marker (the operator defaults it to the consumer group);
    ``identity`` is the identity function (default: the ``message-id`` header).

    ``dispatched`` counts the messages handled in-process (``Delivery.dispatch``) inside the deliveries it
    processed: they ran without an inbox claim of their own (C-02) and committed with their delivery (F-07), so they
    are not among the processed deliveries. A failed attempt's and a duplicate's dispatches committed nothing and
    are not counted.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        name: str,
        container: DocumentContainer | None = None,
        partition_key_paths: str | Sequence[str] = (),
        partition_key: PartitionKeyResolver | None = None,
        inbox: Inbox | None = None,
        tier: Tier = "document",
        identity: IdentityFunction = message_id_identity,
        clock: Clock = utc_now,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError("name", name, "must be a non-blank receiver name (default: the consumer group)")
        if not callable(handler):
            raise ConfigurationError("handler", handler, "must be callable")
        self.handler = handler
        self.name = name
        self.tier = tier
        self.identity = identity
        self._clock = clock
        self._dispatched = 0
        self._dispatched_lock = threading.Lock()
        if check_tier(tier, partition_key_paths) == "document":
            if container is None:
                raise ConfigurationError("container", None, "is required in the document tier")
            paths = (partition_key_paths,) if isinstance(partition_key_paths, str) else tuple(partition_key_paths)
            self.partition_key_paths = check_marker_partition_paths(paths)
            self.container = container
            self.partition_key = partition_key or kafka_key_partition_key(self.partition_key_paths)
            self.inbox: Inbox | None = None
        else:
            if inbox is None:
                raise ConfigurationError("inbox", None, "is required in the standalone tier")
            if inbox.options.receiver != name:
                inbox = Inbox(inbox.container, replace(inbox.options, receiver=name), clock=clock)
            self.inbox = inbox

    @property
    def dispatched(self) -> int:
        """Messages dispatched in-process inside the deliveries this receiver processed (see the class docstring)."""
        return self._dispatched

    def _processed(self, delivery: Delivery) -> DeliveryOutcome:
        with self._dispatched_lock:
            self._dispatched += delivery.dispatched
        return DeliveryOutcome.PROCESSED

    def handle_delivery(self, message: ReceivedMessage) -> DeliveryOutcome:
        """One receive attempt of one delivery; raises when it must come again (nothing acknowledged)."""
        identity = delivery_identity(message, self.identity)  # F-07: no identity → raise before anything runs
        if self.inbox is not None:
            return self._standalone(message, identity, self.inbox)
        return self._document(message, identity)

    def _standalone(self, message: ReceivedMessage, identity: str, inbox: Inbox) -> DeliveryOutcome:
        claim = inbox.begin(identity)
        if not claim.should_run:
            return DeliveryOutcome.DUPLICATE
        delivery = Delivery(message, identity, self.name, None)
        self.handler(delivery)
        inbox.complete(claim)
        return self._processed(delivery)

    def _document(self, message: ReceivedMessage, identity: str) -> DeliveryOutcome:
        partition_key = self.partition_key(message)
        unit = UnitOfWork(self.container, self.partition_key_paths, partition_key)
        marker = document_tier_marker(identity, self.name, self.partition_key_paths, unit.partition_key, self._clock())
        unit.stage_inbox_marker(marker)  # DTI-01: op 0, before the handler; a marker-only batch still runs (DTI-03)
        delivery = Delivery(message, identity, self.name, unit)
        self.handler(delivery)
        try:
            self.commit(unit)
        except CommitFailedError as failure:
            if failure.failed_index != 0 or failure.status_code != 409:
                raise  # DTW-04: an application write failed; nothing was committed
            # DTI-02: a 409 on the marker is a candidate duplicate; only this receiver's marker of this identity is.
            item_id = marker_id(identity, self.name)
            existing = read_back(
                self.container,
                item_id,
                unit.partition_key,
                attempts=_READ_BACK_ATTEMPTS,
                interval_s=_READ_BACK_INTERVAL_S,
            )
            reason = foreign_reason(existing, identity, self.name)
            if reason is not None:
                raise ForeignDocumentError(item_id, reason) from failure
            log.info("delivery %s (identity %r) is a duplicate for receiver %r", message.where, identity, self.name)
            return DeliveryOutcome.DUPLICATE
        return self._processed(delivery)

    def commit(self, unit: UnitOfWork) -> None:
        """Commit the delivery's unit of work (the seam between handler and commit)."""
        unit.commit()


@dataclass
class ReceiveSummary:
    """What one ``receive`` call did. ``to_dict()`` is JSON-serialisable (XCom)."""

    receiver: str
    group_id: str
    topics: Sequence[str]
    received: int = 0
    processed: int = 0
    duplicates: int = 0
    #: Messages dispatched in-process inside the processed deliveries (``IdempotentReceiver.dispatched``).
    dispatched: int = 0
    #: "topic:partition" → the committed offset (the next one to read).
    committed_offsets: dict[str, int] = field(default_factory=dict)
    stopped_by: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "receiver": self.receiver,
            "group_id": self.group_id,
            "topics": list(self.topics),
            "received": self.received,
            "processed": self.processed,
            "duplicates": self.duplicates,
            "dispatched": self.dispatched,
            "committed_offsets": dict(sorted(self.committed_offsets.items())),
            "stopped_by": self.stopped_by,
            "seconds": round(self.seconds, 3),
        }


__all__ = [
    "Delivery",
    "DeliveryOutcome",
    "Handler",
    "IdempotentReceiver",
    "ReceiveSummary",
    "Tier",
    "check_tier",
]
