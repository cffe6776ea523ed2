"""The pending-outbox stream of one monitored container: what ``schedule: on_pending`` stands on.

One ``PendingStream`` reads the container's change feed (every feed range, from its own stored position) once per
poll, for every source that watches the container; each poll that saw pending outbox documents becomes one
``PendingBatch``. Its position (the continuation per feed range after that poll, a ``StreamPosition``) is stored
only through ``advance``, which the caller runs once the batch has been handled (in Airflow: once every trigger
event derived from it was persisted in the metadata database). So:

* **Nothing is lost.** A batch not handled (the process died, the handling failed or timed out) is read again:
  ``advance`` of an unhandled batch rewinds the reader to the stored position, and a new reader starts there.
* **No phantom batches.** Only documents the change feed shows *pending* (``is_pending_outbox``) are announced;
  the ``delivered`` and ``undeliverable`` stamps a drain writes move the position and announce nothing.
* **At least once.** A batch handled but not yet stored when the process dies comes again; it still announces
  only the documents that are pending when read again (the feed gives each document's latest version).

Documents announced and still pending ``refire_after_seconds`` later (no stamp seen since: a drain that failed) are
announced again, so a failed drain does not leave them waiting for the next write. The stream never writes to the
monitored container; its one write is the position document in the store container (the lease container), whose
id starts with ``POSITION_ID_PREFIX`` and which no lease query matches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_chatter.outbox.document import ID_FIELD, MESSAGE_ID_FIELD, is_pending_outbox
from airflow_chatter.ports import ChangeFeedStart, Document, DocumentContainer, FeedRange, FeedRangeGone, NotFound
from airflow_chatter.ports.resolution import Resolution

#: The position document's id is this plus the monitored container's name (one per container in a lease container).
POSITION_ID_PREFIX = "chatter-pending-stream."
#: What the position document's ``kind`` says, so a reader of the lease container can tell it from a lease.
POSITION_KIND = "chatter_pending_stream_position"
#: Pending documents remembered for a re-announcement, at most (oldest forgotten first): bounds the stream's memory
#: when a backlog of millions is pending; a forgotten one is still drained by the drain its first event started.
MAX_REMEMBERED = 10_000


@dataclass(frozen=True)
class StreamPosition:
    """Where the reader stands after a batch: the continuation per feed-range token (``None``: not read yet).

    ``generation`` counts the reader's rewinds; a position from before a rewind is never stored (the batches after
    an unhandled one are read again). ``announced`` is how many pending documents the batch carried.
    """

    continuations: tuple[tuple[str, str | None], ...]
    generation: int
    announced: int


@dataclass(frozen=True)
class PendingBatch:
    """The pending outbox documents one poll of ``container`` saw (``refired``: announced before, still pending)."""

    container: str
    documents: tuple[Document, ...]
    refired: tuple[Document, ...] = ()

    @property
    def all_documents(self) -> tuple[Document, ...]:
        return self.documents + self.refired


class PositionStore:
    """The stored position of one container's pending stream: a document in the lease container."""

    def __init__(self, store: DocumentContainer, container_name: str) -> None:
        self.store = store
        self.document_id = f"{POSITION_ID_PREFIX}{container_name}"
        self.container_name = container_name

    def load(self) -> dict[str, str | None] | None:
        """The stored continuations by feed-range token; ``None`` when never stored (start at the beginning)."""
        try:
            document = self.store.read(self.document_id, self.document_id)
        except NotFound:
            return None
        return {str(entry["range"]): entry.get("continuation") for entry in document.get("positions", [])}

    def save(self, continuations: Sequence[tuple[str, str | None]]) -> None:
        self.store.upsert(
            {
                "id": self.document_id,
                "kind": POSITION_KIND,
                "monitored_container": self.container_name,
                "positions": [{"range": token, "continuation": value} for token, value in continuations],
            },
            self.document_id,
        )


