"""A page's documents on their way out, in feed order: what is published together, and when stamps are written.

The drain engine admits a page's documents one by one and hands each to a :class:`PublishRun`: a document to
publish (:class:`Planned`, with its publisher), or a document to stamp without publishing (:class:`Unsent`: an
Undeliverable verdict of the Outbox Document Contract, CTR-04, or a resolver's drop, RSV-02).

The run keeps feed order. Its pending documents are handed to the engine in one call (one ``send_batch`` and then
the run's stamps) when the publisher changes, when the page ends and when an error leaves the page, so an earlier
document is always finished before a later one fails. What differs by ``stamp_mode`` is the :class:`Unsent`:

* ``sequential``: its stamp is written in place, after everything admitted before it is published and stamped
  (the pending run is flushed first), exactly the one-by-one order of RLY-07;
* ``batched`` (F-10): it joins the pending run instead, at its place in feed order, and is stamped with the run's
  delivered stamps, in the same per-partition-key batches. It is never published, so holding it back changes no
  publish order; an undeliverable document between publishable ones costs no extra ``send_batch`` and no extra
  round trip of its own. The engine stamps it only when every publish before it in the run is confirmed (the
  confirmed prefix), so nothing after the first unconfirmed document is stamped, as RLY-07 had it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.outbox.contract import Deliverable, Undeliverable
from airflow_chatter.ports import Document, OutgoingMessage, PartitionKey, Publisher


@dataclass(slots=True)
class Planned:
    """A document admitted for publishing, waiting for its publish batch."""

    document: Document
    partition_key: PartitionKey
    message_id: str
    destination: str
    context: Mapping[str, Any]
    deliverable: Deliverable | None = None
    resolved: OutgoingMessage | None = None


@dataclass(frozen=True, slots=True)
class Unsent:
    """A document that is stamped, not published: ``verdict`` is its Undeliverable verdict, or ``None`` for a drop
    (the resolver returned nothing: stamped delivered, RSV-02)."""

    document: Document
    partition_key: PartitionKey
    verdict: Undeliverable | None = None


#: One entry of a run, in feed order.
RunEntry = Planned | Unsent

#: ``publish(entries, publisher)``: publish the run's ``Planned`` entries with ``publisher`` (``None`` when there are
#: none) and write the run's stamps; returns the run's Confirmation Receipt, or raises at its first failure.
PublishCall = Callable[[list[RunEntry], "Publisher | None"], "ConfirmationReceipt | None"]


class PublishRun:
    """The documents of a page admitted since the last flush, waiting for one ``send_batch`` to their publisher.

    ``stamp_in_place`` writes an :class:`Unsent` document's stamp at once (``sequential``); ``None`` lets it ride
    the run (``batched``). Used as a context manager by the page, so no path through the page can skip a flush.
    ``receipt`` is the page's last Confirmation Receipt.
    """

    def __init__(
        self, publish: PublishCall, stamp_in_place: Callable[[Unsent], ConfirmationReceipt] | None = None
    ) -> None:
        self._publish = publish
        self._stamp_in_place = stamp_in_place
        self._run: list[RunEntry] = []
        self._publisher: Publisher | None = None
        self.receipt: ConfirmationReceipt | None = None

    def add(self, planned: Planned, publisher: Publisher) -> None:
        if self._publisher is not None and publisher is not self._publisher:
            self.flush()
        self._run.append(planned)
        self._publisher = publisher

    def stamp(self, unsent: Unsent) -> None:
        """Stamp a document that is not published: in place after the pending run (sequential), or with it."""
        if self._stamp_in_place is None:
            self._run.append(unsent)
            return
        self.flush()
        self.receipt = self._stamp_in_place(unsent)

    def flush(self) -> None:
        run, publisher = self._run, self._publisher
        self._run, self._publisher = [], None
        if run:
            self.receipt = self._publish(run, publisher) or self.receipt

    def __enter__(self) -> PublishRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, Exception):
            self.flush()  # a flush that fails while an error leaves the page reports the earlier document's error


__all__ = ["Planned", "PublishCall", "PublishRun", "RunEntry", "Unsent"]
