"""How a page reaches Kafka and its stamps: at least once (stamped run by run) or exactly once (one transaction).

The engine hands every page to its source's :class:`PageDelivery`. ``at_least_once`` is what the drain always did:
each publish run is stamped as soon as its publish is confirmed (run_stamps.py), and a crash or a stamp failure
between the two republishes up to a page.

``exactly_once`` (:class:`ExactlyOnce`):

* **One transactional producer per lease.** When a drain has taken a lease it opens the lease's transactions under
  :func:`transactional_id` (the Source Identity and the lease id): that fences any earlier owner still alive, whose
  next send or commit raises ``ProducerFenced``; the fenced drain stops at once and stamps nothing more.
* **One transaction per page.** The page's messages go into one transaction; nothing is stamped while it is open.
  They are handed to the producer without waiting; the page's :class:`CheckpointRecord` (the continuation before
  and after the page, and each document's id, partition key and stamp) follows them, and the commit waits for all
  of them in one flush, so a page costs one produce round trip as at least once does, plus the transaction's own
  requests. A message refused or not acknowledged aborts it (nothing of the page is visible to ``read_committed``
  consumers, nothing is stamped, the page is offered again). Once committed, the page's stamps are written as
  run_stamps.py writes them, from the commit's final outcomes, then the engine checkpoints the lease (F-04).
  Documents that are only stamped (undeliverable, resolver drops) never enter the transaction; a page with nothing
  to send commits none.
* **Recovery when the lease is taken.** The lease's last committed record is read ``read_committed``. When it was
  read from the lease's current continuation, its page reached Kafka and was not stamped or checkpointed (a crash, a
  stamp that failed after the commit): its stamps are written and the lease moved past it, and the page is never
  published again. A child lease of a split with no record of its own first finishes its parent's last committed
  page the same way, before it publishes anything (the child reads from the parent's position).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.drain.leases import SPLIT, Lease, LeaseStore
from airflow_chatter.drain.options import STATUS_PATCH_PATH, TTL_PATCH_PATH, SourceOptions
from airflow_chatter.drain.page_run import Run, Subject
from airflow_chatter.drain.publishers import PublisherTable
from airflow_chatter.drain.run_stamps import UNDELIVERABLE_OPERATIONS, RunStamps
from airflow_chatter.drain.stamps import StampRequest
from airflow_chatter.drain.summary import DrainCounts
from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.drain.telemetry import TRANSACTION_ABORTED, TRANSACTION_COMMITTED, DrainTelemetry, SendSpan
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.contract import Undeliverable
from airflow_chatter.outbox.document import UNDELIVERABLE
from airflow_chatter.ports import (
    CheckpointRecord,
    CheckpointStamp,
    LeaseTransactions,
    MessageRejected,
    NotFound,
    OutgoingMessage,
    PatchOperation,
    ProducerFenced,
    Publisher,
    PublishError,
    PublishOutcome,
    TransactionalPublisher,
)

#: Kafka takes any string as a transactional id; ours stays short and readable, unique per Source Identity and lease.
_LEASE_ID_CHARS = 100

Sent = Sequence[tuple[Subject, Any, SendSpan]]


def transactional_id(source_identity: str, lease_id: str) -> str:
    """The lease's transactional id: stable across drains (so a takeover fences), distinct per source and lease."""
    digest = hashlib.sha256(f"{source_identity}\0{lease_id}".encode()).hexdigest()[:20]
    return f"chatter.{lease_id[:_LEASE_ID_CHARS]}.{digest}"


class PageDelivery:
    """At least once: each publish run is stamped when its publish returns; no transactions, nothing to recover."""

    guarantee = "at_least_once"

    def __init__(self, publishers: PublisherTable, run_stamps: RunStamps) -> None:
        self.publishers = publishers
        self._run_stamps = run_stamps

    def open(self, lease: Lease, tally: DrainCounts) -> Lease:
        """The lease as the drain starts on it (after any recovery)."""
        tally.guarantee = self.guarantee
        return lease

    @contextmanager
    def page(self, lease: Lease, after: str, tally: DrainCounts) -> Iterator[None]:
        """Around one page's publish runs; ``finish`` is called inside it."""
        yield

    def stamps(self, run: Run, sent: Sent, tally: DrainCounts) -> ConfirmationReceipt | None:
        """A publish run's outcomes: stamped at once (run_stamps.py)."""
        return self._run_stamps.write(run, sent, tally)

    def finish(self, receipt: ConfirmationReceipt | None, tally: DrainCounts) -> ConfirmationReceipt | None:
        """The page's receipt once every run of it is done."""
        return receipt

    def close(self) -> None:
        """Release what the lease's drain opened."""


