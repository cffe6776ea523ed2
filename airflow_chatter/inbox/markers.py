"""Inbox Markers: the record that one receiver handled one delivery identity (INB-01, DTI-01).

A marker's id is deterministic, so a second claim of the same identity is a 409 decided by Cosmos DB on the
partition's primary replica, never a read-then-write race. It is **scoped to its receiver**:
``inbox:{b64url(receiver)}.{b64url(identity)}`` (``.`` is outside the base64url alphabet, so the two parts never
blur), which lets two different downstream consumers of one message, writing to one container, each handle it once.
Without a receiver scope the id is the contract's ``inbox:{b64url(identity)}`` (test vector ``inbox:bXNnLTE``).

``foreign_reason`` is the confirm step after a 409: only a document this module could have minted for exactly this
identity and receiver is a duplicate. Anything else under that id is a foreign document and must never be taken
for one (INB-04c).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from airflow_chatter.errors import ConfigurationError, ItemIdTooLongError
from airflow_chatter.inbox.errors import InboxIdentityError
from airflow_chatter.outbox.document import INBOX_TYPE
from airflow_chatter.outbox.item_ids import MAX_ITEM_ID_LENGTH, encode_message_id
from airflow_chatter.outbox.partition_keys import canonicalize_paths, path_segments, stamp_partition_value
from airflow_chatter.ports import Document, PartitionKey

ID_FIELD = "id"
TYPE_FIELD = "_chatterType"
MESSAGE_ID_FIELD = "MessageId"
RECEIVED_AT_FIELD = "ReceivedAtUtc"
RECEIVER_FIELD = "Receiver"
COMPLETED_FIELD = "Completed"
CLAIMED_AT_FIELD = "ClaimedAtUtc"
TTL_FIELD = "ttl"

#: The standalone inbox's default partition path: the marker's partition value is the raw identity (INB-01).
DEFAULT_INBOX_PARTITION_PATH = "/idempotencyKey"

#: DTI-01: a container partitioned on one of these cannot hold a document-tier marker (stamping would overwrite it).
MARKER_RESERVED_ROOTS: frozenset[str] = frozenset({ID_FIELD, TYPE_FIELD, MESSAGE_ID_FIELD, RECEIVED_AT_FIELD})


def checked_identity(identity: object) -> str:
    """The identity, or ``InboxIdentityError`` for a non-string, empty or blank one (INB-09, DTW-05)."""
    if not isinstance(identity, str) or not identity.strip():
        raise InboxIdentityError(
            f"identity={identity!r}: an Inbox Marker needs a non-blank identity (the message id or your identity "
            "function's result); nothing was written"
        )
    return identity


def marker_id(identity: str, receiver: str | None = None) -> str:
    """The marker's item id; ``ItemIdTooLongError`` over Cosmos DB's 1023-character limit (INB-10)."""
    checked_identity(identity)
    encoded = encode_message_id(identity)
    item_id = f"{INBOX_TYPE}:{encode_message_id(receiver)}.{encoded}" if receiver else f"{INBOX_TYPE}:{encoded}"
    if len(item_id) > MAX_ITEM_ID_LENGTH:
        raise ItemIdTooLongError(len(item_id), MAX_ITEM_ID_LENGTH, INBOX_TYPE)
    return item_id


def iso_utc(moment: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` (``2026-12-01T10:00:00.123456Z``), as markers store times."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def parse_iso_utc(value: object) -> datetime | None:
    """The time a marker stored, or ``None`` when the field is absent or not a time this module wrote."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _base(identity: str, receiver: str | None, now: datetime) -> Document:
    document: Document = {
        ID_FIELD: marker_id(identity, receiver),
        TYPE_FIELD: INBOX_TYPE,
        MESSAGE_ID_FIELD: identity,
        RECEIVED_AT_FIELD: iso_utc(now),
    }
    if receiver:
        document[RECEIVER_FIELD] = receiver
    return document


def check_marker_partition_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """Canonical paths, or ``ConfigurationError`` for one rooted at a marker field (DTI-01)."""
    canonical = canonicalize_paths(paths)
    for path in canonical:
        root = path_segments(path)[0]
        if root in MARKER_RESERVED_ROOTS or root == RECEIVER_FIELD:
            raise ConfigurationError(
                "partition_key_paths",
                path,
                f"is rooted at the Inbox Marker field {root!r}; the marker cannot live there",
            )
    return canonical


def document_tier_marker(
    identity: str, receiver: str | None, paths: Sequence[str], partition_key: PartitionKey, now: datetime
) -> Document:
    """The marker staged as operation 0 of a delivery's batch (DTI-01): no ``Completed``, no ``ttl``, no status.

    Its existence is the record: it commits with the handler's writes or not at all.
    """
    document = _base(identity, receiver, now)
    stamp_partition_value(document, check_marker_partition_paths(paths), partition_key)
    return document


def pending_marker(
    identity: str,
    receiver: str | None,
    partition_path: str,
    now: datetime,
    *,
    ttl: timedelta | None = None,
) -> Document:
    """The standalone inbox's pending claim (INB-01): ``Completed=false``, partition value = the raw identity."""
    document = _base(identity, receiver, now)
    document[COMPLETED_FIELD] = False
    document[CLAIMED_AT_FIELD] = document[RECEIVED_AT_FIELD]
    stamp_partition_value(document, (partition_path,), identity)
    if ttl is not None:
        document[TTL_FIELD] = int(ttl.total_seconds())
    return document


def foreign_reason(document: object, identity: str, receiver: str | None) -> str | None:
    """``None`` when ``document`` is this identity's marker for this receiver; otherwise why it is not (INB-04c)."""
    if not isinstance(document, Mapping):
        return f"it is a {type(document).__name__}, not a JSON object"
    if document.get(TYPE_FIELD) != INBOX_TYPE:
        return f"its {TYPE_FIELD} is {document.get(TYPE_FIELD)!r}, not {INBOX_TYPE!r}"
    if document.get(MESSAGE_ID_FIELD) != identity:
        return f"its {MESSAGE_ID_FIELD} is {document.get(MESSAGE_ID_FIELD)!r}, not {identity!r}"
    if receiver and document.get(RECEIVER_FIELD) != receiver:
        return f"its {RECEIVER_FIELD} is {document.get(RECEIVER_FIELD)!r}, not {receiver!r}"
    return None


__all__ = [
    "COMPLETED_FIELD",
    "DEFAULT_INBOX_PARTITION_PATH",
    "MARKER_RESERVED_ROOTS",
    "checked_identity",
    "document_tier_marker",
    "foreign_reason",
    "iso_utc",
    "marker_id",
    "parse_iso_utc",
    "pending_marker",
]
