"""The event trigger behind ``schedule: on_pending``: an ``AssetWatcher`` runs it in the triggerer, and each event
it fires becomes an asset event that schedules the source's drain DAG (Airflow 3 event-driven scheduling)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_chatter.airflow.triggers.pending import check_poll_interval

#: After a poll fails (Cosmos unreachable, throttled), the next one waits this many poll intervals, at most.
MAX_BACKOFF_POLLS = 12


class ChatterPendingOutboxEventTrigger(BaseEventTrigger):
    """Watch one source for pending outbox documents, forever; fire when a lease has new work.

    Every ``poll_interval`` seconds it runs ``PendingWatch.poll()`` (read-only peeks after each lease's checkpoint,
    see ``airflow_chatter.operations.pending_watch``) in a thread, and yields its event:
    ``{"status": "pending", "source", "leases": {lease id: pending count}, "pending"}``. A failed poll is logged
    (type and message only) and retried with a growing pause; the trigger does not end, because a watcher that
    ended would schedule nothing until the triggerer restarts it.

    :param source: the source config as a dict (``SourceConfig.model_dump()``): the trigger is rebuilt from it.
    :param poll_interval: seconds between polls (1 to 600).
    :param refire_after_seconds: fire again for documents still pending after this long without a drain.
    :param page_size: documents per change-feed page.
    :param max_pages: pages per lease per poll, at most.
    """

    def __init__(
        self,
        *,
        source: dict[str, Any],
        poll_interval: float = 5.0,
        refire_after_seconds: float = 300.0,
        page_size: int = 100,
        max_pages: int = 5,
    ) -> None:
        from airflow_chatter.airflow.sources import SourceConfig

        super().__init__()  # type: ignore[no-untyped-call]
        self.source = SourceConfig.model_validate(source).model_dump(mode="json")
        self.poll_interval = check_poll_interval(poll_interval)
        self.refire_after_seconds = float(refire_after_seconds)
        self.page_size = page_size
        self.max_pages = max_pages
        self._client: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "source": self.source,
                "poll_interval": self.poll_interval,
                "refire_after_seconds": self.refire_after_seconds,
                "page_size": self.page_size,
                "max_pages": self.max_pages,
            },
        )

    def _watch(self) -> Any:
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
        from airflow_chatter.airflow.sources import SourceConfig
        from airflow_chatter.operations.pending_watch import PendingWatch

        config = SourceConfig.model_validate(self.source)
        if self._client is not None:  # a watch rebuilt after a failure: its old client goes first
            self._client.close()
            self._client = None
        hook = ChatterCosmosHook(config.cosmos_conn_id, database_name=config.database)
        # The trigger's own client (the hook connects here, off the event loop), closed by cleanup().
        self._client = hook.get_conn()
        return PendingWatch(
            config,
            hook.get_container(config.monitored_container),
            hook.get_container(config.lease_container),
            page_size=self.page_size,
            max_pages=self.max_pages,
            refire_after_seconds=self.refire_after_seconds,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch: Any = None
        failures = 0
        while True:
            try:
                # The connection lookup and the SDK are blocking: keep them off the triggerer's event loop.
                if watch is None:
                    watch = await asyncio.to_thread(self._watch)
                event = await asyncio.to_thread(watch.poll)
                failures = 0
            except Exception as error:  # noqa: BLE001 - logged and retried: the watcher must keep watching
                failures += 1
                watch = None
                self.log.warning(
                    "Pending watch of source %s failed (%s: %s); retrying",
                    self.source["name"],
                    type(error).__name__,
                    error,
                )
                await asyncio.sleep(self.poll_interval * min(failures, MAX_BACKOFF_POLLS))
                continue
            if event is not None:
                self.log.info("Source %s has pending outbox documents: %s", self.source["name"], event["leases"])
                yield TriggerEvent(event)  # type: ignore[no-untyped-call]
            await asyncio.sleep(self.poll_interval)

    async def cleanup(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)