@dataclass
class _Page:
    lease: Lease
    after: str
    held: list[tuple[Run, Sent]] = field(default_factory=list)
    begun: bool = False
    committed: bool = False


class ExactlyOnce(PageDelivery):
    """Exactly once into Kafka for ``read_committed`` consumers, as the module says."""

    guarantee = "exactly_once"

    def __init__(
        self,
        source: SourceOptions,
        source_identity: str,
        publishers: PublisherTable,
        run_stamps: RunStamps,
        store: LeaseStore,
        telemetry: DrainTelemetry,
    ) -> None:
        factory = publishers.default
        if not isinstance(factory, TransactionalPublisher) or publishers.names() != [publishers.default_name]:
            raise ConfigurationError(
                "guarantee", "exactly_once", "needs exactly one publisher, and one that can run Kafka transactions"
            )
        super().__init__(PublisherTable(_LeasePublisher(self), publishers.default_name), run_stamps)
        self._factory = factory
        self._source = source
        self._identity = source_identity
        self._writer = run_stamps.writer
        self._store = store
        self._telemetry = telemetry
        self._transactions: LeaseTransactions | None = None
        self._page: _Page | None = None
        self._operations = {
            source.delivery.delivered_status_value: (
                PatchOperation("set", STATUS_PATCH_PATH, source.delivery.delivered_status_value),
                PatchOperation("set", TTL_PATCH_PATH, source.delivery.delivered_ttl_seconds),
            ),
            UNDELIVERABLE: UNDELIVERABLE_OPERATIONS,
        }

    # -- taking the lease -----------------------------------------------------------------------

    def open(self, lease: Lease, tally: DrainCounts) -> Lease:
        """Open the lease's transactions (fencing earlier owners), then finish a committed page left unstamped."""
        tally.guarantee = self.guarantee
        self.close()
        tid = transactional_id(self._identity, lease.id)
        self._transactions = transactions = self._factory.lease_transactions(tid, self._source.checkpoint_topic)
        record = transactions.last_checkpoint()
        if record is not None:
            if record.lease_id == lease.id and _ahead_of(record, lease):
                self._recover(record, lease, tally)
                return self._store.checkpoint(lease, record.after, lease.suspension)
            return lease
        for parent in self._store.list_leases():  # a split child's first drain: its parent's last page first
            if parent.state == SPLIT and lease.token in parent.children:
                found = transactions.last_checkpoint(transactional_id(self._identity, parent.id))
                if found is not None and _ahead_of(found, parent):
                    self._recover(found, lease, tally)
        if lease.continuation is not None:
            # A record of where the lease stands (no page, nothing owed), so the next drain reads its own record and
            # does not look for a parent again. With no continuation yet, the lease's first page writes the first.
            transactions.begin()
            transactions.commit(CheckpointRecord(lease.id, lease.continuation, lease.continuation, ()))
        return lease

    def _recover(self, record: CheckpointRecord, lease: Lease, tally: DrainCounts) -> None:
        """Write the stamps a committed page is owed; a document deleted meanwhile needs none. Publishes nothing, so
        a failure here is no Confirmation Failure: the drain stops before its first page (contract F-16)."""
        requests = [
            StampRequest(s.item_id, s.partition_key, self._operations[s.status], s.status) for s in record.stamps
        ]
        for outcome in self._writer.write(requests):
            if outcome.error is not None and not isinstance(outcome.error, NotFound):
                raise outcome.error
            if outcome.error is None and outcome.request.status != UNDELIVERABLE:
                tally.delivered += 1
            elif outcome.error is None:
                tally.undeliverable += 1
        tally.recovered_pages += 1
        self._telemetry.record_recovered_page(self._identity, lease.token)
        self._telemetry.log_info(
            "Lease %s: committed page (%d stamps) found unstamped; stamped, not republished", lease.id, len(requests)
        )

    # -- one page -------------------------------------------------------------------------------

    @contextmanager
    def page(self, lease: Lease, after: str, tally: DrainCounts) -> Iterator[None]:
        self._page = page = _Page(lease, after)
        try:
            yield
        except ProducerFenced:
            tally.fenced = True
            self._telemetry.record_fenced(self._identity, lease.token)
            raise
        except BaseException:
            if page.begun and not page.committed:
                tally.transactions_aborted += 1
                self._telemetry.record_transaction(TRANSACTION_ABORTED, self._identity, lease.token)
                self._lease_transactions().abort()
            raise
        finally:
            self._page = None

    def send(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """A publish run's messages, into the page's transaction (begun by its first send)."""
        page = self._page
        if page is None:
            raise RuntimeError("an exactly-once publish outside a page")
        transactions = self._lease_transactions()
        if not page.begun:
            transactions.begin()
            page.begun = True
        return transactions.send_batch(messages)

    def stamps(self, run: Run, sent: Sent, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Hold a run's stamps until the page commits; an unconfirmed message fails (and aborts) the page."""
        unconfirmed = (
            o.error or PublishError("not confirmed")
            for _, o, _ in sent
            if not o.confirmed and not isinstance(o.error, MessageRejected)
        )
        failure = next(unconfirmed, None)
        if failure is not None:
            for _, outcome, span in sent:
                span.end(outcome.error)
            raise failure  # RLY-05: the page fails; its transaction is aborted, so nothing of it is stamped
        assert self._page is not None
        self._page.held.append((run, sent))
        return None

    def finish(self, receipt: ConfirmationReceipt | None, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Commit the page with its checkpoint record, then write its stamps (run_stamps.py) in feed order."""
        page = self._page
        assert page is not None
        held = page.held
        if page.begun:
            # The record rides the page's own flush: one produce round trip per page, then the commit (a message
            # the broker does not acknowledge raises here, and the page's transaction is aborted).
            record = CheckpointRecord(page.lease.id, page.lease.continuation, page.after, self._stamps_of(page))
            final = iter(self._lease_transactions().commit(record))
            page.committed = True
            tally.transactions_committed += 1
            self._telemetry.record_transaction(TRANSACTION_COMMITTED, self._identity, page.lease.token)
            held = [(run, [(subject, next(final), span) for subject, _, span in sent]) for run, sent in held]
        # A stamp failing from here on is a Confirmation Failure as before, but the page is not republished: the
        # next drain of the lease finds it committed and finishes its stamps (``open``).
        for run, sent in held:
            receipt = self._run_stamps.write(run, sent, tally) or receipt
        return receipt

    def _stamps_of(self, page: _Page) -> tuple[CheckpointStamp, ...]:
        delivered = self._source.delivery.delivered_status_value
        stamps: list[CheckpointStamp] = []
        for run, sent in page.held:
            outcomes = iter(sent)
            for document, key, disposition in zip(run.documents, run.keys, run.dispositions, strict=True):
                refused = isinstance(disposition, Undeliverable)
                if disposition is not None and not refused:
                    refused = isinstance(next(outcomes)[1].error, MessageRejected)
                stamps.append(CheckpointStamp(document["id"], key, UNDELIVERABLE if refused else delivered))
        return tuple(stamps)

    def _lease_transactions(self) -> LeaseTransactions:
        if self._transactions is None:
            raise RuntimeError("the lease's transactions are not open")
        return self._transactions

    def close(self) -> None:
        transactions, self._transactions = self._transactions, None
        if transactions is not None:
            transactions.close()


def _ahead_of(record: CheckpointRecord, lease: Lease) -> bool:
    """Whether ``record``'s page was read from where ``lease`` still stands: committed, never checkpointed."""
    return record.before == lease.continuation and record.after != lease.continuation


class _LeasePublisher(Publisher):
    """The default publisher of an exactly-once engine: sends into the current page's transaction."""

    def __init__(self, delivery: ExactlyOnce) -> None:
        self._delivery = delivery

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        return self._delivery.send(messages)


def page_delivery(
    source: SourceOptions,
    publishers: PublisherTable,
    run_stamps: RunStamps,
    store: LeaseStore,
    telemetry: DrainTelemetry,
) -> PageDelivery:
    """The delivery of the source's guarantee."""
    if source.guarantee == "exactly_once":
        return ExactlyOnce(source, store.processor_name, publishers, run_stamps, store, telemetry)
    return PageDelivery(publishers, run_stamps)


__all__ = ["ExactlyOnce", "PageDelivery", "page_delivery", "transactional_id"]
