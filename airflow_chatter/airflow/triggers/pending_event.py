"""The event trigger behind ``schedule: on_pending``: an ``AssetWatcher`` runs it in the triggerer, and each event
it fires becomes an asset event that schedules the source's drain DAG (Airflow 3 event-driven scheduling).

It is a shared-stream trigger in ack mode (Airflow 3.3): every source on one monitored container (same connection,
database, lease container and poll settings) shares one ``PendingStream`` (``airflow_chatter.operations.
pending_stream``), so the container's change feed is read once per poll interval however many sources watch it,
and the stream's stored position moves only past batches whose events Airflow has persisted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_chatter.airflow.triggers._shared import MAX_BACKOFF_POLLS, AcknowledgedStreamProducer, standalone
from airflow_chatter.airflow.triggers.pending import check_poll_interval, serialized

__all__ = ["MAX_BACKOFF_POLLS", "ChatterPendingOutboxEventTrigger"]


def _producer(kwargs: dict[str, Any]) -> AcknowledgedStreamProducer:
    """The producer of the stream named by ``kwargs`` (a trigger's serialized kwargs); it uses only key fields."""
    from airflow_chatter.airflow.sources import SourceConfig

    config = SourceConfig.model_validate(kwargs["source"])
    clients: list[Any] = []

    def open_core() -> Any:
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
        from airflow_chatter.operations.pending_stream import PendingStream, PositionStore

        hook = ChatterCosmosHook(config.cosmos_conn_id, database_name=config.database)
        # The stream's own client (the hook connects here, off the event loop), closed when the stream ends.
        clients.append(hook.get_conn())
        # Read-only peeks and one position write: a 429 is retried within the connection's limits; past them the
        # poll fails, is logged, and is retried after a pause.
        return PendingStream(
            hook.retrying(hook.get_container(config.monitored_container)),
            PositionStore(hook.retrying(hook.get_container(config.lease_container)), config.monitored_container),
            page_size=kwargs["page_size"],
            max_pages=kwargs["max_pages"],
            refire_after_seconds=kwargs["refire_after_seconds"],
        )

    def release() -> None:
        while clients:
            clients.pop().close()

    name = f"{config.database}/{config.monitored_container}"
    return AcknowledgedStreamProducer(open_core, poll_interval=kwargs["poll_interval"], name=name, release=release)


class ChatterPendingOutboxEventTrigger(BaseEventTrigger):
    """Watch one source for pending outbox documents, forever; fire when its container's stream has new work.

    Fires ``{"status": "pending", "source", "pending", "message_ids"}`` (``message_ids``: the first 100) for each
    batch of the container's stream that holds a pending outbox document.
    The stream (see ``airflow_chatter.operations.pending_stream``) announces each pending document once, and again
    after ``refire_after_seconds`` if no stamp followed (a failed drain); a poll that fails is logged and retried
    with a growing pause, so the watcher never ends.

    :param source: the source config as a dict (``SourceConfig.model_dump()``): the trigger is rebuilt from it.
    :param poll_interval: seconds between polls (1 to 600).
    :param refire_after_seconds: fire again for documents still pending after this long without a stamp.
    :param page_size: documents per change-feed page.
    :param max_pages: pages per feed range per poll, at most.
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

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return serialized(self, "source", "poll_interval", "refire_after_seconds", "page_size", "max_pages")

    def shared_stream_key(self) -> Hashable:
        """Sources on one container share one stream: the fields the stream is built from, and nothing else."""
        source = self.source
        return (
            "chatter-pending",
            source["cosmos_conn_id"],
            source["database"],
            source["monitored_container"],
            source["lease_container"],
            self.poll_interval,
            self.refire_after_seconds,
            self.page_size,
            self.max_pages,
        )

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> AcknowledgedStreamProducer:
        return _producer(kwargs)

    def event_for(self, batch: Any) -> TriggerEvent | None:
        """This source's event for one stream batch, or ``None`` for a batch that announced nothing (stamps only:
        it moves the position, nothing to fire, PND-04).

        Judged by ``is_pending_outbox`` alone (PND-01/02), as the sensor's peek is: the source's ``pending_filter``
        runs in the drain only, once per document (PND-03), so a document it refuses starts a drain that skips it.
        """
        from airflow_chatter.operations.pending_stream import describe

        if not batch.all_documents:
            return None
        payload = {"status": "pending", "source": self.source["name"], **describe(batch)}
        self.log.info("Source %s has %d pending outbox document(s)", self.source["name"], payload["pending"])
        return TriggerEvent(payload)  # type: ignore[no-untyped-call]

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        # INVARIANT: each event is yielded before the next batch is pulled, so Airflow binds it to its batch (the
        # batch's position moves only after the event was persisted); pinned by test_pending_stream_trigger.py.
        async for batch in shared_stream:
            if (event := self.event_for(batch)) is not None:
                yield event

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Without the shared-stream manager (a triggerer that could not share it): a stream of its own, whose
        position moves once the triggerer took each event (no persist confirmation on this path)."""
        async for event in standalone(_producer(self.serialize()[1]), self.event_for):
            yield event
