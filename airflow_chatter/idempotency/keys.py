"""Idempotency keys and item ids (F-08, IDM-C02).

A key is client-supplied text: it may hold ``/``, ``\\``, ``?`` or ``#``, none of which Cosmos DB allows in an id,
so the item id is the key's UTF-8 bytes in URL-safe base64 without padding: reversible and collision-free, unlike a
hash. Both limits are checked before any write, so a refused key leaves nothing behind.
"""

from __future__ import annotations

import base64
import uuid

from airflow_chatter.idempotency.errors import IdempotencyKeyTooLongError, InvalidIdempotencyRequestError

#: IDM-O03: the longest key, in characters (after an sf-string is unquoted).
MAX_KEY_LENGTH = 200
#: Cosmos DB's id limit, in bytes. 200 ASCII characters encode to 267; 200 four-byte characters would not fit.
MAX_ITEM_ID_BYTES = 1023
#: A scope is the partition key value; Cosmos DB allows 2 KB, this keeps well inside it.
MAX_SCOPE_BYTES = 1024


def new_reservation_id() -> str:
    """A fresh reservation id: 32 hex digits (a GUID without dashes, as IDM-C02 stores it)."""
    return uuid.uuid4().hex


def encode_item_id(key: str) -> str:
    """Return the item id of ``key``: Base64Url(UTF-8(key)), unpadded.

    ``idempotency-key`` → ``aWRlbXBvdGVuY3kta2V5``.
    """
    return base64.urlsafe_b64encode(key.encode("utf-8")).rstrip(b"=").decode("ascii")


def decode_item_id(item_id: str) -> str:
    """Return the key an item id encodes (the inverse of :func:`encode_item_id`)."""
    padded = item_id + "=" * (-len(item_id) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")


def validate_key(key: object) -> str:
    """Return ``key`` if it is a usable idempotency key; otherwise raise, naming the limit it breaks (F-08)."""
    if not isinstance(key, str):
        raise InvalidIdempotencyRequestError("idempotency key", f"must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidIdempotencyRequestError("idempotency key", "must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyTooLongError(
            f"is {len(key)} characters long, over the limit of {MAX_KEY_LENGTH} characters", limit=MAX_KEY_LENGTH
        )
    try:
        encoded = encode_item_id(key)
    except UnicodeEncodeError as error:
        raise InvalidIdempotencyRequestError("idempotency key", "is not encodable as UTF-8") from error
    if len(encoded) > MAX_ITEM_ID_BYTES:
        raise IdempotencyKeyTooLongError(
            f"encodes to an item id of {len(encoded)} bytes, over the Cosmos DB id limit of {MAX_ITEM_ID_BYTES} "
            "bytes; use fewer non-ASCII characters",
            limit=MAX_ITEM_ID_BYTES,
        )
    return key


def validate_scope(scope: object) -> str:
    """Return ``scope`` if it is a usable scope (the partition key value); otherwise raise naming why."""
    if not isinstance(scope, str):
        raise InvalidIdempotencyRequestError("idempotency scope", f"must be a string, got {type(scope).__name__}")
    if not scope:
        raise InvalidIdempotencyRequestError("idempotency scope", "must not be empty")
    size = len(scope.encode("utf-8", "surrogatepass"))
    if size > MAX_SCOPE_BYTES:
        raise InvalidIdempotencyRequestError(
            "idempotency scope", f"is {size} bytes long, over the limit of {MAX_SCOPE_BYTES} bytes"
        )
    return scope


def validate_token(field: str, value: object) -> str:
    """Return ``value`` if it is a non-empty string (a fingerprint or a reservation id); otherwise raise."""
    if not isinstance(value, str) or not value:
        raise InvalidIdempotencyRequestError(field, f"must be a non-empty string, got {value!r}")
    return value


__all__ = [
    "MAX_ITEM_ID_BYTES",
    "MAX_KEY_LENGTH",
    "MAX_SCOPE_BYTES",
    "decode_item_id",
    "encode_item_id",
    "validate_key",
    "validate_scope",
    "validate_token",
]
