"""The in-memory message source: a consumer group's view of topics held in lists, for the receive loop without a
broker.

Messages are appended with ``append`` (offsets count from 0 per partition); ``poll`` hands them on in partition
order from the group's position, and ``commit`` moves the committed offsets. ``close`` (or ``rewind``) puts the
position back at the committed offsets, as a consumer that left its group and came back would find it: whatever was
polled but not committed comes again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from airflow_chatter.ports import MessageSource, ReceivedMessage

Partition = tuple[str, int]


class MemoryMessageSource(MessageSource):
    """One consumer group over in-memory partitions. It owns every partition from the start, so with nothing
    appended it is caught up at once (a broker's consumer is not until the group assigned it partitions)."""

    def __init__(self) -> None:
        self._log: dict[Partition, list[ReceivedMessage]] = {}
        self._position: dict[Partition, int] = {}
        #: The group's committed offsets: the next offset to read per (topic, partition).
        self.committed: dict[Partition, int] = {}
        self._lock = threading.Lock()

    def append(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int = 0,
    ) -> ReceivedMessage:
        """Add a message at the end of its partition, as a producer would; the stored value."""
        with self._lock:
            log = self._log.setdefault((topic, partition), [])
            message = ReceivedMessage(topic, partition, len(log), key, value, tuple(headers))
            log.append(message)
            return message

    def poll(self, max_records: int, timeout: float) -> Sequence[ReceivedMessage]:
        polled: list[ReceivedMessage] = []
        with self._lock:
            for where, log in sorted(self._log.items()):
                start = self._position.get(where, self.committed.get(where, 0))
                taken = log[start : start + max_records - len(polled)]
                self._position[where] = start + len(taken)
                polled.extend(taken)
        return polled

    def caught_up(self, timeout: float) -> bool:
        with self._lock:
            return all(
                self._position.get(where, self.committed.get(where, 0)) >= len(log) for where, log in self._log.items()
            )

    def commit(self, messages: Iterable[ReceivedMessage]) -> None:
        with self._lock:
            for m in messages:
                where = (m.topic, m.partition)
                self.committed[where] = max(self.committed.get(where, 0), m.offset + 1)

    def rewind(self) -> None:
        """Read on from the committed offsets, as after a rebalance: uncommitted messages come again."""
        with self._lock:
            self._position.clear()

    def close(self) -> None:
        self.rewind()


__all__ = ["MemoryMessageSource"]
