"""The standalone two-phase inbox: claim → run → complete, around a task's own work (INB-01..15).

For work that has no unit of work in the document tier (a task calling an API, writing to another store, or to a
container it cannot batch with): a **pending** marker is created before the work runs and patched ``Completed=true``
after it returned.

Why each branch is what it is:

* **The claim is a create.** Cosmos DB decides the 409 on the partition's primary replica, so of two claims exactly
  one is fresh. A 409 is only a *candidate* duplicate: the existing document is point-read and confirmed (INB-04).
  A completed marker of this identity and receiver → skip. A foreign document → raise, never skip (INB-04c).
* **A pending marker is a claim with a lease.** Its ``ClaimedAtUtc`` plus ``claim_lease`` says until when its owner
  may still be working. Within the lease the delivery is refused (``ClaimInFlightError``, not acknowledged); after
  it, the claim is taken over with an ETag-conditional replace, so of two late comers only one takes it (the other
  re-reads and decides again). ``claim_lease=0`` is the reference's behaviour: take over at once (INB-12: the inbox
  is not a lock).
* **Monotonic (INB-08).** Nothing here deletes a marker or reverts a completed one: a take-over replace is
  conditional on the pending version's ETag, and completion is a patch that only sets ``true``.
* **A failed handler leaves the claim pending (INB-07)**, so the redelivery takes it over after the lease.

Side effects of the work itself are at least once: a process killed after its work and before ``complete`` re-runs
it on redelivery. For external HTTP calls, give them an idempotency key (docs/idempotency.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, TypeVar

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.errors import ClaimInFlightError, ForeignDocumentError, MarkerNotFoundError
from airflow_chatter.inbox.markers import (
    CLAIMED_AT_FIELD,
    COMPLETED_FIELD,
    DEFAULT_INBOX_PARTITION_PATH,
    checked_identity,
    foreign_reason,
    iso_utc,
    marker_id,
    parse_iso_utc,
    pending_marker,
)
from airflow_chatter.outbox.partition_keys import canonicalize_paths, path_segments
from airflow_chatter.ports import (
    Conflict,
    Document,
    DocumentContainer,
    NotFound,
    PartitionKey,
    PatchOperation,
    PreconditionFailed,
)

T = TypeVar("T")

#: Fields Cosmos DB adds to a stored document; a replace sends the document without them.
_SYSTEM_FIELDS = frozenset({"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"})

#: Lost take-over races before giving up on one claim: each lost race means another attempt made progress.
MAX_TAKEOVER_ATTEMPTS = 3


@dataclass(frozen=True)
class InboxOptions:
    """How the standalone inbox claims (INB-13 validates these when built).

    ``partition_key_path`` (default ``/idempotencyKey``: one segment, the container's partition path);
    ``read_back_max_attempts`` (default 5, ≥1) and ``read_back_interval`` (default 50 ms, ≥0) bound the confirm read
    after a 409; ``marker_ttl`` (default none) stamps ``ttl`` on markers, which needs ``defaultTtl`` on the container;
    ``claim_lease`` (default 60 s, ≥0) is how long a pending claim is left to its owner; ``receiver`` scopes every
    marker to one receiver (default none: the contract's unscoped ids).
    """

    partition_key_path: str = DEFAULT_INBOX_PARTITION_PATH
    read_back_max_attempts: int = 5
    read_back_interval: timedelta = timedelta(milliseconds=50)
    marker_ttl: timedelta | None = None
    claim_lease: timedelta = timedelta(seconds=60)
    receiver: str | None = None

    def __post_init__(self) -> None:
        paths = canonicalize_paths(self.partition_key_path)
        if len(paths) != 1 or len(path_segments(paths[0])) != 1:
            raise ConfigurationError(
                "partition_key_path",
                self.partition_key_path,
                "must be exactly one non-blank segment, e.g. /idempotencyKey",
            )
        if path_segments(paths[0])[0] == "ttl" and self.marker_ttl is not None:
            raise ConfigurationError(
                "partition_key_path", self.partition_key_path, "cannot be /ttl when marker_ttl is set"
            )
        object.__setattr__(self, "partition_key_path", paths[0])
        if isinstance(self.read_back_max_attempts, bool) or not isinstance(self.read_back_max_attempts, int):
            raise ConfigurationError("read_back_max_attempts", self.read_back_max_attempts, "must be an integer")
        if self.read_back_max_attempts < 1:
            raise ConfigurationError("read_back_max_attempts", self.read_back_max_attempts, "must be at least 1")
        if self.read_back_interval < timedelta(0):
            raise ConfigurationError("read_back_interval", self.read_back_interval, "must not be negative")
        if self.claim_lease < timedelta(0):
            raise ConfigurationError("claim_lease", self.claim_lease, "must not be negative")
        if self.marker_ttl is not None and self.marker_ttl.total_seconds() < 1:
            raise ConfigurationError("marker_ttl", self.marker_ttl, "must be at least one second when set")
        if self.receiver is not None and (not isinstance(self.receiver, str) or not self.receiver.strip()):
            raise ConfigurationError("receiver", self.receiver, "must be a non-blank string when set")


class ClaimDecision(str, Enum):
    """What a claim found: a fresh claim, a pending claim taken over, or a completed marker (skip)."""

    FRESH = "fresh"
    TAKEN_OVER = "taken_over"
    DUPLICATE = "duplicate"


@dataclass
class Claim:
    """One claim of one identity. ``should_run`` is false for a duplicate: skip the work."""

    identity: str
    item_id: str
    partition_key: PartitionKey
    decision: ClaimDecision
    completed: bool = field(default=False)

    @property
    def should_run(self) -> bool:
        return self.decision is not ClaimDecision.DUPLICATE


def read_back(
    container: DocumentContainer,
    item_id: str,
    partition_key: PartitionKey,
    *,
    attempts: int,
    interval_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Document:
    """Point-read the document a 409 named, retrying 404s up to ``attempts`` reads with no wait after the last
    (INB-05); ``MarkerNotFoundError`` when every read said 404. Other read errors propagate (INB-04c)."""
    for attempt in range(1, attempts + 1):
        try:
            return container.read(item_id, partition_key)
        except NotFound:
            if attempt < attempts and interval_s > 0:
                sleep(interval_s)
    raise MarkerNotFoundError(item_id, attempts)


class Inbox:
    """The standalone inbox over one ``DocumentContainer`` partitioned on ``options.partition_key_path``."""

    def __init__(
        self,
        container: DocumentContainer,
        options: InboxOptions | None = None,
        *,
        clock: Clock = utc_now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.container = container
        self.options = options or InboxOptions()
        self._clock = clock
        self._sleep = sleep

    # -- phase 1 ---------------------------------------------------------------------------------------------

    def begin(self, identity: str) -> Claim:
        """Claim ``identity``: create the pending marker, or decide on the one that exists (see the module doc).

        Raises before any write for a blank identity (``InboxIdentityError``) or an over-long one
        (``ItemIdTooLongError``); raises ``ForeignDocumentError``, ``ClaimInFlightError``, ``MarkerNotFoundError`` or
        the container's error when the work must not run now.
        """
        options = self.options
        checked_identity(identity)
        item_id = marker_id(identity, options.receiver)
        document = pending_marker(
            identity, options.receiver, options.partition_key_path, self._clock(), ttl=options.marker_ttl
        )
        partition_key: PartitionKey = identity
        try:
            self.container.create(document, partition_key)
            return Claim(identity, item_id, partition_key, ClaimDecision.FRESH)
        except Conflict:
            pass
        for _ in range(MAX_TAKEOVER_ATTEMPTS):
            existing = read_back(
                self.container,
                item_id,
                partition_key,
                attempts=options.read_back_max_attempts,
                interval_s=options.read_back_interval.total_seconds(),
                sleep=self._sleep,
            )
            reason = foreign_reason(existing, identity, options.receiver)
            if reason is not None:
                raise ForeignDocumentError(item_id, reason)
            if existing.get(COMPLETED_FIELD) is True:
                return Claim(identity, item_id, partition_key, ClaimDecision.DUPLICATE, completed=True)
            now = self._clock()
            claimed_at = parse_iso_utc(existing.get(CLAIMED_AT_FIELD)) or parse_iso_utc(existing.get("ReceivedAtUtc"))
            if claimed_at is not None and now < claimed_at + options.claim_lease:
                raise ClaimInFlightError(item_id, iso_utc(claimed_at + options.claim_lease))
            taken = {k: v for k, v in existing.items() if k not in _SYSTEM_FIELDS}
            taken[CLAIMED_AT_FIELD] = iso_utc(now)
            try:
                self.container.replace(item_id, partition_key, taken, if_match=existing.get("_etag"))
            except (PreconditionFailed, NotFound):
                continue  # another attempt took or completed it meanwhile: decide again on what is there now
            return Claim(identity, item_id, partition_key, ClaimDecision.TAKEN_OVER)
        raise ClaimInFlightError(item_id, "another attempt keeps taking it over")

    # -- phase 2 ---------------------------------------------------------------------------------------------

    def complete(self, claim: Claim) -> None:
        """Mark the claim's work done: one patch ``/Completed = true`` (INB-02). A failure propagates (INB-03)."""
        if not claim.should_run or claim.completed:
            return
        self.container.patch(claim.item_id, claim.partition_key, [PatchOperation("set", f"/{COMPLETED_FIELD}", True)])
        claim.completed = True

    # -- the APIs around a task's own work ---------------------------------------------------------------------

    @contextmanager
    def claim(self, identity: str) -> Iterator[Claim]:
        """``with inbox.claim(id) as claim: if claim.should_run: work()``; a clean exit completes the claim, an
        exception leaves it pending (INB-07) and propagates unchanged."""
        claim = self.begin(identity)
        yield claim
        self.complete(claim)

    def handle(self, identity: str, work: Callable[[], T]) -> tuple[bool, T | None]:
        """Run ``work`` once per identity: ``(True, result)`` when it ran, ``(False, None)`` for a duplicate."""
        with self.claim(identity) as claim:
            if not claim.should_run:
                return False, None
            result = work()
        return True, result

    @asynccontextmanager
    async def claim_async(self, identity: str) -> AsyncIterator[Claim]:
        """The async form of :meth:`claim`; the container calls run in a worker thread, off the event loop."""
        claim = await asyncio.to_thread(self.begin, identity)
        yield claim
        await asyncio.to_thread(self.complete, claim)

    def has_been_received(self, identity: str) -> Any:
        """Unsupported (INB-14): a read-only check races with the claim; deduplicate only through ``claim``."""
        raise NotImplementedError("has_been_received is not supported: deduplicate through Inbox.claim (INB-14)")


__all__ = ["Claim", "ClaimDecision", "Inbox", "InboxOptions", "read_back"]
