"""The Idempotency-Key guard of each source's UI actions, and where it keeps its keys.

A source naming ``ui_idempotency_container`` keeps its keys there (verified on first use, shared by every
api-server worker); one without keeps them in this process's memory, which is right for a single worker only: the
API says so and logs a warning once per source. The guard's scope is the authenticated user, so one user's key
never replays to another.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Literal

from fastapi import HTTPException, Request

from airflow_chatter.adapters.fastapi.idempotency import HttpIdempotencyOptions, Idempotency
from airflow_chatter.adapters.memory.idempotency import MemoryIdempotencyStore
from airflow_chatter.airflow.sources import SourceConfig
from airflow_chatter.errors import ChatterError
from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore
from airflow_chatter.ports import ContainerError, DocumentContainer, IdempotencyStore

log = logging.getLogger("airflow_chatter.ui")

#: What the API says when a source's UI actions keep their keys in memory.
MEMORY_WARNING = (
    "ui_idempotency_container is not set for this source, so the UI actions' Idempotency-Keys are kept in one "
    "api-server process's memory: a double click acts once only with a single api-server worker "
    "(AIRFLOW__API__WORKERS=1)"
)


@dataclasses.dataclass(frozen=True)
class IdempotencyInfo:
    """Where a source's UI actions keep their Idempotency-Keys, as the API reports it."""

    store: Literal["cosmos", "memory"]
    shared_across_workers: bool
    container: str | None = None
    warning: str | None = None


class SourceGuards:
    """One guard per idempotency container, and the local guard of every source without one.

    ``container_of`` opens a source's idempotency container; ``store`` overrides every source's store (tests, a
    deployment with its own store).
    """

    def __init__(
        self, container_of: Callable[[SourceConfig], DocumentContainer], store: IdempotencyStore | None = None
    ) -> None:
        self._container_of = container_of
        self._override = store
        self._local = Idempotency(store or MemoryIdempotencyStore(), HttpIdempotencyOptions(), scope=self._scope)
        self._guards: dict[tuple[str, str, str], Idempotency] = {}
        self._warned: set[str] = set()

    @staticmethod
    def _scope(request: Request) -> str:
        return f"chatter-ui:{request.state.chatter_user.name}"

    def info(self, source: SourceConfig, *, editor: bool = True) -> IdempotencyInfo:
        """Where ``source``'s keys are kept; the memory store's warning only for an ``editor`` (who may act)."""
        info = self._info(source)
        return info if editor else dataclasses.replace(info, warning=None)

    def _info(self, source: SourceConfig) -> IdempotencyInfo:
        if self._override is not None:
            shared = not isinstance(self._override, MemoryIdempotencyStore)
            return IdempotencyInfo("cosmos" if shared else "memory", shared, None, None if shared else MEMORY_WARNING)
        if source.ui_idempotency_container is None:
            return IdempotencyInfo("memory", False, None, MEMORY_WARNING)
        return IdempotencyInfo("cosmos", True, f"{source.database}/{source.ui_idempotency_container}")

    def guard(self, source: SourceConfig) -> Idempotency:
        """The source's guard: over its Cosmos idempotency container (verified once), else over the local store."""
        if self._override is not None:
            return self._local
        container = source.ui_idempotency_container
        if container is None:
            if source.name not in self._warned:
                self._warned.add(source.name)
                log.warning("UI actions on source %s: %s", source.name, MEMORY_WARNING)
            return self._local
        slot = (source.cosmos_conn_id, source.database, container)
        guard = self._guards.get(slot)
        if guard is None:
            cosmos = ContainerIdempotencyStore(self._container_of(source))
            try:
                cosmos.verify_container()
            except (ChatterError, ContainerError) as error:
                where = f"{source.database}/{container}"
                message = f"source {source.name}: {where} cannot keep the UI's keys: {error}"
                raise HTTPException(503, {"field": "ui_idempotency_container", "message": message}) from None
            guard = self._guards.setdefault(slot, Idempotency(cosmos, HttpIdempotencyOptions(), scope=self._scope))
        return guard

    def store_kind(self, source: SourceConfig) -> str:
        """An action's answer says where its key is kept: ``cosmos``, or ``memory (single api-server worker only)``."""
        return "cosmos" if self.info(source).shared_across_workers else "memory (single api-server worker only)"
