"""What listing a source's leases reports, and resetting a lease set so its next drain starts afresh."""

from __future__ import annotations

import logging
from typing import Any

from airflow_chatter.drain.leases import Lease, LeaseHeldError, LeaseLostError, LeaseStore

log = logging.getLogger(__name__)


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
