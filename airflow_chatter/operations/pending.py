"""Pending Outbox Documents after a lease's checkpoint, read from its change feed without taking the lease or
moving its checkpoint: the sensor's and the trigger's peek, and the monitoring page's estimate walk it one way.

Every read here is the relay's, so it is sent at low priority (``ports/request_priority.py``): the services
writing to the container keep their throughput first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_chatter.drain.leases import Lease, read_lease
from airflow_chatter.outbox.document import is_pending_outbox
from airflow_chatter.ports import ChangeFeedStart, Document, DocumentContainer
from airflow_chatter.ports.request_priority import LOW, prioritized

#: Change-feed pages (of ``ESTIMATE_PAGE_ITEMS``) a pending estimate reads at most per lease.
ESTIMATE_MAX_PAGES = 5
ESTIMATE_PAGE_ITEMS = 100


@dataclass(frozen=True)
class FeedStep:
    """One change-feed page of a walk: read from ``position``, it held ``documents`` (``pending`` of them pending
    outbox documents, the oldest last written at ``oldest_pending_ts``, epoch seconds) and ends at ``continuation``."""

    position: str | None
    documents: int
    pending: int
    continuation: str | None
    oldest_pending_ts: float | None = None


def walk_pending(
    monitored: DocumentContainer, lease: Lease, position: str | None, *, page_items: int, max_pages: int
) -> Iterator[FeedStep]:
    """Read the lease's feed range from ``position`` (its checkpoint, or a poller's own), at most ``max_pages``
    pages, up to and including the first empty page (caught up). Read-only."""
    start = lease.start_from if lease.start_from is not None else ChangeFeedStart.BEGINNING
    for _ in range(max_pages):
        with prioritized(LOW):
            page = monitored.read_change_feed(
                lease.feed_range, continuation=position, start=start, max_item_count=page_items
            )
        stamps = [_ts(document) for document in page.documents if is_pending_outbox(document)]
        known = [stamp for stamp in stamps if stamp is not None]
        yield FeedStep(position, len(page.documents), len(stamps), page.continuation, min(known) if known else None)
        if not page.documents:
            return
        position = page.continuation


@dataclass(frozen=True)
class Peek:
    """What a peek saw: pending documents after the lease checkpoint, and where to look next time."""

    lease_id: str
    pending: int
    documents: int
    continuation: str | None


def peek_pending(
    monitored: DocumentContainer,
    leases: DocumentContainer,
    lease_id: str,
    *,
    continuation: str | None = None,
    page_size: int = 100,
    max_pages: int = 5,
) -> Peek:
    """Read at most ``max_pages`` change-feed pages after the lease checkpoint (or ``continuation``).

    Read-only: the lease is not taken and its checkpoint does not move. Stops at the first page with a
    pending outbox document, or when caught up. The returned continuation lets a poller resume where
    it stopped, so repeated peeks only read new changes.
    """
    with prioritized(LOW):
        lease = read_lease(leases, lease_id)
    position = continuation if continuation is not None else lease.continuation
    seen = 0
    for step in walk_pending(monitored, lease, position, page_items=page_size, max_pages=max_pages):
        seen += step.documents
        if step.pending:
            # Do not move past a page with pending documents: the next peek must still see them.
            return Peek(lease_id, step.pending, seen, step.position)
        position = step.continuation
    return Peek(lease_id, 0, seen, position)


@dataclass(frozen=True)
class PendingEstimate:
    """Pending Outbox Documents after a lease's checkpoint: ``count`` is exact unless ``bounded`` (then a floor).

    ``oldest_pending_at``: when the oldest pending document seen was last written (its ``_ts``); ``None`` when none
    was seen. With ``count == 0`` and not ``bounded`` the lease is caught up.
    """

    count: int
    documents_read: int
    bounded: bool
    oldest_pending_at: datetime | None = None

    def age_seconds(self, now: datetime) -> float | None:
        """How long the oldest pending document has waited: 0 when caught up, ``None`` when unknown (pending
        documents may lie beyond the pages read, or none carried a ``_ts``)."""
        if self.oldest_pending_at is not None:
            return round(max(0.0, (now - self.oldest_pending_at).total_seconds()), 1)
        return 0.0 if self.count == 0 and not self.bounded else None


def estimate_pending(
    monitored: DocumentContainer,
    lease: Lease,
    *,
    page_items: int = ESTIMATE_PAGE_ITEMS,
    max_pages: int = ESTIMATE_MAX_PAGES,
) -> PendingEstimate:
    """Count pending Outbox Documents in the change feed after the lease's checkpoint, reading at most
    ``max_pages`` pages; read-only (the lease is not taken, its continuation not moved)."""
    pending = read = 0
    oldest: float | None = None
    for step in walk_pending(monitored, lease, lease.continuation, page_items=page_items, max_pages=max_pages):
        if not step.documents:
            return PendingEstimate(pending, read, False, _moment(oldest))
        read += step.documents
        pending += step.pending
        if step.oldest_pending_ts is not None:
            oldest = step.oldest_pending_ts if oldest is None else min(oldest, step.oldest_pending_ts)
    return PendingEstimate(pending, read, True, _moment(oldest))


def _ts(document: Document) -> float | None:
    stamp = document.get("_ts")
    return float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None


def _moment(stamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(stamp, UTC) if stamp is not None else None
