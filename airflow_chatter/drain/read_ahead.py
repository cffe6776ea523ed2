"""Reading a lease's change feed one page ahead (F-10, batched mode): page k+1 is read while page k is published.

WHY: against a real store a drain's page is three round trips one after another: the feed read, the page's Kafka
publish and its stamps. Reading changes nothing, so the next page's read can overlap this page's publish and stamps;
everything that *does* change something (the gate, publishes, stamps, the checkpoint) stays strictly per page, in
the order the engine has always used. Nothing of page k+1 is published before page k's stamps finished (F-10's
per-key order when a stamp fails).

The rules that keep it invisible (each pinned by a test in ``tests/unit/drain/test_drain_read_ahead.py``):

* **Bounded**: at most one page ahead, on one background thread.
* **Exact arguments**: a prefetched page is handed out only to a read asking for exactly the request it was read
  with (feed range, continuation, start, page size). Anything else (the lease's continuation moved differently,
  the budget asks for a smaller page) discards it and reads afresh, so what the engine consumes is always what a
  direct read would have returned for that request.
* **Errors surface where the page is consumed**: a read-ahead that failed (``FeedRangeGone`` of a split, a 429
  past the limits, any error) raises only from the :meth:`FeedReader.read` that would have consumed that page,
  never earlier, and not at all when the drain stops first.
* **Discarded, never looked at**: when the drain stops (budget, lease, an error of page k) :meth:`FeedReader.discard`
  waits for the read in flight and drops it: it is never counted, gated or seen by the engine. Waiting means no
  request of a drain outlives it, so the drain's request units (charged per request, on the thread that made it)
  are complete when its summary is built, and the next drain's reset cannot be charged by this one.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from airflow_chatter.ports import ChangeFeedPage, ChangeFeedStart, DocumentContainer, FeedRange


@dataclass(frozen=True, slots=True)
class FeedRequest:
    """One change-feed read, as the engine asks for it."""

    feed_range: FeedRange
    continuation: str | None
    start: ChangeFeedStart | datetime
    max_item_count: int


class FeedReader:
    """Reads pages of ``container``'s change feed; with ``read_ahead`` it can read the next page in the background."""

    def __init__(self, container: DocumentContainer, *, read_ahead: bool) -> None:
        self.container = container
        self.read_ahead = read_ahead
        self._pending: tuple[FeedRequest, Future[ChangeFeedPage]] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def read(self, request: FeedRequest) -> ChangeFeedPage:
        """The page for ``request``: the one read ahead for exactly this request (its error, if it failed), or a
        fresh read on the calling thread."""
        pending, self._pending = self._pending, None
        if pending is not None:
            ahead, future = pending
            if ahead == request:
                return future.result()  # raises the read-ahead's own error, here, at the page it belongs to
            _settle(future)
        return self._read(request)

    def prefetch(self, request: FeedRequest) -> None:
        """Start reading ``request`` in the background (one page ahead at most; a no-op without ``read_ahead``)."""
        if not self.read_ahead:
            return
        self.discard()
        self._pending = (request, self._pool().submit(self._read, request))

    def discard(self) -> None:
        """Drop the page read ahead, if any, after its request finished; it is never handed out."""
        pending, self._pending = self._pending, None
        if pending is not None:
            _settle(pending[1])

    def close(self) -> None:
        """Discard what is read ahead and stop the background thread."""
        self.discard()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _read(self, request: FeedRequest) -> ChangeFeedPage:
        return self.container.read_change_feed(
            request.feed_range,
            continuation=request.continuation,
            start=request.start,
            max_item_count=request.max_item_count,
        )

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatter-read-ahead")
            return self._executor


def _settle(future: Future[ChangeFeedPage]) -> None:
    """Wait for a discarded read to finish; its page and its error are dropped (nothing was consumed)."""
    try:
        future.result()
    except Exception:  # noqa: BLE001, S110 - a discarded read's error belongs to no page
        pass


__all__ = ["FeedReader", "FeedRequest"]
