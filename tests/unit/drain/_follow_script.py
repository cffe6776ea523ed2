"""A scripted wait for ``Follow``, shared by the memory tests and the emulator + Kafka tests of follow mode.

Each sleep advances a fake monotonic time (and the engine's manual clock); the n-th wait after a change-feed read runs
``at_poll[n]``, so what happens while a following drain waits (writes, a stolen lease, a split, a stop) is scripted
and nothing depends on wall-clock timing, whichever backend the drain reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_chatter.drain.follow import Follow
from airflow_chatter.ports import DocumentContainer

#: Fields the store writes itself: a replace sends the document without them.
_SYSTEM = {"_etag", "_ts", "_rid", "_self", "_attachments", "_lsn"}


@dataclass
class Script:
    """``reads()`` counts the drain's change-feed reads; ``advance(seconds)`` moves the engine's clock.

    A wait is what follows a change-feed read; its first slice runs the step, so the next read sees what it wrote.
    """

    reads: Callable[[], int]
    advance: Callable[[float], None]
    at_poll: dict[int, Callable[[], None]] = field(default_factory=dict)
    now: float = 0.0
    waits: int = 0
    _reads: int = 0

    def sleep(self, seconds: float) -> None:
        reads = self.reads()
        if reads != self._reads:  # a new wait, after a read
            self._reads = reads
            self.waits += 1
            step = self.at_poll.get(self.waits)
            if step is not None:
                step()
        self.now += seconds
        self.advance(seconds)

    def monotonic(self) -> float:
        return self.now

    def follow(self, stop: Callable[[], bool] = lambda: False) -> Follow:
        return Follow(0.25, should_stop=stop, sleep=self.sleep, monotonic=self.monotonic)


def steal(leases: DocumentContainer, lease_id: str, owner: str | None) -> None:
    """Another drain takes ``lease_id`` (``owner``; ``None``: lets it go), writing the lease document behind the
    following drain's back, as a drain on another worker would."""
    stolen = {k: v for k, v in dict(leases.read(lease_id, lease_id)).items() if k not in _SYSTEM}
    stolen["owner"] = owner
    leases.replace(lease_id, lease_id, stolen)


__all__ = ["Script", "steal"]
