"""Idempotency keys: run a non-idempotent operation at most once per key, and replay its response to retries.

The core of it (no Airflow, no FastAPI, no azure-cosmos import): the store over the project's ``DocumentContainer``
port (so over Cosmos DB). The store's interface and the values it speaks are a port (``airflow_chatter.ports``); the
in-memory store is in ``airflow_chatter.adapters.memory``, the FastAPI side in ``airflow_chatter.adapters.fastapi``,
the Airflow hook in ``airflow_chatter.airflow.hooks.idempotent_http``; the conformance suite in
``airflow_chatter.testing.contracts.idempotency``. See docs/idempotency.md.
"""

from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore
from airflow_chatter.idempotency.errors import (
    IdempotencyContainerError,
    IdempotencyContentionError,
    InvalidIdempotencyDocumentError,
)
from airflow_chatter.ports.idempotency import (
    MAX_ITEM_ID_BYTES,
    MAX_KEY_LENGTH,
    AlreadyInFlight,
    BodyHashMismatch,
    IdempotencyKeyTooLongError,
    IdempotencyOptions,
    InvalidIdempotencyRequestError,
    Replay,
    ReservationOutcome,
    Reserved,
    StoredResponse,
    encode_item_id,
    validate_key,
)

__all__ = [
    "MAX_ITEM_ID_BYTES",
    "MAX_KEY_LENGTH",
    "AlreadyInFlight",
    "BodyHashMismatch",
    "ContainerIdempotencyStore",
    "IdempotencyContainerError",
    "IdempotencyContentionError",
    "IdempotencyKeyTooLongError",
    "IdempotencyOptions",
    "InvalidIdempotencyDocumentError",
    "InvalidIdempotencyRequestError",
    "Replay",
    "ReservationOutcome",
    "Reserved",
    "StoredResponse",
    "encode_item_id",
    "validate_key",
]
