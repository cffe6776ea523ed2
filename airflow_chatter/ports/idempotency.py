"""The idempotency-store port (spec section B): reserve, then complete or abandon."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store's values live with the rest of idempotency, which imports this module
    from airflow_chatter.idempotency.values import IdempotencyOptions, ReservationOutcome, StoredResponse


class IdempotencyStore(abc.ABC):
    """Reserve / complete / abandon idempotency keys. Thread-safe.

    A caller reserves ``(scope, key)`` with the request's fingerprint before running a non-idempotent operation.
    Only the caller that gets ``Reserved`` runs it; it then completes the key with the response (so every retry
    replays it) or abandons it (so an immediate retry may run). ``complete`` and ``abandon`` are conditional on the
    reservation id: a caller that lost its reservation (it timed out and someone took over) can never overwrite or
    release the new holder's slot.

    Every store validates its arguments the same way (``validate``) before any write (F-08). The conformance suite
    ``airflow_chatter.testing.contracts.idempotency`` pins the behaviour; run it against any implementation.
    """

    #: The ttl and reservation timeout this store applies.
    options: IdempotencyOptions

    @abc.abstractmethod
    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        """Try to take ``key`` in ``scope`` for the request with ``fingerprint``; exactly one outcome, never raises
        for an ordinary answer (in flight, replay, mismatch)."""

    @abc.abstractmethod
    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        """Record ``response`` if ``reservation_id`` still holds ``key``; otherwise do nothing (IDM-10, IDM-14)."""

    @abc.abstractmethod
    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        """Release ``key`` if ``reservation_id`` still holds it and it is not completed; otherwise do nothing
        (IDM-11..13, IDM-15)."""

    @staticmethod
    def validate(scope: str, key: str, token_field: str, token: str) -> None:
        """Refuse a bad scope, key, fingerprint or reservation id before anything is written (F-08)."""
        from airflow_chatter.idempotency.keys import validate_key, validate_scope, validate_token

        validate_scope(scope)
        validate_key(key)
        validate_token(token_field, token)


__all__ = [
    "IdempotencyStore",
]
