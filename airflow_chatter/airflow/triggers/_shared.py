"""The one shared-stream producer of the package's event triggers (Airflow 3.3's ack mode).

Every trigger whose ``shared_stream_key`` is equal shares one ``AcknowledgedStreamProducer`` in the triggerer: it
polls one core stream (``PendingStream`` of a container, ``TopicArrivals`` of a topic) every ``poll_interval``
seconds and hands each batch to the shared-stream manager, which broadcasts it to every subscribed trigger. The
manager calls ``advance`` with the batches every subscriber has moved past and whose trigger events Airflow has
persisted; the core stream then stores its position (a continuation, a committed offset) up to the first batch that
was not handled, and reads that one again. The rule of what moves lives in the core (``Resolution``); this module
only carries Airflow's counts to it and keeps the blocking reads off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer

from airflow_chatter.ports.resolution import Resolution

log = logging.getLogger(__name__)

#: After a poll fails (service unreachable, throttled), the next one waits this many poll intervals, at most.
MAX_BACKOFF_POLLS = 12


class AcknowledgedStream(Protocol):
    """What the producer drives: the core streams have these four methods."""

    def poll(self) -> tuple[Any, Any] | None: ...

    def advance(self, resolved: Sequence[tuple[Any, Resolution]]) -> bool: ...

    def rewind(self) -> None: ...

    def close(self) -> None: ...


def resolution(outcome: Any) -> Resolution:
    """Airflow's ``AdvanceOutcome`` as the core reads it: a reject is a terminal answer (our filters never reject)."""
    return Resolution(accepted=int(outcome.acked) + int(outcome.rejected), failed=int(outcome.failed))


class AcknowledgedStreamProducer(SharedStreamProducer):
    """Poll one core stream for every trigger of a shared-stream group; advance it only for persisted events.

    ``open_core`` builds the stream (connections and all; it runs in a thread), ``release`` closes what it opened.
    The first poll waits one interval, so that triggers restarted together are all subscribed before the first
    batch is broadcast (a batch is owed only to the triggers subscribed when it was broadcast).
    """

    def __init__(
        self,
        open_core: Callable[[], AcknowledgedStream],
        *,
        poll_interval: float,
        name: str,
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self.open_core = open_core
        self.poll_interval = poll_interval
        self.name = name
        self.release = release
        self._core: AcknowledgedStream | None = None
        # The core stream is not thread-safe (a Kafka consumer is not): polls and advances take turns.
        self._turn = asyncio.Lock()

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        failures = 0
        await asyncio.sleep(self.poll_interval)
        while True:
            try:
                async with self._turn:
                    if self._core is None:
                        self._core = await asyncio.to_thread(self.open_core)
                    found = await asyncio.to_thread(self._core.poll)
                failures = 0
            except Exception as error:  # noqa: BLE001 - logged and retried: the watcher must keep watching
                failures += 1
                log.warning("Shared stream %s: poll failed (%s: %s); retrying", self.name, type(error).__name__, error)
                if self._core is not None:
                    await asyncio.to_thread(self._core.rewind)
                await asyncio.sleep(self.poll_interval * min(failures, MAX_BACKOFF_POLLS))
                continue
            if found is not None:
                yield found
            await asyncio.sleep(self.poll_interval)

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        core = self._core
        if core is None:
            return
        resolved = [(item.broker_payload, resolution(item.outcome)) for item in batch]
        try:
            async with self._turn:
                await asyncio.to_thread(core.advance, resolved)
        except Exception as error:  # noqa: BLE001 - the position stays behind: those batches are read again
            log.warning(
                "Shared stream %s: storing the position failed (%s: %s); it stays behind",
                self.name,
                type(error).__name__,
                error,
            )

    async def aclose(self) -> None:
        core, self._core = self._core, None
        if core is not None:
            await asyncio.to_thread(core.close)
        await asyncio.to_thread(self.release)


async def standalone(producer: AcknowledgedStreamProducer, derive: Callable[[Any], Any | None]) -> AsyncIterator[Any]:
    """The same stream for one trigger without the shared-stream manager (``run()``): each batch's event is yielded,
    and the position moves when the trigger resumes after it (Airflow took the event; no persist confirmation)."""
    from airflow.triggers.shared_stream import AdvanceOutcome

    stream = producer.open_stream()
    try:
        async for raw, position in stream:
            event = derive(raw)
            if event is not None:
                yield event
            await producer.advance([AdvanceItem(position, AdvanceOutcome(acked=1, failed=0))])
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await producer.aclose()


__all__ = ["MAX_BACKOFF_POLLS", "AcknowledgedStream", "AcknowledgedStreamProducer", "resolution", "standalone"]
