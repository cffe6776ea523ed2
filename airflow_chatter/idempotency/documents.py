"""The idempotency document in Cosmos DB (IDM-C02, IDM-C03): how an :class:`Entry` is stored and read back.

Shape (null members omitted)::

    {"id": Base64Url(key), "scope": ..., "key": ..., "fingerprint": ...,
     "reservationId": 32 hex digits (only while reserved), "reservedAt": Unix ms,
     "completedAt": Unix ms (only when completed),
     "snapshot": {"statusCode": 201, "headers": {name: [values]}, "body": base64, "fingerprint": ...},
     "ttl": -1 while reserved, ceil(ttl seconds) + 60 once completed}

The ``ttl`` only reclaims storage. A reserved document never expires (``-1``), because a request reusing its key
with another body must keep being refused whether or not a sweep ran. A completed one expires 60 s after the store
itself already treats it as absent, so the sweep can never change an answer.
"""

from __future__ import annotations

import base64
import binascii
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_chatter.idempotency.decision import Entry
from airflow_chatter.idempotency.errors import InvalidIdempotencyDocumentError
from airflow_chatter.ports import Document
from airflow_chatter.ports.idempotency import IdempotencyOptions, StoredResponse, encode_item_id

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
#: IDM-C03: a completed document outlives the store's own expiry by this much.
COMPLETED_TTL_MARGIN_SECONDS = 60
#: IDM-C03: a reserved document never expires.
RESERVED_TTL = -1


def unix_ms(moment: datetime) -> int:
    """Whole milliseconds since the Unix epoch (what ``reservedAt``/``completedAt`` hold)."""
    return (moment - _EPOCH) // _MILLISECOND


def from_unix_ms(value: int) -> datetime:
    return _EPOCH + value * _MILLISECOND


def completed_ttl(options: IdempotencyOptions) -> int:
    """IDM-C03: ``ceil(ttl seconds) + 60`` (24 h → 86460)."""
    return math.ceil(options.ttl.total_seconds()) + COMPLETED_TTL_MARGIN_SECONDS


def reserved_document(scope: str, key: str, fingerprint: str, reservation_id: str, now: datetime) -> Document:
    return {
        "id": encode_item_id(key),
        "scope": scope,
        "key": key,
        "fingerprint": fingerprint,
        "reservationId": reservation_id,
        "reservedAt": unix_ms(now),
        "ttl": RESERVED_TTL,
    }


def completed_document(
    reserved: Document, response: StoredResponse, now: datetime, options: IdempotencyOptions
) -> Document:
    """The reserved document with its reservation removed and the snapshot recorded (IDM-C07)."""
    return {
        "id": reserved["id"],
        "scope": reserved["scope"],
        "key": reserved["key"],
        "fingerprint": reserved["fingerprint"],
        "reservedAt": reserved["reservedAt"],
        "completedAt": unix_ms(now),
        "snapshot": {
            "statusCode": response.status_code,
            "headers": {name: list(values) for name, values in response.headers.items()},
            "body": base64.b64encode(response.body).decode("ascii"),
            "fingerprint": response.fingerprint,
        },
        "ttl": completed_ttl(options),
    }


def _field(document: Document, name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    value = document.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidIdempotencyDocumentError(
            str(document.get("id")), f"{name!r} must be {getattr(kind, '__name__', kind)}, got {value!r}"
        )
    return value


def _snapshot(item_id: str, raw: Any) -> StoredResponse:
    if not isinstance(raw, dict):
        raise InvalidIdempotencyDocumentError(item_id, f"'snapshot' must be an object, got {raw!r}")
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, list) for v in headers.values()):
        raise InvalidIdempotencyDocumentError(item_id, "'snapshot.headers' must map names to lists of values")
    try:
        body = base64.b64decode(str(raw.get("body", "")), validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidIdempotencyDocumentError(item_id, "'snapshot.body' is not base64") from error
    try:
        return StoredResponse(raw.get("statusCode"), headers, body, raw.get("fingerprint"))  # type: ignore[arg-type]
    except ValueError as error:
        raise InvalidIdempotencyDocumentError(item_id, f"'snapshot' is malformed: {error}") from error


def entry_of(document: Document) -> Entry:
    """Read a stored document back; ``InvalidIdempotencyDocumentError`` names the first field that is wrong."""
    item_id = str(document.get("id"))
    fingerprint = _field(document, "fingerprint", str)
    reserved_at = from_unix_ms(_field(document, "reservedAt", int))
    completed_at_ms = _field(document, "completedAt", int, optional=True)
    raw_snapshot = document.get("snapshot")
    if raw_snapshot is None:
        return Entry(fingerprint, reserved_at, reservation_id=_field(document, "reservationId", str))
    if completed_at_ms is None:
        raise InvalidIdempotencyDocumentError(item_id, "has a 'snapshot' but no 'completedAt'")
    return Entry(
        fingerprint,
        reserved_at,
        reservation_id=None,
        completed_at=from_unix_ms(completed_at_ms),
        response=_snapshot(item_id, raw_snapshot),
    )


__all__ = [
    "COMPLETED_TTL_MARGIN_SECONDS",
    "RESERVED_TTL",
    "completed_document",
    "completed_ttl",
    "entry_of",
    "from_unix_ms",
    "reserved_document",
    "unix_ms",
]
