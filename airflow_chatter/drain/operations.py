"""Drain operations around the drain itself: building an engine from a source's configuration, topic mapping,
lease reports and resets, the backfill exclusion, pending peeks and counts, and requeueing undeliverable documents.

The Airflow tasks (operators, the sensor and its trigger) call these; nothing here imports Airflow, so every
operation runs with ``MemoryDocumentContainer`` and ``FakePublisher`` and outside Airflow. Lease documents are only
ever written through ``LeaseStore`` (its ETag conditions, its clock), never behind its back.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import ACTIVE, Lease, LeaseHeldError, LeaseLostError, LeaseStore
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.request_units import ThrottleLimits
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.errors import ChatterError
from airflow_chatter.outbox.document import (
    OUTBOX_TYPE,
    PENDING,
    STATUS_FIELD,
    TYPE_FIELD,
    UNDELIVERABLE,
    is_pending_outbox,
)
from airflow_chatter.outbox.partition_keys import recover_partition_key
from airflow_chatter.ports import (
    ChangeFeedStart,
    Document,
    DocumentContainer,
    FeedRange,
    NotFound,
    OutgoingMessage,
    PatchOperation,
    PreconditionFailed,
    Publisher,
    PublishOutcome,
)

log = logging.getLogger(__name__)

#: Longest a backfill may hold the scheduled lease of a range beyond its own time budget; after that
#: the hold expires by itself even if the worker died.
BACKFILL_HOLD_MARGIN_SECONDS = 60.0


# ------------------------------------------------------------------------------------------------
# Engine.
# ------------------------------------------------------------------------------------------------


class TopicMappingPublisher(Publisher):
    """Send each message to ``topics[destination]`` (or the destination itself when unmapped)."""

    def __init__(self, inner: Publisher, topics: Mapping[str, str]) -> None:
        self.inner = inner
        self.topics = dict(topics)

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        mapped = [dataclasses.replace(m, topic=self.topics.get(m.topic, m.topic)) for m in messages]
        return self.inner.send_batch(mapped)

    def close(self) -> None:
        self.inner.close()


PendingFilter = Callable[[dict[str, Any]], bool]


def modified_since(since: datetime) -> PendingFilter:
    """A pending filter admitting documents last modified at or after ``since`` (``_ts``, UTC).

    It filters what a lease reads; it does not move where the lease starts. A backfill from a point in time
    starts its leases there instead (``build_engine(start_from=...)``), which does not read older changes.
    """
    threshold = since.astimezone(UTC).timestamp()

    def admit(document: dict[str, Any]) -> bool:
        ts = document.get("_ts")
        return isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= threshold

    return admit


def _both(first: PendingFilter | None, second: PendingFilter) -> PendingFilter:
    if first is None:
        return second
    return lambda document: bool(first(document)) and bool(second(document))


class EngineConfig(Protocol):
    """What ``build_engine`` needs of a source's configuration (``airflow_chatter.airflow.config.SourceConfig``)."""

    @property
    def topics(self) -> Mapping[str, str]: ...

    def to_options(self, *, resolve: bool = False, lease_prefix: str | None = None) -> SourceOptions: ...


def build_engine(
    config: EngineConfig,
    monitored: DocumentContainer,
    leases: DocumentContainer,
    publisher: Publisher,
    *,
    lease_prefix: str | None = None,
    extra_filter: PendingFilter | None = None,
    owner: str | None = None,
    start_from: datetime | None = None,
    throttle_limits: ThrottleLimits | None = None,
) -> DrainEngine:
    """Build the ``DrainEngine`` of a source; imports its resolver/filter (do this in a task).

    ``start_from`` is where the leases the engine creates start reading (a backfill from a point in time);
    never give it for the scheduled lease set, whose new leases must start at the beginning (RLY-08).
    ``throttle_limits`` are the Cosmos connection's 429 limits; the source's own override them (F-11).
    """
    options = config.to_options(resolve=True, lease_prefix=lease_prefix)
    if extra_filter is not None:
        options = dataclasses.replace(
            options, additional_pending_filter=_both(options.additional_pending_filter, extra_filter)
        )
    if config.topics:
        publisher = TopicMappingPublisher(publisher, config.topics)
    return DrainEngine.open(
        options, monitored, leases, publisher, owner=owner, start_from=start_from, throttle_limits=throttle_limits
    )


