"""The idempotency store's own errors (spec F-06: every deliberate refusal is a ``ChatterError``).

The argument-shaped ones (a bad key, scope, fingerprint or response) are the port's:
``airflow_chatter.ports.idempotency``. Messages never hold the stored response (which may hold secrets).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_chatter.errors import ChatterError


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
    "InvalidIdempotencyDocumentError",
]
