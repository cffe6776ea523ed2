"""``ContainerIdempotencyStore``: the idempotency store over the ``DocumentContainer`` port (so over Cosmos DB
through its adapter, or over any other container).

Why it is correct (IDM-C04..C10):

* **A grant comes only from an atomic write.** A reservation is the ``create`` of ``id = Base64Url(key)`` in
  partition ``scope``: Cosmos DB decides a duplicate id on the partition's primary replica, so exactly one
  concurrent caller gets it and every other gets 409 (``Conflict``). Taking over a timed-out reservation, or a
  completed entry past its ttl, is a ``replace`` with ``if_match`` the ETag that was read: a stale view gets 412 and
  re-decides. The store never grants on the strength of a read.
* **Complete and abandon are ETag-conditional too**, and only act for the reservation id that still holds the key,
  so a caller that lost its slot cannot clobber or release the new holder's.
* **Expiry is decided here, against the injected clock**, from ``reservedAt``/``completedAt``. Cosmos DB's TTL sweep
  is best-effort (an expired item may still be read), so ``ttl`` only reclaims storage (see ``documents``).
* **Session consistency suffices**: a stale read after a 409 can only make the follow-up conditional write fail
  (412/404) and retry, or yield a spurious ``AlreadyInFlight``; never a double grant.

The store only addresses its container;
:func:`~airflow_chatter.adapters.cosmos.provision.provision_idempotency_container` creates one
(``/scope``-partitioned, ``defaultTtl = -1``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.idempotency.decision import Takeover, decide
from airflow_chatter.idempotency.documents import completed_document, entry_of, reserved_document
from airflow_chatter.idempotency.errors import IdempotencyContainerError, IdempotencyContentionError
from airflow_chatter.idempotency.provisioning import container_differences
from airflow_chatter.ports import Conflict, DocumentContainer, IdempotencyStore, NotFound, PreconditionFailed
from airflow_chatter.ports.idempotency import (
    IdempotencyOptions,
    ReservationOutcome,
    Reserved,
    StoredResponse,
    encode_item_id,
    new_reservation_id,
)

log = logging.getLogger(__name__)

#: IDM-C04/C07/C08: lost races for one key before reserve or complete raise (and abandon gives up quietly). A bound,
#: not a setting: each lost race means another caller made progress on the same key.
MAX_ATTEMPTS = 8


class ContainerIdempotencyStore(IdempotencyStore):
    """Idempotency keys as documents of a ``/scope``-partitioned container; see the module docstring."""

    def __init__(
        self,
        container: DocumentContainer,
        options: IdempotencyOptions | None = None,
        *,
        clock: Clock = utc_now,
        reservation_ids: Callable[[], str] = new_reservation_id,
    ) -> None:
        self.container = container
        self.options = options or IdempotencyOptions()
        self._clock = clock
        self._reservation_ids = reservation_ids

    def verify_container(self) -> None:
        """Refuse a container that cannot hold idempotency documents, naming every difference (one read)."""
        properties = self.container.properties()
        differences = container_differences(properties)
        if differences:
            raise IdempotencyContainerError(properties.container_id, properties.database_id, differences)

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        self.validate(scope, key, "fingerprint", fingerprint)
        item_id = encode_item_id(key)
        for _ in range(MAX_ATTEMPTS):
            reservation_id = self._reservation_ids()
            document = reserved_document(scope, key, fingerprint, reservation_id, self._clock())
            try:
                self.container.create(document, scope)
                return Reserved(reservation_id)
            except Conflict:
                pass
            try:
                existing = self.container.read(item_id, scope)
            except NotFound:
                continue  # deleted (abandoned, swept) between our create and read: create again
            decision = decide(entry_of(existing), fingerprint, self._clock(), self.options)
            if not isinstance(decision, Takeover):
                return decision
            try:
                self.container.replace(item_id, scope, document, if_match=existing["_etag"])
                return Reserved(reservation_id)
            except (PreconditionFailed, NotFound):
                continue  # someone else changed it since our read: re-decide
        raise IdempotencyContentionError("reserve", scope, MAX_ATTEMPTS)

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        if not isinstance(response, StoredResponse):
            raise TypeError(f"response must be a StoredResponse, got {type(response).__name__}")
        item_id = encode_item_id(key)
        for _ in range(MAX_ATTEMPTS):
            try:
                existing = self.container.read(item_id, scope)
            except NotFound:
                return  # never reserved, or abandoned: nothing to complete (IDM-14)
            entry = entry_of(existing)
            if entry.completed or entry.reservation_id != reservation_id:
                return  # the slot was lost (IDM-10)
            completed = completed_document(existing, response, self._clock(), self.options)
            try:
                self.container.replace(item_id, scope, completed, if_match=existing["_etag"])
                return
            except (PreconditionFailed, NotFound):
                continue
        raise IdempotencyContentionError("complete", scope, MAX_ATTEMPTS)

    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        item_id = encode_item_id(key)
        for _ in range(MAX_ATTEMPTS):
            try:
                existing = self.container.read(item_id, scope)
            except NotFound:
                return
            entry = entry_of(existing)
            if entry.completed or entry.reservation_id != reservation_id:
                return  # never delete a recorded response, nor another holder's slot (IDM-12, IDM-13)
            try:
                self.container.delete(item_id, scope, if_match=existing["_etag"])
                return
            except NotFound:
                return
            except PreconditionFailed:
                continue
        # The reservation simply times out instead; an abandon is a courtesy, never worth failing the caller for.
        log.warning("idempotency abandon in scope %r gave up after %d lost races", scope, MAX_ATTEMPTS)


__all__ = ["MAX_ATTEMPTS", "ContainerIdempotencyStore"]