def lease_report(lease: Lease) -> dict[str, Any]:
    """The JSON-able view of a lease a task logs or returns (no continuation token: it is opaque)."""
    return {
        "id": lease.id,
        "feed_range": lease.token,
        "state": lease.state,
        "owner": lease.owner,
        "checkpointed": lease.continuation is not None,
        "checkpointed_at": lease.checkpointed_at.isoformat() if lease.checkpointed_at else None,
        "suspended": lease.suspension.suspended,
    }


def reset_leases(store: LeaseStore) -> list[str]:
    """Delete this prefix's leases so the next drain starts afresh; return the ids deleted.

    A lease that is live by the store's clock, or changes while it is being reset, is kept (and logged): its
    drain carries on with it. Used by a backfill from the beginning or a point in time: the leases the next
    ``ensure_leases`` creates start where that store says. Never call it with the scheduled drain's prefix.
    """
    deleted: list[str] = []
    for lease in store.list_leases():
        try:
            store.delete(lease)
        except LeaseHeldError as held:
            log.warning("Lease %s is live (owner %s); not reset", lease.id, held.owner)
        except LeaseLostError:
            log.warning("Lease %s changed while being reset; kept", lease.id)
        else:
            deleted.append(lease.id)
    return deleted


# ------------------------------------------------------------------------------------------------
# Backfill exclusion.
# ------------------------------------------------------------------------------------------------


@contextmanager
def exclusive_with(
    engine: DrainEngine, lease_id: str, *, other_prefix: str, hold_seconds: float
) -> Iterator[list[Lease]]:
    """Hold the *other* lease set's leases on the same feed range while draining ``lease_id``.

    A backfill drains with its own lease prefix (so the scheduled checkpoints are untouched), which by
    itself would let a scheduled drain and a backfill own one range at once. Taking the scheduled
    leases of that range too (ownership only: acquire and release never move their continuations) makes
    the two exclusive: whichever drain comes second gets ``LeaseHeldError`` and leaves the range
    alone. The hold expires ``hold_seconds`` after it was taken even if this process dies.

    "The same range" is every active lease of the other set that overlaps it: usually one with the same range,
    but after a split the other set drains it through its children, and after a merge through the leases of its
    parts (or the other way round), so all of them are held, or none (a ``LeaseHeldError`` releases those already
    taken).
    """
    own = engine.store.get(lease_id)
    guard = LeaseStore(
        engine.store.container,
        engine.store.processor_name,
        owner=engine.store.owner,
        lease_prefix=other_prefix,
        lease_duration_seconds=hold_seconds,
        clock=engine.store.clock,
    )
    # What the other set's next listing would do anyway: create its first leases, or the children of a split (from
    # the parent's checkpoint), so the leases held below are the ones that set will drain, not a retired parent.
    LeaseTopology(guard, engine.monitored).ensure_leases()
    overlapping = _overlapping(guard, engine.monitored, own.feed_range)
    if not overlapping:
        raise ChatterError(
            f"no lease of the lease set {other_prefix!r} covers the feed range of {lease_id!r}; "
            "not draining it without holding that set off"
        )
    held: list[Lease] = []
    try:
        for lease in overlapping:
            held.append(guard.acquire(lease.id))  # LeaseHeldError: the other drain owns (part of) the range now
        yield held
    finally:
        for lease in held:
            current = guard.find(lease.id)
            if current is not None:
                guard.release(current)


def _overlapping(store: LeaseStore, monitored: DocumentContainer, feed_range: FeedRange) -> list[Lease]:
    """The active leases of ``store`` that share keys with ``feed_range``: the same range, inside it (parts of a
    merge), around it, or across one of its edges (pieces of a merge split again at another boundary), by id."""
    return [
        lease
        for lease in store.list_leases()
        if lease.state == ACTIVE
        and (lease.token == feed_range.token or monitored.feed_range_overlap(feed_range, lease.feed_range) is not None)
    ]


# ------------------------------------------------------------------------------------------------
# Pending peeks (sensor, trigger, dry runs).
# ------------------------------------------------------------------------------------------------

PENDING_COUNT_SQL = f"SELECT VALUE COUNT(1) FROM c WHERE c.{TYPE_FIELD} = @type AND c.{STATUS_FIELD} = @status"


