"""The trigger that waits, in the triggerer, until a lease has pending outbox documents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_chatter.airflow.utils.sdk_logging import quiet_cosmos_http_logging
from airflow_chatter.errors import ConfigurationError

#: Poll bounds: faster would spend RU on an idle feed for nothing; slower would make the sensor lag a
#: schedule. A poll reads at most ``max_pages`` pages per lease.
MIN_POLL_INTERVAL_SECONDS = 1.0
MAX_POLL_INTERVAL_SECONDS = 600.0


def check_poll_interval(value: float) -> float:
    if not MIN_POLL_INTERVAL_SECONDS <= float(value) <= MAX_POLL_INTERVAL_SECONDS:
        raise ConfigurationError(
            "poll_interval",
            value,
            f"must be from {MIN_POLL_INTERVAL_SECONDS:g} to {MAX_POLL_INTERVAL_SECONDS:g} seconds",
        )
    return float(value)


def serialized(trigger: BaseTrigger, *kwargs: str) -> tuple[str, dict[str, Any]]:
    """A trigger's ``serialize()``: its class path and the named constructor kwargs, read from its attributes.

    Every trigger here stores each kwarg under its own name, so the triggerer rebuilds it from exactly this tuple.
    """
    return f"{type(trigger).__module__}.{type(trigger).__qualname__}", {name: getattr(trigger, name) for name in kwargs}


class ChatterPendingOutboxTrigger(BaseTrigger):
    """Peek the change feed of each lease after its checkpoint every ``poll_interval`` seconds.

    Fires ``{"status": "pending", "lease_id", "pending", "documents"}`` as soon as one lease has a
    pending outbox document, or ``{"status": "error", "message"}`` if a peek fails. Peeks are read-only
    and resume where the previous one stopped, so an idle feed costs one empty read per lease per poll.

    :param cosmos_conn_id: the Cosmos connection.
    :param database: the database of both containers.
    :param monitored_container: the container whose change feed is peeked.
    :param lease_container: where the leases (and their checkpoints) are.
    :param lease_ids: the leases to watch.
    :param poll_interval: seconds between polls (1 to 600).
    :param page_size: documents per change-feed page.
    :param max_pages: pages per lease per poll, at most.
    :param cosmos_http_logging: keep the Azure SDK's per-request HTTP lines in the log (default: quiet).
    """

    def __init__(
        self,
        *,
        cosmos_conn_id: str,
        database: str,
        monitored_container: str,
        lease_container: str,
        lease_ids: list[str],
        poll_interval: float = 60.0,
        page_size: int = 100,
        max_pages: int = 5,
        cosmos_http_logging: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.cosmos_conn_id = cosmos_conn_id
        self.database = database
        self.monitored_container = monitored_container
        self.lease_container = lease_container
        self.lease_ids = list(lease_ids)
        self.poll_interval = check_poll_interval(poll_interval)
        self.page_size = page_size
        self.max_pages = max_pages
        self.cosmos_http_logging = cosmos_http_logging
        self._client: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return serialized(
            self,
            "cosmos_conn_id",
            "database",
            "monitored_container",
            "lease_container",
            "lease_ids",
            "poll_interval",
            "page_size",
            "max_pages",
            "cosmos_http_logging",
        )

    def _containers(self) -> tuple[Any, Any]:
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

        hook = ChatterCosmosHook(self.cosmos_conn_id, database_name=self.database)
        # The trigger's own client (the hook connects here, off the event loop), closed by cleanup().
        self._client = hook.get_conn()
        # Read-only peeks: a 429 is retried within the connection's limits (the project's clients leave 429s to
        # their callers); past them the trigger reports the error and the sensor's task fails, naming the limits.
        return (
            hook.retrying(hook.get_container(self.monitored_container)),
            hook.retrying(hook.get_container(self.lease_container)),
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_chatter.operations.pending import peek_pending

        with quiet_cosmos_http_logging(self.cosmos_http_logging):
            async for event in self._poll(peek_pending):
                yield event

    async def _poll(self, peek_pending: Any) -> AsyncIterator[TriggerEvent]:
        try:
            # The connection lookup and the SDK are blocking: keep them off the triggerer's event loop.
            monitored, leases = await asyncio.to_thread(self._containers)
            positions: dict[str, str | None] = dict.fromkeys(self.lease_ids)
            while True:
                for lease_id in self.lease_ids:
                    peek = await asyncio.to_thread(
                        peek_pending,
                        monitored,
                        leases,
                        lease_id,
                        continuation=positions[lease_id],
                        page_size=self.page_size,
                        max_pages=self.max_pages,
                    )
                    positions[lease_id] = peek.continuation
                    if peek.pending:
                        self.log.info("Lease %s has %d pending outbox document(s)", lease_id, peek.pending)
                        yield TriggerEvent(  # type: ignore[no-untyped-call]
                            {
                                "status": "pending",
                                "lease_id": lease_id,
                                "pending": peek.pending,
                                "documents": peek.documents,
                            }
                        )
                        return
                await asyncio.sleep(self.poll_interval)
        except Exception as error:  # noqa: BLE001 - reported to the task, which fails with the message
            yield TriggerEvent({"status": "error", "message": f"{type(error).__name__}: {error}"})  # type: ignore[no-untyped-call]

    async def cleanup(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)
