"""The idempotency store's own errors (spec F-06: every deliberate refusal is a ``ChatterError``).

Argument-shaped errors also subclass ``ValueError``. Messages name the field and the limit at fault, never the
stored response (which may hold secrets).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_chatter.errors import ChatterError


class InvalidIdempotencyRequestError(ChatterError, ValueError):
    """A scope, key, fingerprint, reservation id or response refused before any write (F-08)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field} {reason}")


class IdempotencyKeyTooLongError(InvalidIdempotencyRequestError):
    """A key over ``MAX_KEY_LENGTH`` characters, or whose encoded item id is over Cosmos DB's id limit (F-08)."""

    def __init__(self, reason: str, *, limit: int) -> None:
        self.limit = limit
        super().__init__("idempotency key", reason)


class IdempotencyContentionError(ChatterError):
    """A reserve or complete lost the race for one document more often than the store's attempt bound (IDM-C04/C07).

    Raised, never swallowed: a complete that gives up silently would lose a response the handler already produced.
    """

    def __init__(self, operation: str, scope: str, attempts: int) -> None:
        self.operation = operation
        self.scope = scope
        self.attempts = attempts
        super().__init__(
            f"idempotency {operation} in scope {scope!r} lost {attempts} races in a row for one key; giving up"
        )


class InvalidIdempotencyDocumentError(ChatterError):
    """A document in the idempotency container does not have the shape the store writes (IDM-C02)."""

    def __init__(self, item_id: str, reason: str) -> None:
        self.item_id = item_id
        self.reason = reason
        super().__init__(f"idempotency document {item_id!r} is invalid: {reason}")


class IdempotencyContainerError(ChatterError):
    """The container cannot hold idempotency documents safely; names every difference at once (IDM-C01)."""

    def __init__(self, container_id: str, database_id: str, differences: Sequence[str]) -> None:
        self.container_id = container_id
        self.database_id = database_id
        self.differences = tuple(differences)
        super().__init__(
            f"Container {container_id!r} in database {database_id!r} cannot be the idempotency container: "
            + "; and ".join(self.differences)
        )


__all__ = [
    "IdempotencyContainerError",
    "IdempotencyContentionError",
    "IdempotencyKeyTooLongError",
    "InvalidIdempotencyDocumentError",
    "InvalidIdempotencyRequestError",
]