def count_pending(container: DocumentContainer, *, since: datetime | None = None) -> int:
    """Count pending outbox documents (one cross-partition query; a dry run's estimate).

    ``since`` counts those with ``_ts`` at or after its whole second: what leases starting at ``since`` read
    (``LeaseStore`` floors a start to the second the same way).
    """
    sql = PENDING_COUNT_SQL
    parameters: dict[str, Any] = {"@type": OUTBOX_TYPE, "@status": PENDING}
    if since is not None:
        sql += " AND c._ts >= @since"
        parameters["@since"] = int(since.astimezone(UTC).timestamp())
    return sum(int(n) for n in container.query(sql, parameters))


@dataclass(frozen=True)
class Peek:
    """What a peek saw: pending documents after the lease checkpoint, and where to look next time."""

    lease_id: str
    pending: int
    documents: int
    continuation: str | None


def read_lease(leases: DocumentContainer, lease_id: str) -> Lease:
    """Read one lease document by id (its own partition key)."""
    return Lease.from_document(leases.read(lease_id, lease_id), lease_id)


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
    lease = read_lease(leases, lease_id)
    position = continuation if continuation is not None else lease.continuation
    seen = 0
    for _ in range(max_pages):
        page = monitored.read_change_feed(
            lease.feed_range,
            continuation=position,
            start=lease.start_from if lease.start_from is not None else ChangeFeedStart.BEGINNING,
            max_item_count=page_size,
        )
        seen += len(page.documents)
        pending = sum(1 for document in page.documents if is_pending_outbox(document))
        if pending:
            # Do not move past a page with pending documents: the next peek must still see them.
            return Peek(lease_id, pending, seen, position)
        position = page.continuation
        if not page.documents:
            break
    return Peek(lease_id, 0, seen, position)


# ------------------------------------------------------------------------------------------------
# Requeue.
# ------------------------------------------------------------------------------------------------

_UNDELIVERABLE_SQL = f"SELECT * FROM c WHERE c.{TYPE_FIELD} = @type AND c.{STATUS_FIELD} = @status"


@dataclass(frozen=True)
class RequeueResult:
    requeued: tuple[str, ...]
    changed_meanwhile: tuple[str, ...]
    not_found: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in dataclasses.asdict(self).items()}


def select_undeliverable(
    container: DocumentContainer,
    *,
    document_ids: Sequence[str] | None = None,
    where: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    limit: int = 1000,
) -> list[Document]:
    """Undeliverable outbox documents by id and/or a query condition on ``c`` (at most ``limit``)."""
    if not document_ids and not where:
        raise ValueError("select undeliverable documents by document_ids or by a where condition")
    sql = _UNDELIVERABLE_SQL
    params: dict[str, Any] = {"@type": OUTBOX_TYPE, "@status": UNDELIVERABLE}
    if document_ids:
        # OR of equalities rather than ARRAY_CONTAINS: every adapter's SQL subset supports it.
        names = [f"@id{i}" for i in range(len(document_ids))]
        sql += " AND (" + " OR ".join(f"c.id = {name}" for name in names) + ")"
        params.update(zip(names, document_ids, strict=True))
    if where:
        sql += f" AND ({where})"
        params.update(parameters or {})
    found: list[Document] = []
    for document in container.query(sql, params):
        found.append(document)
        if len(found) >= limit:
            break
    return found


def requeue_undeliverable(
    container: DocumentContainer,
    partition_key_paths: Sequence[str],
    documents: Sequence[Document],
    *,
    requested: Sequence[str] = (),
) -> RequeueResult:
    """Set ``status`` back to ``pending`` on each document, conditional on the ETag it was read with.

    The patch is an update, so the document re-enters the change feed after every lease checkpoint and
    the next scheduled drain verifies and publishes it again. A document changed since it was read is
    left alone and reported in ``changed_meanwhile``; one deleted since it was read (or expired) in ``not_found``,
    and the others are still requeued.
    """
    requeued: list[str] = []
    changed: list[str] = []
    gone: list[str] = []
    for document in documents:
        key = recover_partition_key(document, partition_key_paths)
        try:
            container.patch(
                document["id"],
                key,
                [PatchOperation("set", f"/{STATUS_FIELD}", PENDING)],
                if_match=document.get("_etag"),
            )
            requeued.append(document["id"])
        except PreconditionFailed:
            changed.append(document["id"])
        except NotFound:
            gone.append(document["id"])
    found = {d["id"] for d in documents}
    missing = [i for i in requested if i not in found]
    return RequeueResult(tuple(requeued), tuple(changed), tuple(missing + [i for i in gone if i not in missing]))
