"""When a source's outbox has work: the decision behind the event-driven drain (``schedule: on_pending``).

``PendingWatch.poll()`` lists the source's scheduled leases (read-only: a query of the lease container), peeks each
lease's change feed after its checkpoint with the same ``peek_pending`` the deferrable sensor uses, and answers
what a trigger should fire, or ``None``. It never writes: no lease is created, taken or checkpointed.

It fires once per *checkpoint state*: pending documents after a lease's checkpoint fire that lease once; the next
fire for it waits until a drain has moved its checkpoint (new work after the drain), or until
``refire_after_seconds`` have passed with the documents still pending (a drain that failed, or an event lost).
Without that, every poll would fire again while the drain it caused is still queued. A source without leases yet
(never drained) is judged by one pending count over the container instead.

The trigger in ``airflow_chatter.airflow.triggers.pending_event`` runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from airflow_chatter.drain.leases import ACTIVE, LeaseStore
from airflow_chatter.operations.engines import EngineConfig, open_source_leases
from airflow_chatter.operations.outbox_queries import count_pending
from airflow_chatter.operations.pending import peek_pending
from airflow_chatter.ports import DocumentContainer

#: The key of a source without leases: one count over the whole container stands for every range.
NO_LEASES = "<no leases yet>"


class WatchedSource(EngineConfig, Protocol):
    """What the watch needs of a source's configuration (``airflow_chatter.airflow.sources.SourceConfig``)."""

    @property
    def name(self) -> str: ...


class PendingWatch:
    """Poll a source for pending outbox documents; see the module docstring for when it fires."""

    def __init__(
        self,
        config: WatchedSource,
        monitored: DocumentContainer,
        leases: DocumentContainer,
        *,
        page_size: int = 100,
        max_pages: int = 5,
        refire_after_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if refire_after_seconds <= 0:
            raise ValueError("refire_after_seconds must be positive")
        self.config = config
        self.monitored = monitored
        self.leases = leases
        self.page_size = page_size
        self.max_pages = max_pages
        self.refire_after_seconds = refire_after_seconds
        self._clock = clock
        self._store: LeaseStore | None = None
        #: (lease id, checkpoint) → when it last fired.
        self._fired: dict[tuple[str, str | None], float] = {}

    def _active_leases(self) -> list[tuple[str, str | None]]:
        if self._store is None:
            # Reads the containers' properties (their check, the Source Identity); creates nothing.
            self._store = open_source_leases(self.config, self.monitored, self.leases).store
        return [(lease.id, lease.continuation) for lease in self._store.list_leases() if lease.state == ACTIVE]

    def _due(self, key: tuple[str, str | None], now: float) -> bool:
        fired = self._fired.get(key)
        return fired is None or now - fired >= self.refire_after_seconds

    def poll(self) -> dict[str, Any] | None:
        """One look at every lease: the event to fire (``{"status": "pending", "source", "leases", "pending"}``,
        ``leases`` mapping each lease id with new work to its pending count), or ``None``."""
        now = self._clock()
        found: dict[str, int] = {}
        keys: list[tuple[str, str | None]] = []
        leases = self._active_leases()
        if not leases:
            key: tuple[str, str | None] = (NO_LEASES, None)
            keys.append(key)
            pending = count_pending(self.monitored)
            if pending and self._due(key, now):
                found[NO_LEASES] = pending
        for lease_id, checkpoint in leases:
            key = (lease_id, checkpoint)
            keys.append(key)
            if not self._due(key, now):
                continue
            peek = peek_pending(
                self.monitored,
                self.leases,
                lease_id,
                continuation=checkpoint,
                page_size=self.page_size,
                max_pages=self.max_pages,
            )
            if peek.pending:
                found[lease_id] = peek.pending
        # Forget checkpoints the drains have moved past: only the current ones can suppress a fire.
        self._fired = {key: at for key, at in self._fired.items() if key in keys}
        if not found:
            return None
        for key in keys:
            if key[0] in found:
                self._fired[key] = now
        return {"status": "pending", "source": self.config.name, "leases": found, "pending": sum(found.values())}
