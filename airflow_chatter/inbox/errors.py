"""The inbox's exception classes (spec F-06): each says whether the delivery will come again and why."""

from __future__ import annotations

from airflow_chatter.errors import ChatterError


class MissingMessageIdError(ValueError):
    """A consumed message has no usable ``message-id`` header (F-07: not processed, not acknowledged).

    Raised by the at-least-once consumer (``adapters.kafka.consumer``, which re-exports it); defined here, in the core,
    because the receiver's ``MissingIdentityError`` is one too, and the core imports no adapter."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"message at {topic}[{partition}]@{offset} {reason}: it has no identity to deduplicate on, so it is "
            "neither processed nor acknowledged (the group's offset stays before it)"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset


class InboxIdentityError(ChatterError, ValueError):
    """A blank identity was handed to the inbox (INB-09): nothing was written and the handler did not run."""


class MissingIdentityError(MissingMessageIdError):
    """A delivery has no identity to deduplicate on (F-07): it is neither processed nor acknowledged."""


class UnacknowledgedDeliveryError(ChatterError):
    """The base of the inbox errors that leave a delivery unacknowledged (so it comes again), about the Inbox Marker
    ``item_id``: each message says why, then that the delivery was not acknowledged (and what happens next)."""

    def __init__(self, item_id: str, why: str, then: str = "") -> None:
        self.item_id = item_id
        super().__init__(f"{why}; the delivery was not acknowledged{then}")


class ForeignDocumentError(UnacknowledgedDeliveryError):
    """The document under an Inbox Marker's id is not that marker (INB-04c, DTI-02).

    Never taken for a duplicate: skipping on the strength of someone else's document would lose the delivery. The
    delivery is not acknowledged, so it comes again once the collision is resolved.
    """

    def __init__(self, item_id: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            item_id, f"the document under Inbox Marker id {item_id!r} is not this delivery's marker ({reason})"
        )


class MarkerNotFoundError(UnacknowledgedDeliveryError):
    """Create said 409 but every read-back said 404 within the budget (INB-05): undecidable, so redeliver."""

    def __init__(self, item_id: str, attempts: int) -> None:
        self.attempts = attempts
        super().__init__(
            item_id, f"Inbox Marker {item_id!r} conflicted on create but was not found in {attempts} read(s)"
        )


class ClaimInFlightError(UnacknowledgedDeliveryError):
    """Another attempt holds a pending claim whose lease has not expired: retry later (the delivery is not acked)."""

    def __init__(self, item_id: str, lease_expires_at: str) -> None:
        self.lease_expires_at = lease_expires_at
        super().__init__(
            item_id,
            f"Inbox Marker {item_id!r} is claimed by another attempt until {lease_expires_at}",
            " and will be taken over after that",
        )


__all__ = [
    "ClaimInFlightError",
    "ForeignDocumentError",
    "InboxIdentityError",
    "MarkerNotFoundError",
    "MissingIdentityError",
    "MissingMessageIdError",
    "UnacknowledgedDeliveryError",
]
