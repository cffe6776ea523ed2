"""What an operator does from the monitoring page: requeue the undeliverable documents they looked at, and release a
stuck lease. Each is conditional on the version the operator saw (its ETag), so an action taken on a stale page
changes nothing it did not show. No Airflow here; the plugin checks who may act and logs who did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_chatter.drain.leases import Lease, LeaseStore
from airflow_chatter.errors import ChatterError
from airflow_chatter.operations.outbox_queries import select_undeliverable
from airflow_chatter.operations.requeue import RequeueResult, requeue_undeliverable
from airflow_chatter.outbox.document import DELIVERED, PENDING
from airflow_chatter.ports import DocumentContainer, NotFound

#: Most documents one requeue request may name.
MAX_REQUEUE = 100


@dataclass(frozen=True)
class Selected:
    """A document the operator selected: its item id and the ETag the page showed (required: the requeue is
    conditional on it, so a stale page changes nothing)."""

    id: str
    etag: str


def requeue_selected(
    container: DocumentContainer, partition_key_paths: Sequence[str], selection: Sequence[Selected]
) -> RequeueResult:
    """Set the selected undeliverable documents back to pending (the core requeue, ETag-conditional).

    A document whose current ETag is not the one the operator saw has changed since the page was drawn: it is
    left alone and reported in ``changed_meanwhile``; an id that is pending already (a repeated requeue) in
    ``already_pending``; one delivered already (nothing to requeue: it went out) in ``already_delivered``; any other
    id that is not undeliverable in ``not_found``.
    """
    if not selection:
        raise ChatterError("select at least one document to requeue")
    if len(selection) > MAX_REQUEUE:
        raise ChatterError(f"at most {MAX_REQUEUE} documents per requeue, got {len(selection)}")
    ids = list(dict.fromkeys(item.id for item in selection))
    seen = {item.id: item.etag for item in selection}
    found = select_undeliverable(container, document_ids=ids, limit=len(ids))
    current = [d for d in found if seen.get(d["id"]) == d.get("_etag")]
    stale = tuple(d["id"] for d in found if d not in current)
    result = requeue_undeliverable(container, partition_key_paths, current, requested=ids)
    missing = [i for i in ids if i not in {d["id"] for d in found}]
    pending = _with_status(container, missing, PENDING)
    delivered = _with_status(container, [i for i in missing if i not in pending], DELIVERED)
    return RequeueResult(
        result.requeued,
        result.changed_meanwhile + stale,
        tuple(i for i in missing if i not in pending and i not in delivered),
        tuple(i for i in missing if i in pending),
        tuple(i for i in missing if i in delivered),
    )


def _with_status(container: DocumentContainer, ids: Sequence[str], status: str) -> set[str]:
    found = select_undeliverable(container, document_ids=ids, limit=len(ids), status=status) if ids else []
    return {d["id"] for d in found}


class LeaseChangedError(ChatterError):
    """The lease is not the version the operator saw; nothing was changed."""


class NoSuchLeaseError(ChatterError):
    """No lease has this id (never had, or deleted since): nothing to release."""


@dataclass(frozen=True)
class Released:
    lease_id: str
    previous_owner: str | None
    previous_expiry: str | None
    released: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease_id,
            "previous_owner": self.previous_owner,
            "previous_expiry": self.previous_expiry,
            "released": self.released,
        }


def release_lease(store: LeaseStore, lease_id: str, *, expected_etag: str) -> Released:
    """Clear a lease's owner and expiry so the next drain takes it at once, instead of waiting for the expiry.

    For a lease whose worker died (a stuck lease). Written through ``LeaseStore`` as the owner it shows
    (``release``: conditional on the ETag read), so a drain that renewed or checkpointed it meanwhile wins and this
    raises ``LeaseChangedError``; its continuation and Drain Suspension state are untouched.
    """
    try:
        lease = store.get(lease_id)
    except NotFound:
        raise NoSuchLeaseError(f"Lease {lease_id!r} does not exist") from None
    if lease.etag != expected_etag:
        raise LeaseChangedError(f"Lease {lease_id!r} changed since it was shown; reload and try again")
    if lease.owner is None:
        return Released(lease.id, None, None, released=False)
    as_owner = LeaseStore(
        store.container,
        store.processor_name,
        owner=lease.owner,
        lease_prefix=store.lease_prefix,
        lease_duration_seconds=store.lease_duration.total_seconds(),
        clock=store.clock,
    )
    done: Lease | None = as_owner.release(lease)
    if done is None:
        raise LeaseChangedError(f"Lease {lease_id!r} was written by its drain meanwhile; reload and try again")
    return Released(lease.id, lease.owner, _iso(lease), released=True)


def _iso(lease: Lease) -> str | None:
    return lease.expires_at.isoformat() if lease.expires_at is not None else None
