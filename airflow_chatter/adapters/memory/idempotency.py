"""``MemoryIdempotencyStore``: the store in one process's memory.

UNSAFE across processes and restarts: two workers (two Airflow task processes, two API replicas) each have their
own dict, so both would run the same request. Use it for tests and single-process tools only; anything that runs
on more than one process needs the store over a shared container (``airflow_chatter.idempotency.container_store``).

One lock makes every operation atomic, so within the process it honours the whole contract, including the
concurrency rules. It reads one clock, so it is not exposed to clock skew between hosts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.idempotency.decision import Entry, Takeover, decide
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.ports.idempotency import (
    IdempotencyOptions,
    ReservationOutcome,
    Reserved,
    StoredResponse,
    new_reservation_id,
)

#: Expired completed entries are dropped every this many reserves, so a long-lived process does not grow forever.
_SWEEP_EVERY = 1024


class MemoryIdempotencyStore(IdempotencyStore):
    """An in-process idempotency store (see the module docstring: not safe across processes)."""

    def __init__(
        self,
        options: IdempotencyOptions | None = None,
        *,
        clock: Clock = utc_now,
        reservation_ids: Callable[[], str] = new_reservation_id,
    ) -> None:
        self.options = options or IdempotencyOptions()
        self._clock = clock
        self._reservation_ids = reservation_ids
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Entry] = {}
        self._reserves = 0

    def __len__(self) -> int:
        """How many keys are held (reserved, or completed and not yet swept)."""
        with self._lock:
            return len(self._entries)

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        self.validate(scope, key, "fingerprint", fingerprint)
        with self._lock:
            now = self._clock()
            self._reserves += 1
            if self._reserves % _SWEEP_EVERY == 0:
                self._sweep(now)
            existing = self._entries.get((scope, key))
            if existing is not None:
                decision = decide(existing, fingerprint, now, self.options)
                if not isinstance(decision, Takeover):
                    return decision
            reservation_id = self._reservation_ids()
            self._entries[(scope, key)] = Entry(fingerprint=fingerprint, reserved_at=now, reservation_id=reservation_id)
            return Reserved(reservation_id)

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        if not isinstance(response, StoredResponse):
            raise TypeError(f"response must be a StoredResponse, got {type(response).__name__}")
        with self._lock:
            existing = self._entries.get((scope, key))
            if existing is None or existing.completed or existing.reservation_id != reservation_id:
                return
            self._entries[(scope, key)] = replace(
                existing, reservation_id=None, completed_at=self._clock(), response=response
            )

    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        with self._lock:
            existing = self._entries.get((scope, key))
            if existing is None or existing.completed or existing.reservation_id != reservation_id:
                return
            del self._entries[(scope, key)]

    def _sweep(self, now: datetime) -> None:
        expired = [
            slot
            for slot, entry in self._entries.items()
            if entry.completed_at is not None and now - entry.completed_at >= self.options.ttl
        ]
        for slot in expired:
            del self._entries[slot]


__all__ = ["MemoryIdempotencyStore"]
