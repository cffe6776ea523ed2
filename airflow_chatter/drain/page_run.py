"""A page's documents on their way out, in feed order: what is published together, and when stamps are written.

The drain engine admits a page's documents one by one and hands each to a :class:`PublishRun`: a document to
publish (with what it is sent as, its :data:`Subject`, and its publisher), or a document to stamp without publishing
(:class:`Unsent`: an Undeliverable verdict of the Outbox Document Contract, CTR-04, or a resolver's drop, RSV-02).

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

A :class:`Run` holds its documents as columns (documents, partition keys, subjects) with the few :class:`Unsent`
ones by position: a run is usually a whole page of documents published to one publisher, and nothing is built per
document but what it is sent as.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.outbox.contract import Deliverable, Undeliverable
from airflow_chatter.ports import Document, OutgoingMessage, PartitionKey, Publisher


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a body resolver made of a document (RSV-01): the message to send, and its send span's subject."""

    message_id: str
    destination: str
    context: Mapping[str, Any]
    message: OutgoingMessage


#: What a published document is sent as: its verified contract fields, or its resolver's message. Both carry the send
#: span's subject (``message_id``, ``destination``, ``context``).
Subject = Deliverable | Resolved


@dataclass(frozen=True, slots=True)
class Unsent:
    """A document that is stamped, not published: ``verdict`` is its Undeliverable verdict, or ``None`` for a drop
    (the resolver returned nothing: stamped delivered, RSV-02)."""

    document: Document
    partition_key: PartitionKey
    verdict: Undeliverable | None = None


@dataclass(slots=True)
class Run:
    """One run's documents in feed order, as columns: position ``i`` is ``documents[i]`` in ``keys[i]``, published
    as ``subjects[i]``, or, where ``subjects[i]`` is ``None``, stamped without a publish as ``unsent[i]``."""

    publisher: Publisher | None = None
    documents: list[Document] = field(default_factory=list)
    keys: list[PartitionKey] = field(default_factory=list)
    subjects: list[Subject | None] = field(default_factory=list)
    unsent: dict[int, Unsent] = field(default_factory=dict)

    def sends(self) -> tuple[list[Subject], list[PartitionKey]]:
        """The published positions' subjects and partition keys, in feed order."""
        if not self.unsent:
            return self.subjects, self.keys  # type: ignore[return-value]  # no None without an unsent position
        published = [i for i, subject in enumerate(self.subjects) if subject is not None]
        return [self.subjects[i] for i in published], [self.keys[i] for i in published]  # type: ignore[misc]


#: ``publish(run)``: publish the run's subjects with ``run.publisher`` (``None`` when there are none) and write the
#: run's stamps; returns the run's Confirmation Receipt, or raises at its first failure.
PublishCall = Callable[[Run], "ConfirmationReceipt | None"]


class PublishRun:
    """The documents of a page admitted since the last flush, waiting for one ``send_batch`` to their publisher.

    ``stamp_in_place`` writes an :class:`Unsent` document's stamp at once (``sequential``); ``None`` lets it ride
    the run (``batched``). Used as a context manager by the page, so no path through the page can skip a flush.
    ``receipt`` is the page's last Confirmation Receipt.
    """

    __slots__ = ("_publish", "_run", "_stamp_in_place", "receipt")

    def __init__(self, publish: PublishCall, stamp_in_place: Callable[[Unsent], ConfirmationReceipt] | None = None):
        self._publish = publish
        self._stamp_in_place = stamp_in_place
        self._run = Run()
        self.receipt: ConfirmationReceipt | None = None

    def add(self, document: Document, partition_key: PartitionKey, subject: Subject, publisher: Publisher) -> None:
        run = self._run
        if publisher is not run.publisher:
            if run.publisher is not None:
                self.flush()
                run = self._run
            run.publisher = publisher
        run.documents.append(document)
        run.keys.append(partition_key)
        run.subjects.append(subject)

    def stamp(self, unsent: Unsent) -> None:
        """Stamp a document that is not published: in place after the pending run (sequential), or with it."""
        if self._stamp_in_place is None:
            run = self._run
            run.unsent[len(run.documents)] = unsent
            run.documents.append(unsent.document)
            run.keys.append(unsent.partition_key)
            run.subjects.append(None)
            return
        self.flush()
        self.receipt = self._stamp_in_place(unsent)

    def flush(self) -> None:
        run, self._run = self._run, Run()
        if run.documents:
            self.receipt = self._publish(run) or self.receipt

    def __enter__(self) -> PublishRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, Exception):
            self.flush()  # a flush that fails while an error leaves the page reports the earlier document's error


__all__ = ["PublishCall", "PublishRun", "Resolved", "Run", "Subject", "Unsent"]
