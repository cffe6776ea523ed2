"""The transactional side of the publisher port: what an exactly-once drain needs of its broker.

A :class:`TransactionalPublisher` opens :class:`LeaseTransactions` for one lease: a publisher whose sends between
:meth:`~LeaseTransactions.begin` and :meth:`~LeaseTransactions.commit` become visible to ``read_committed`` consumers
together with one :class:`CheckpointRecord`, or not at all. Opening them for a transactional id fences any earlier
holder of that id, so a drain that took a lease over stops the one it took it from (:class:`ProducerFenced`).

Port types only: the Kafka adapter (``adapters.kafka.transactions``) and the in-memory fake
(``testing.fakes.FakeTransactionalPublisher``) implement them; the drain (``drain/exactly_once.py``) uses them.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass
from typing import Any

from airflow_chatter.ports.container import PartitionKey
from airflow_chatter.ports.messaging import Publisher, PublishError, PublishOutcome


class ProducerFenced(PublishError):
    """Another producer opened this lease's transactional id: this drain no longer owns the lease's output, so it
    publishes and stamps nothing more. Its open transaction was aborted by the broker."""


@dataclass(frozen=True)
class CheckpointStamp:
    """One document of a committed page and the status its stamp writes (delivered, or undeliverable)."""

    item_id: str
    partition_key: PartitionKey
    status: str


@dataclass(frozen=True)
class CheckpointRecord:
    """What a committed page leaves for the recovery of its lease: where the page was read from (``before``, the
    lease's continuation then), the continuation after it (``after``), and the stamps its documents are owed."""

    lease_id: str
    before: str | None
    after: str
    stamps: tuple[CheckpointStamp, ...]

    def to_bytes(self) -> bytes:
        """The record's JSON form (what goes on the checkpoint topic)."""
        stamps = [[s.item_id, s.partition_key, s.status] for s in self.stamps]
        body = {"lease": self.lease_id, "before": self.before, "after": self.after, "stamps": stamps}
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> CheckpointRecord:
        """Parse :meth:`to_bytes`; ``ValueError`` for anything else."""
        body: Any = json.loads(raw)
        try:
            stamps = tuple(CheckpointStamp(str(i), k, str(s)) for i, k, s in body["stamps"])
            return cls(str(body["lease"]), body["before"], str(body["after"]), stamps)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a checkpoint record: {exc}") from exc


class LeaseTransactions(Publisher):
    """One lease's transactional producer.

    ``send_batch`` outside a transaction commits each batch on its own (a plain publisher: confirmed means
    committed). Between :meth:`begin` and :meth:`commit` it only hands the messages to the open transaction and does
    not wait for the broker: a confirmed outcome says the message is held in the transaction (its partition and
    offset are not known yet, ``-1``), an error that it was refused at once. :meth:`commit` then sends the checkpoint
    record with them, waits for all of them together and returns their final outcomes. Any method raises
    :class:`ProducerFenced` once another producer took the transactional id.
    """

    transactional_id: str

    @abc.abstractmethod
    def begin(self) -> None:
        """Open a transaction."""

    @abc.abstractmethod
    def commit(self, record: CheckpointRecord) -> list[PublishOutcome]:
        """Add ``record`` to the open transaction and commit it; return the final outcome of each message sent in the
        transaction, in send order (refused ones keep their error).

        Raises, committing nothing, when the record or a message that was not refused at once is not acknowledged:
        the first such message's error, or ``PublishError`` for the record. The caller then aborts.
        """

    @abc.abstractmethod
    def abort(self) -> None:
        """Abort the open transaction, if any: none of its messages is ever visible to ``read_committed``."""

    @abc.abstractmethod
    def last_checkpoint(self, transactional_id: str | None = None) -> CheckpointRecord | None:
        """The last committed checkpoint record of ``transactional_id`` (default: this producer's); ``None``: none."""


class TransactionalPublisher(Publisher):
    """A publisher that can open one lease's transactions (exactly-once drains)."""

    @abc.abstractmethod
    def lease_transactions(self, transactional_id: str, checkpoint_topic: str) -> LeaseTransactions:
        """Open the transactions of ``transactional_id``, fencing any earlier producer of that id, after checking
        that the broker can run transactions and ``checkpoint_topic`` exists compacted.

        Raises ``ConfigurationError`` naming ``guarantee`` or ``checkpoint_topic`` when either cannot be kept, within a
        bounded wait, before anything is published.
        """


__all__ = [
    "CheckpointRecord",
    "CheckpointStamp",
    "LeaseTransactions",
    "ProducerFenced",
    "TransactionalPublisher",
]
