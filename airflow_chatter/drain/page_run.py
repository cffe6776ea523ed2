"""A page's documents on their way out, in feed order: what is published together, and when stamps are written.

The drain engine admits a page's documents one by one and hands each to a :class:`PublishRun` with its verdict: a
document to publish (what it is sent as, its :data:`Subject`, and its publisher), or a document to stamp without
publishing (an :class:`~airflow_chatter.outbox.contract.Undeliverable` verdict of the Outbox Document Contract,
CTR-04, or ``None`` for a resolver's drop, RSV-02).

The run keeps feed order. Its pending documents are handed to the engine in one call (one ``send_batch`` and then
the run's stamps) when the publisher changes, when the page ends and when an error leaves the page, so an earlier
document is always finished before a later one fails. A document stamped without a publish joins the pending run
at its place in feed order and is stamped with the run's delivered stamps (F-10). It is never published, so holding
it back changes no publish order. The engine stamps it only when every publish before it in the run is confirmed
(the confirmed prefix), so nothing after the first unconfirmed document is stamped.

With ``ends_at_unsent`` (``stamp_mode: sequential``) such a document is a run of its own instead: the run before it
is flushed first, so it is stamped after everything admitted before it and before anything admitted after it is
published (RLY-07's one-by-one order).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.outbox.contract import Deliverable, Undeliverable
from airflow_chatter.outbox.document import MESSAGE_CONTEXT_FIELD
from airflow_chatter.ports import Document, OutgoingMessage, PartitionKey, Publisher


@dataclass(frozen=True)
class ResolveContext:
    """What a body resolver is given for one pending document (RSV-04).

    A fresh context is built per admitted document, so a resolver never sees another's state.
    """

    message_id: str
    partition_key: PartitionKey
    partition_key_paths: tuple[str, ...]
    document: Document


#: ``body_resolver(context) -> OutgoingMessage | None``; ``None`` drops and acknowledges (RSV-02).
BodyResolver = Callable[[ResolveContext], "OutgoingMessage | None"]


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a body resolver made of a document (RSV-01): the message to send, and its send span's subject."""

    message_id: str
    destination: str
    context: Mapping[str, Any]
    message: OutgoingMessage

    @classmethod
    def of(cls, message_id: str, message: OutgoingMessage, document: Document) -> Resolved:
        """The resolver's ``message`` for ``document``, under the document's persisted trace context."""
        return cls(message_id, message.topic, _persisted_context(document), message)


#: What a published document is sent as: its verified contract fields, or its resolver's message. Both carry the send
#: span's subject (``message_id``, ``destination``, ``context``).
Subject = Deliverable | Resolved

#: What the drain does with a document: publish it as a :data:`Subject`, stamp it undeliverable (the contract's
#: verdict), or (``None``) drop it and stamp it delivered.
Disposition = Subject | Undeliverable | None


@dataclass(slots=True)
class Run:
    """One run's documents in feed order, as columns: position ``i`` is ``documents[i]`` in ``keys[i]`` with its
    ``dispositions[i]``; ``publisher`` sends the run's subjects (``None`` when it has none)."""

    publisher: Publisher | None = None
    documents: list[Document] = field(default_factory=list)
    keys: list[PartitionKey] = field(default_factory=list)
    dispositions: list[Disposition] = field(default_factory=list)

    def sends(self) -> tuple[list[Subject], list[PartitionKey]]:
        """The published positions' subjects and partition keys, in feed order."""
        sends = [
            (v, k) for v, k in zip(self.dispositions, self.keys, strict=True) if isinstance(v, Deliverable | Resolved)
        ]
        return [v for v, _ in sends], [k for _, k in sends]


#: ``publish(run)``: publish the run's subjects with ``run.publisher`` and write the run's stamps; returns the run's
#: Confirmation Receipt, or raises at its first failure.
PublishCall = Callable[[Run], "ConfirmationReceipt | None"]


class PublishRun:
    """The documents of a page admitted since the last flush, waiting for one ``send_batch`` to their publisher.

    Used as a context manager by the page, so no path through the page can skip a flush. ``receipt`` is the page's
    last Confirmation Receipt.
    """

    __slots__ = ("_ends_at_unsent", "_publish", "_run", "receipt")

    def __init__(self, publish: PublishCall, *, ends_at_unsent: bool = False) -> None:
        self._publish = publish
        self._ends_at_unsent = ends_at_unsent
        self._run = Run()
        self.receipt: ConfirmationReceipt | None = None

    def add(self, document: Document, partition_key: PartitionKey, subject: Subject, publisher: Publisher) -> None:
        """Publish ``document`` as ``subject`` with ``publisher`` (a change of publisher flushes the run first)."""
        if publisher is not self._run.publisher:
            if self._run.publisher is not None:
                self.flush()
            self._run.publisher = publisher
        self._append(document, partition_key, subject)

    def stamp(self, document: Document, partition_key: PartitionKey, verdict: Undeliverable | None) -> None:
        """Stamp ``document`` without publishing it: undeliverable (its verdict), or delivered (``None``: a drop)."""
        if self._ends_at_unsent:
            self.flush()
        self._append(document, partition_key, verdict)
        if self._ends_at_unsent:
            self.flush()

    def flush(self) -> None:
        run, self._run = self._run, Run()
        if run.documents:
            self.receipt = self._publish(run) or self.receipt

    def _append(self, document: Document, partition_key: PartitionKey, disposition: Disposition) -> None:
        self._run.documents.append(document)
        self._run.keys.append(partition_key)
        self._run.dispositions.append(disposition)

    def __enter__(self) -> PublishRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, Exception):
            self.flush()  # a flush that fails while an error leaves the page reports the earlier document's error


def _persisted_context(document: Document) -> Mapping[str, Any]:
    """The persisted trace context of a document, for the resolver path's send span."""
    raw = document.get(MESSAGE_CONTEXT_FIELD)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


__all__ = ["Disposition", "PublishCall", "PublishRun", "Resolved", "Run", "Subject"]
