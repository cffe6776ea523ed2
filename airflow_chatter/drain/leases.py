"""Lease documents: one per feed range of a source, in the lease container (F-04).

Python has no Change Feed Processor, so ownership and checkpoints are built here (which leases exist as the feed
ranges split and merge is ``drain/topology.py``'s job, through the lifecycle writes of ``LeaseStore``). A lease
document holds its feed range, the continuation to resume from, the owner and an expiry, and the
Drain Suspension state of that lease (F-05). Every write is ETag-conditional: two drains (a scheduled
run and a manual backfill, or two workers) can race for a lease, and exactly one wins.

The lease container is partitioned on ``/id``, so every lease is its own logical partition and its
partition key is its id.

A lease with no continuation yet starts reading at its ``start_from`` (a backfill from a point in time) or, without
one, at the beginning of the change feed (RLY-08). Once checkpointed, the continuation alone decides.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.drain.suspension import SuspensionState, parse_utc
from airflow_chatter.drain.tries import RUN_TRIES_FIELD
from airflow_chatter.errors import ChatterError, ConfigurationError, InvalidLeaseDocumentError
from airflow_chatter.ports import (
    Conflict,
    Document,
    DocumentContainer,
    FeedRange,
    NotFound,
    PreconditionFailed,
)

LEASE_TYPE = "lease"
ACTIVE = "active"
#: The range split; its children carry on from its continuation. Kept (not deleted) as an audit trail
#: and so that a drain still holding the parent's id learns where its documents went.
SPLIT = "split"
#: The range merged into a wider one that this source's other leases do not fully cover, so a lease for the merged
#: range took over (reading from its start). ``children`` holds the merged range. Kept as an audit trail.
MERGED = "merged"


class LeaseHeldError(ChatterError):
    """The lease is live and owned by another drain; it was left alone."""

    def __init__(self, lease_id: str, owner: str, expires_at: datetime | None) -> None:
        self.lease_id = lease_id
        self.owner = owner
        self.expires_at = expires_at
        super().__init__(f"Lease {lease_id!r} is held by {owner!r} until {expires_at}; left alone")


class LeaseLostError(ChatterError):
    """A conditional lease write lost the race: another drain took the lease over."""

    def __init__(self, lease_id: str, action: str) -> None:
        self.lease_id = lease_id
        self.action = action
        super().__init__(f"Lease {lease_id!r} was taken over by another drain before {action}")


@dataclass(frozen=True)
class Lease:
    """A parsed lease document. ``etag`` guards the next write."""

    id: str
    processor: str
    lease_prefix: str
    feed_range: FeedRange
    continuation: str | None
    #: Where to start reading while ``continuation`` is ``None`` (UTC, whole seconds); ``None``: the beginning.
    start_from: datetime | None
    owner: str | None
    expires_at: datetime | None
    suspension: SuspensionState
    state: str
    children: tuple[str, ...]
    created_at: datetime | None
    updated_at: datetime | None
    checkpointed_at: datetime | None
    etag: str
    document: Document = field(compare=False, repr=False)

    @property
    def token(self) -> str:
        """The lease token: its feed range's token (the ``lease_token`` metrics attribute)."""
        return self.feed_range.token

    def is_live(self, now: datetime) -> bool:
        """Owned, and the owner's expiry is still ahead."""
        return self.owner is not None and self.expires_at is not None and self.expires_at > now

    def to_document(self) -> Document:
        """The JSON document for this lease, keeping fields this version does not know."""
        doc = {k: v for k, v in self.document.items() if not k.startswith("_")}
        doc.update(
            {
                "id": self.id,
                "_chatterType": LEASE_TYPE,
                "processor": self.processor,
                "lease_prefix": self.lease_prefix,
                "feed_range": self.feed_range.token,
                "continuation": self.continuation,
                "start_from": _iso(self.start_from),
                "owner": self.owner,
                "expires_at": _iso(self.expires_at),
                "suspension": self.suspension.to_document(),
                "state": self.state,
                "children": list(self.children),
                "created_at": _iso(self.created_at),
                "updated_at": _iso(self.updated_at),
                "checkpointed_at": _iso(self.checkpointed_at),
            }
        )
        return doc

    @classmethod
    def from_document(cls, doc: object, lease_id: str | None = None) -> Lease:
        """Parse a stored lease; ``InvalidLeaseDocumentError`` naming the lease for any bad field."""
        name = lease_id or (doc.get("id") if isinstance(doc, Mapping) else None) or "<unknown>"
        try:
            return cls._parse(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidLeaseDocumentError(str(name), str(exc)) from None

    @classmethod
    def _parse(cls, doc: object) -> Lease:
        if not isinstance(doc, Mapping):
            raise ValueError(f"a lease document must be a JSON object, got {type(doc).__name__}")  # noqa: TRY004 - stored data of the wrong shape is a bad value
        if doc.get("_chatterType") != LEASE_TYPE:
            raise ValueError(f"_chatterType must be {LEASE_TYPE!r}, got {doc.get('_chatterType')!r}")
        state = doc.get("state", ACTIVE)
        if state not in (ACTIVE, SPLIT, MERGED):
            raise ValueError(f"state must be {ACTIVE!r}, {SPLIT!r} or {MERGED!r}, got {state!r}")
        children = doc.get("children", [])
        if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
            raise ValueError(f"children must be a list of feed range tokens, got {children!r}")
        etag = doc.get("_etag")
        if not isinstance(etag, str) or not etag:
            raise ValueError("the stored lease carries no _etag")
        return cls(
            id=_required_str(doc, "id"),
            processor=_required_str(doc, "processor"),
            lease_prefix=_optional_str(doc, "lease_prefix") or "",
            feed_range=FeedRange(_required_str(doc, "feed_range")),
            continuation=_optional_str(doc, "continuation"),
            start_from=parse_utc(doc.get("start_from"), "start_from"),
            owner=_optional_str(doc, "owner"),
            expires_at=parse_utc(doc.get("expires_at"), "expires_at"),
            suspension=SuspensionState.from_document(doc.get("suspension")),
            state=state,
            children=tuple(children),
            created_at=parse_utc(doc.get("created_at"), "created_at"),
            updated_at=parse_utc(doc.get("updated_at"), "updated_at"),
            checkpointed_at=parse_utc(doc.get("checkpointed_at"), "checkpointed_at"),
            etag=etag,
            document=dict(doc),
        )


def lease_id_for(processor_name: str, lease_prefix: str, feed_range: FeedRange) -> str:
    """``{prefix}{processor name}:{hex SHA-256 of the range token, 32 digits}``.

    Deterministic, so every process derives the same id for the same (source, range) without a query.
    A digest rather than an encoding of the token: feed-range tokens are JSON, whose base64 starts with
    ``eyJ`` and is masked as a JWT in Airflow's task logs, and they can be long. The token itself is kept
    in the lease document.
    """
    digest = hashlib.sha256(feed_range.token.encode("utf-8")).hexdigest()[:32]
    return f"{lease_prefix}{processor_name}:{digest}"


def read_lease(container: DocumentContainer, lease_id: str) -> Lease:
    """Read one lease by id (its own partition key); ``NotFound`` if absent, ``InvalidLeaseDocumentError`` if
    malformed. Needs no store: a reader that knows only the lease container and the ids (the trigger) uses it too."""
    return Lease.from_document(container.read(lease_id, lease_id), lease_id)


class LeaseStore:
    """Lease documents of one source (processor name + lease prefix) in one lease container.

    ``owner`` names this drain in the leases it holds; ``lease_duration_seconds`` is how long a taken
    lease stays live without a renewal (default 60 s, the CFP default expiry).

    ``start_from`` (aware datetime, default ``None``: the beginning) is where the leases this store creates for
    ranges *without a parent* start reading; a backfill from a point in time passes it. Split children never take
    it: they carry on from their parent. It is floored to the whole second, because ``_ts`` and the change feed's
    start time (``If-Modified-Since``) are whole seconds: every adapter then reads the same documents (``_ts`` at or
    after that second), which is also what a dry run counts. That reads at most one second more, never less.
    """

    def __init__(
        self,
        container: DocumentContainer,
        processor_name: str,
        *,
        owner: str,
        lease_prefix: str = "",
        lease_duration_seconds: float = 60.0,
        clock: Clock = utc_now,
        start_from: datetime | None = None,
    ) -> None:
        if lease_duration_seconds <= 0:
            raise ValueError("lease_duration_seconds must be positive")
        self.start_from = _start_from(start_from)
        self.container = container
        self.processor_name = processor_name
        self.lease_prefix = lease_prefix
        self.owner = owner
        self.lease_duration = timedelta(seconds=lease_duration_seconds)
        self._clock = clock

    # ------------------------------------------------------------------ reading

    @property
    def clock(self) -> Clock:
        """The clock that decides expiry: a store guarding this one's leases must judge them by the same time."""
        return self._clock

    def lease_id(self, feed_range: FeedRange) -> str:
        return lease_id_for(self.processor_name, self.lease_prefix, feed_range)

    def get(self, lease_id: str) -> Lease:
        """Read one lease; ``NotFound`` if absent, ``InvalidLeaseDocumentError`` if malformed."""
        return read_lease(self.container, lease_id)

    def find(self, lease_id: str) -> Lease | None:
        try:
            return self.get(lease_id)
        except NotFound:
            return None

    def list_leases(self) -> list[Lease]:
        """Every lease of this source (active and split), by id."""
        docs = self.container.query(
            "SELECT * FROM c WHERE c.processor = @processor AND c.lease_prefix = @prefix",
            {"@processor": self.processor_name, "@prefix": self.lease_prefix},
        )
        leases = [Lease.from_document(doc) for doc in docs if _is_ours(doc, self)]
        return sorted(leases, key=lambda lease: lease.id)

    # ------------------------------------------------------------------ lease lifecycle (used by LeaseTopology)

    def held_elsewhere(self, lease: Lease, now: datetime) -> bool:
        """Whether another drain holds ``lease`` live at ``now``."""
        return lease.is_live(now) and lease.owner != self.owner

    def create(
        self,
        feed_range: FeedRange,
        continuation: str | None,
        start_from: datetime | None,
        suspension: SuspensionState | None = None,
    ) -> Lease:
        """A new lease for ``feed_range`` at ``continuation`` (or ``start_from``). ``suspension`` is a predecessor's
        Drain Suspension state, which a split's children carry on: splitting the range does not fix what made its
        stamps fail, so their first batches are gated as the parent's next one would have been (SUS, F-05)."""
        now = self.now()
        lease_id = self.lease_id(feed_range)
        doc: Document = {
            "id": lease_id,
            "_chatterType": LEASE_TYPE,
            "processor": self.processor_name,
            "lease_prefix": self.lease_prefix,
            "feed_range": feed_range.token,
            "continuation": continuation,
            "start_from": _iso(start_from),
            "owner": None,
            "expires_at": None,
            "suspension": (suspension or SuspensionState()).to_document(),
            "state": ACTIVE,
            "children": [],
            "created_at": _iso(now),
            "updated_at": _iso(now),
            "checkpointed_at": None,
        }
        try:
            return Lease.from_document(self.container.create(doc, lease_id), lease_id)
        except Conflict:
            existing = self.get(lease_id)
            if existing.state == ACTIVE:
                return existing  # another drain created it first: theirs is as good as ours
            # The range had a lease that was retired (split, or merged into a wider range) and now is a range again
            # (a split merged back, a merge split back): the lease id is the range's, so that lease carries on.
            return self.revive(existing, continuation, start_from, suspension)

    def revive(
        self,
        lease: Lease,
        continuation: str | None,
        start_from: datetime | None,
        suspension: SuspensionState | None = None,
    ) -> Lease:
        """Make a retired lease active again at ``continuation`` (or ``start_from``), as a new lease would start."""
        try:
            return self._write(
                lease,
                "reviving it",
                state=ACTIVE,
                children=(),
                continuation=continuation,
                start_from=start_from,
                checkpointed_at=None,
                suspension=suspension or SuspensionState(),
                owner=None,
                expires_at=None,
            )
        except LeaseLostError:
            return self.get(lease.id)  # another listing revived it first

    def retire(self, lease: Lease, state: str, successors: list[FeedRange], action: str) -> bool:
        """Mark ``lease`` retired, conditionally on the version read; ``False`` if it changed meanwhile (a drain took
        it, or another listing retired it first)."""
        try:
            self._write(
                lease,
                action,
                state=state,
                children=tuple(c.token for c in successors),
                owner=None,
                expires_at=None,
            )
        except LeaseLostError:
            return False
        return True

    # ------------------------------------------------------------------ ownership

    def acquire(self, lease_id: str) -> Lease:
        """Take a free, expired or already-ours lease; ``LeaseHeldError`` if another drain holds it."""
        lease = self.get(lease_id)
        now = self.now()
        if lease.is_live(now) and lease.owner != self.owner:
            assert lease.owner is not None
            raise LeaseHeldError(lease.id, lease.owner, lease.expires_at)
        try:
            return self._write(lease, "acquiring it", owner=self.owner, expires_at=now + self.lease_duration)
        except LeaseLostError:
            winner = self.get(lease_id)
            raise LeaseHeldError(lease_id, winner.owner or "<unknown>", winner.expires_at) from None

    def renew(self, lease: Lease) -> Lease:
        """Extend our ownership; ``LeaseLostError`` if another drain took the lease meanwhile."""
        return self._write(lease, "renewing it", owner=self.owner, expires_at=self.now() + self.lease_duration)

    def needs_renewal(self, lease: Lease) -> bool:
        """Whether less than half the lease duration is left (renew before it can expire mid-page)."""
        if lease.expires_at is None:
            return True
        return lease.expires_at - self.now() < self.lease_duration / 2

    def checkpoint(self, lease: Lease, continuation: str, suspension: SuspensionState | None = None) -> Lease:
        """Record the continuation after a confirmed page (and renew); conditional on our ETag."""
        now = self.now()
        changes: dict[str, Any] = {
            "continuation": continuation,
            "checkpointed_at": now,
            "expires_at": now + self.lease_duration,
            "owner": self.owner,
        }
        if suspension is not None:
            changes["suspension"] = suspension
        return self._write(lease, "checkpointing", **changes)

    def save_suspension(self, lease: Lease, suspension: SuspensionState) -> Lease:
        """Persist the Drain Suspension state (F-05); conditional on our ETag."""
        if suspension == lease.suspension:
            return lease
        return self._write(lease, "saving its suspension state", suspension=suspension)

    def release(self, lease: Lease, *, run_tries: Mapping[str, Any] | None = None) -> Lease | None:
        """Give the lease up so the next drain need not wait for the expiry; ``None`` if already lost.

        ``run_tries`` (``drain/tries.py``) is written with it: the tries of the task run that drained it."""
        if lease.owner != self.owner:
            return None
        if run_tries is not None:
            lease = replace(lease, document={**lease.document, RUN_TRIES_FIELD: dict(run_tries)})
        try:
            return self._write(lease, "releasing it", owner=None, expires_at=None)
        except LeaseLostError:
            return None

    def delete(self, lease: Lease) -> None:
        """Delete a lease no drain holds, conditionally on the version read (a reset: the range starts afresh).

        ``LeaseHeldError`` if it is live by this store's clock (whoever owns it: its drain carries on with it),
        ``LeaseLostError`` if it changed or went since it was read (the newer version is kept).
        """
        if lease.is_live(self.now()):
            raise LeaseHeldError(lease.id, lease.owner or "<unknown>", lease.expires_at)
        try:
            self.container.delete(lease.id, lease.id, if_match=lease.etag)
        except (PreconditionFailed, NotFound):
            raise LeaseLostError(lease.id, "deleting it") from None

    # ------------------------------------------------------------------ plumbing

    def _write(self, lease: Lease, action: str, **changes: Any) -> Lease:
        updated = replace(lease, updated_at=self.now(), **changes)
        try:
            written = self.container.replace(lease.id, lease.id, updated.to_document(), if_match=lease.etag)
        except (PreconditionFailed, NotFound):
            raise LeaseLostError(lease.id, action) from None
        return Lease.from_document(written, lease.id)

    def now(self) -> datetime:
        """The store's clock, in UTC: what decides expiry and stamps every lease write."""
        return self._clock().astimezone(UTC)


def _is_ours(doc: object, store: LeaseStore) -> bool:
    # The query filters already; this keeps a permissive adapter's extra rows out.
    return (
        isinstance(doc, Mapping)
        and doc.get("processor") == store.processor_name
        and (doc.get("lease_prefix") or "") == store.lease_prefix
    )


def _required_str(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _optional_str(doc: Mapping[str, Any], name: str) -> str | None:
    value = doc.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or null, got {value!r}")
    return value


def _start_from(value: object) -> datetime | None:
    """Validate ``LeaseStore(start_from=...)``: an aware datetime, as UTC floored to the second (see LeaseStore)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ConfigurationError("start_from", value, "must be a datetime (UTC) or None")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError("start_from", value, "must be timezone-aware (UTC); a naive datetime is ambiguous")
    return value.astimezone(UTC).replace(microsecond=0)


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None
