"""The Outbox Document: its shape (OBX-01..03), its statuses, and the pending predicate (PND-01/02).

An outbox document is written in the same transactional batch as the application's own change and later drained
to Kafka. Only documents this module could have minted are ever drained: ``is_pending_outbox`` recomputes the id
from ``MessageId``, so an application document that merely looks like an outbox document is never published or
patched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.item_ids import build_item_id
from airflow_chatter.outbox.partition_keys import canonicalize_paths, path_segments, stamp_partition_value
from airflow_chatter.ports import Document, PartitionKey, PartitionKeyComponent

OUTBOX_TYPE = "outbox"
INBOX_TYPE = "inbox"

PENDING = "pending"
DELIVERED = "delivered"
#: Terminal: the contract proved the document can never be published. Never gets a ttl, never deleted (CTR-08).
UNDELIVERABLE = "undeliverable"

DEFAULT_DELIVERED_TTL_SECONDS = 86400

ID_FIELD = "id"
TYPE_FIELD = "_chatterType"
STATUS_FIELD = "status"
MESSAGE_ID_FIELD = "MessageId"
DESTINATION_FIELD = "Destination"
MESSAGE_BODY_FIELD = "MessageBody"
MESSAGE_CONTENT_TYPE_FIELD = "MessageContentType"
MESSAGE_CONTEXT_FIELD = "MessageContext"
TTL_FIELD = "ttl"

#: Root fields the outbox document owns. A partition path rooted at one of them would overwrite it (``/id`` would
#: replace every outbox id in the partition with the partition value), so staging refuses it (OBX-03). ``ttl`` and
#: ``_ts`` are deliberately absent: Cosmos owns them and the document never writes them.
RESERVED_ROOT_FIELDS: frozenset[str] = frozenset(
    {
        ID_FIELD,
        TYPE_FIELD,
        STATUS_FIELD,
        MESSAGE_ID_FIELD,
        DESTINATION_FIELD,
        MESSAGE_BODY_FIELD,
        MESSAGE_CONTENT_TYPE_FIELD,
        MESSAGE_CONTEXT_FIELD,
    }
)


def _check_partition_roots(paths: tuple[str, ...]) -> None:
    for path in paths:
        root = path_segments(path)[0]
        if root in RESERVED_ROOT_FIELDS:
            raise ConfigurationError(
                "partition_key_paths",
                path,
                f"is rooted at the reserved outbox field {root!r}; stamping the partition value there would "
                "overwrite it",
            )


@dataclass(frozen=True)
class OutboxMessage:
    """One message to stage in the outbox.

    ``message_id`` must be non-blank (the item id and downstream deduplication are keyed on it); ``body`` is the
    message body as a string; ``content_type`` is optional when ``context`` carries ``Chatter.ContentType``;
    ``context`` is the message context, persisted as a JSON string.
    """

    message_id: str
    destination: str
    body: str
    content_type: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.message_id, str) or not self.message_id.strip():
            # A blank id cannot be deduplicated downstream; refuse it before anything is staged (DTW-05).
            raise ConfigurationError("message_id", self.message_id, "must be a non-blank string")

    def to_document(
        self,
        partition_key_paths: str | Sequence[str],
        partition_values: PartitionKey | Sequence[PartitionKeyComponent],
    ) -> Document:
        """Build the pending outbox document (OBX-01), with the partition value stamped at its path (OBX-02).

        Every check runs before anything is built: ``ConfigurationError`` for a reserved partition root (OBX-03)
        or an unserialisable context, ``ItemIdTooLongError`` for an over-long message id (OBX-04). No ``ttl`` is
        written: a pending document must never expire.
        """
        paths = canonicalize_paths(partition_key_paths)
        _check_partition_roots(paths)
        item_id = build_item_id("outbox", self.message_id)
        try:
            context_json = json.dumps(dict(self.context), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError("context", self.context, f"is not JSON-serialisable ({exc})") from exc
        document: Document = {
            ID_FIELD: item_id,
            TYPE_FIELD: OUTBOX_TYPE,
            STATUS_FIELD: PENDING,
            MESSAGE_ID_FIELD: self.message_id,
            DESTINATION_FIELD: self.destination,
            MESSAGE_BODY_FIELD: self.body,
        }
        if self.content_type is not None:
            document[MESSAGE_CONTENT_TYPE_FIELD] = self.content_type
        document[MESSAGE_CONTEXT_FIELD] = context_json
        stamp_partition_value(document, paths, partition_values)
        return document


def is_pending_outbox(document: object) -> bool:
    """Whether a change-feed document is a pending outbox document airflow-chatter minted (PND-01/02).

    Pure and total: any input yields ``True`` or ``False``. Requires a JSON object with ``_chatterType == "outbox"``,
    ``status == "pending"``, a non-empty string ``MessageId``, and ``id == build_item_id("outbox", MessageId)``.
    A ``MessageId`` that cannot be encoded into an id is not pending rather than a batch fault: no such document
    could have been written by this library.
    """
    if not isinstance(document, Mapping):
        return False
    if document.get(TYPE_FIELD) != OUTBOX_TYPE or not isinstance(document.get(TYPE_FIELD), str):
        return False
    status = document.get(STATUS_FIELD)
    if not isinstance(status, str) or status != PENDING:
        return False
    message_id = document.get(MESSAGE_ID_FIELD)
    item_id = document.get(ID_FIELD)
    if not isinstance(message_id, str) or not message_id or not isinstance(item_id, str):
        return False
    try:
        expected = build_item_id("outbox", message_id)
    except ValueError:  # too long (ItemIdTooLongError) or not UTF-8 encodable (UnicodeEncodeError)
        return False
    return item_id == expected


__all__ = [
    "DEFAULT_DELIVERED_TTL_SECONDS",
    "DELIVERED",
    "INBOX_TYPE",
    "OUTBOX_TYPE",
    "OutboxMessage",
    "PENDING",
    "RESERVED_ROOT_FIELDS",
    "UNDELIVERABLE",
    "is_pending_outbox",
]
