"""The arrivals stream of one topic: what an event-driven receiver (a topic watcher) stands on.

One ``TopicArrivals`` reads a topic through one ``MessageSource`` (the watcher's own consumer group, never a
receiver's), for every receiver that watches the topic; each poll that returned records becomes one
``ArrivalBatch`` (how many records per partition, no payloads). The group's offsets are committed only through
``advance``, which the caller runs once the batch has been handled (in Airflow: once every trigger event derived
from it was persisted in the metadata database). An unhandled batch closes the source, so the next poll reopens it
at the committed offsets and reads that batch, and every one after it, again: nothing is lost, and a batch handled
but not yet committed when the process dies comes again (at least once).

The receivers themselves read their own group's offsets when they run, so the stream only says *when* to run them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_chatter.ports import MessageSource, ReceivedMessage
from airflow_chatter.ports.resolution import Resolution


@dataclass(frozen=True)
class ArrivalBatch:
    """Records one poll of ``topic`` returned: ``partitions`` maps each partition to its record count."""

    topic: str
    partitions: tuple[tuple[int, int], ...]

    @property
    def records(self) -> int:
        return sum(count for _, count in self.partitions)


@dataclass(frozen=True)
class ArrivalPosition:
    """The last record per partition of a batch (what a commit names), and the reader's rewind count then."""

    last: tuple[ReceivedMessage, ...]
    generation: int

    @property
    def announced(self) -> int:
        return len(self.last)


class TopicArrivals:
    """Read one topic's arrivals; see the module docstring. ``open_source`` opens the watcher group's source."""

    def __init__(
        self, open_source: Callable[[], MessageSource], topic: str, *, max_records: int = 500, poll_timeout: float = 1.0
    ) -> None:
        self.open_source = open_source
        self.topic = topic
        self.max_records = max_records
        self.poll_timeout = poll_timeout
        self._source: MessageSource | None = None
        self._generation = 0

    def poll(self) -> tuple[ArrivalBatch, ArrivalPosition] | None:
        """One poll: the batch of records it returned and their position, or ``None`` when none came in time."""
        if self._source is None:
            self._source = self.open_source()
        messages = [m for m in self._source.poll(self.max_records, self.poll_timeout) if m.topic == self.topic]
        if not messages:
            return None
        counts: dict[int, int] = {}
        last: dict[int, ReceivedMessage] = {}
        for message in messages:
            counts[message.partition] = counts.get(message.partition, 0) + 1
            if message.partition not in last or message.offset > last[message.partition].offset:
                last[message.partition] = message
        batch = ArrivalBatch(self.topic, tuple(sorted(counts.items())))
        return batch, ArrivalPosition(tuple(last[p] for p in sorted(last)), self._generation)

    def advance(self, resolved: Sequence[tuple[ArrivalPosition, Resolution]]) -> bool:
        """Commit the records of the handled batches of ``resolved`` (in poll order) up to the first unhandled one;
        from that one on, close the source, so its records are read again. Returns whether anything was committed."""
        handled: list[ReceivedMessage] = []
        rewind = False
        for position, resolution in resolved:
            if position.generation != self._generation:
                continue
            if not resolution.handled(announced=position.announced):
                rewind = True
                break
            handled.extend(position.last)
        committed = bool(handled) and self._source is not None
        if committed and self._source is not None:
            self._source.commit(handled)
        if rewind:
            self.rewind()
        return committed

    def rewind(self) -> None:
        """Read again from the committed offsets (after an unhandled batch, or a failed poll)."""
        self._generation += 1
        self.close()

    def close(self) -> None:
        """Leave without committing more (the next poll reopens the source at the committed offsets)."""
        source, self._source = self._source, None
        if source is not None:
            source.close()


__all__ = ["ArrivalBatch", "ArrivalPosition", "TopicArrivals"]