class PendingStream:
    """Read one container's change feed for pending outbox documents; see the module docstring."""

    def __init__(
        self,
        monitored: DocumentContainer,
        positions: PositionStore,
        *,
        page_size: int = 100,
        max_pages: int = 5,
        refire_after_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if refire_after_seconds <= 0:
            raise ValueError("refire_after_seconds must be positive")
        self.monitored = monitored
        self.positions = positions
        self.page_size = page_size
        self.max_pages = max_pages
        self.refire_after_seconds = refire_after_seconds
        self._clock = clock
        self._generation = 0
        #: The reader's in-memory position; ``None``: load the stored one first.
        self._reading: dict[str, str | None] | None = None
        #: The last position handed out, so a poll that moved nothing hands out nothing.
        self._handed_out: dict[str, str | None] | None = None
        #: Pending documents announced, by id: when, and the document (for a re-announcement).
        self._announced: dict[str, tuple[float, Document]] = {}

    def _load(self) -> dict[str, str | None]:
        """The stored position over the container's current feed ranges: a range the store does not name (split
        since) resumes from the stored range that contains it."""
        stored = self.positions.load() or {}
        self._handed_out = dict(stored)
        reading: dict[str, str | None] = {}
        for feed_range in self.monitored.read_feed_ranges():
            parent = next(
                (
                    t
                    for t in stored
                    if t == feed_range.token or self.monitored.is_feed_range_subset(FeedRange(t), feed_range)
                ),
                None,
            )
            reading[feed_range.token] = stored[parent] if parent is not None else None
        return reading

    def _read_range(self, token: str, continuation: str | None) -> tuple[list[Document], str | None]:
        documents: list[Document] = []
        for _ in range(self.max_pages):
            page = self.monitored.read_change_feed(
                FeedRange(token), continuation=continuation, start=ChangeFeedStart.BEGINNING,
                max_item_count=self.page_size,
            )  # fmt: skip
            continuation = page.continuation
            if not page.documents:
                break
            documents.extend(page.documents)
        return documents, continuation

    def _read_all(self, reading: dict[str, str | None]) -> list[Document]:
        documents: list[Document] = []
        for token in list(reading):
            try:
                found, reading[token] = self._read_range(token, reading[token])
            except FeedRangeGone:
                # A split: each child resumes from its parent's continuation (the port carries it over, F-04).
                parent = reading.pop(token)
                for child in self.monitored.read_feed_ranges(force_refresh=True):
                    if child.token not in reading and self.monitored.is_feed_range_subset(FeedRange(token), child):
                        found, reading[child.token] = self._read_range(child.token, parent)
                        documents.extend(found)
                continue
            documents.extend(found)
        return documents

    def poll(self) -> tuple[PendingBatch, StreamPosition] | None:
        """Read every feed range once (at most ``max_pages`` pages each) from the reader's position; the batch and
        the position after it, or ``None`` when the position did not move and nothing is due again."""
        if self._reading is None:
            self._reading = self._load()
        # Read on a copy: a read that fails half way leaves the position where it was (nothing read is dropped).
        reading = dict(self._reading)
        documents = self._read_all(reading)
        self._reading = reading
        now = self._clock()
        pending: dict[str, Document] = {}
        for document in documents:
            item_id = str(document.get(ID_FIELD))
            if is_pending_outbox(document):
                pending[item_id] = document
                self._announced.pop(item_id, None)
                self._announced[item_id] = (now, document)
            else:  # stamped (or no longer an outbox document): nothing to announce again
                pending.pop(item_id, None)
                self._announced.pop(item_id, None)
        while len(self._announced) > MAX_REMEMBERED:
            self._announced.pop(next(iter(self._announced)))
        refired = []
        for item_id, (at, document) in list(self._announced.items()):
            if item_id not in pending and now - at >= self.refire_after_seconds:
                refired.append(document)
                self._announced[item_id] = (now, document)
        position = StreamPosition(tuple(self._reading.items()), self._generation, len(pending) + len(refired))
        if not pending and not refired and dict(self._reading) == self._handed_out:
            return None
        self._handed_out = dict(self._reading)
        return PendingBatch(self.positions.container_name, tuple(pending.values()), tuple(refired)), position

    def rewind(self) -> None:
        """Read again from the stored position (after an unhandled batch, or a failed read)."""
        self._generation += 1
        self._reading = None
        self._announced.clear()

    def close(self) -> None:
        """Nothing to release: the containers belong to the caller."""

    def advance(self, resolved: Sequence[tuple[StreamPosition, Resolution]]) -> bool:
        """Store the position after the last handled batch of ``resolved`` (in poll order).

        The first unhandled batch stops it: nothing from there on is stored, and the reader rewinds to the stored
        position so that batch, and every one after it, is read again. A position from before a rewind is ignored.
        Returns whether a position was stored.
        """
        last: StreamPosition | None = None
        for position, resolution in resolved:
            if position.generation != self._generation:
                continue
            if not resolution.handled(announced=position.announced):
                self.rewind()
                break
            last = position
        if last is None:
            return False
        self.positions.save(last.continuations)
        return True


def describe(batch: PendingBatch) -> dict[str, Any]:
    """A batch's documents as an event payload names them: their message ids (first 100) and count."""
    ids = [str(d.get(MESSAGE_ID_FIELD)) for d in batch.all_documents]
    return {"pending": len(ids), "message_ids": ids[:100]}


__all__ = [
    "MAX_REMEMBERED",
    "POSITION_ID_PREFIX",
    "PendingBatch",
    "PendingStream",
    "PositionStore",
    "Resolution",
    "StreamPosition",
    "describe",
]
