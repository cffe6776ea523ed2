"""Listing a source's leases for its drains (or planning it, in a dry run), what a listing reports, and resetting a
lease set so its next drain starts afresh."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_chatter.drain.leases import Lease, LeaseHeldError, LeaseLostError, LeaseStore
from airflow_chatter.drain.source import SourceLeases
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.backfill import refuse_future_start, refuse_unknown_ranges
from airflow_chatter.operations.outbox_queries import count_pending
from airflow_chatter.ports import DocumentContainer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseRequest:
    """What a listing of a source's leases is asked, its arguments parsed (the list-leases task's)."""

    source: str
    lease_prefix: str
    #: The scheduled lease set: never reset (its checkpoints are the drain's progress), never started late (RLY-08).
    scheduled: bool
    #: Feed range tokens or lease ids to keep; empty: every lease.
    feed_ranges: frozenset[str] = frozenset()
    #: Delete the lease set's idle leases first, so its drains start afresh (backfills only).
    reset: bool = False
    #: Where the leases created now start reading (backfills only); ``None``: the beginning.
    since: datetime | None = None
    #: A dry run: create nothing, return the plan.
    plan_only: bool = False


@dataclass(frozen=True)
class LeaseListing:
    """What a listing did: the leases chosen for the drains, or, in a dry run, only its ``plan`` (JSON-able); the
    lease ids a reset deleted; where the leases it created start reading (``None``: the beginning)."""

    leases: tuple[Lease, ...] = ()
    plan: dict[str, Any] | None = None
    reset: tuple[str, ...] = ()
    start_from: datetime | None = None


def list_leases(
    request: LeaseRequest,
    *,
    monitored: DocumentContainer,
    open_source: Callable[[], SourceLeases],
    now: datetime,
) -> LeaseListing:
    """Refuse what a listing must not do, naming the field, before anything is read or written; then plan it (a dry
    run, which refuses what the real run refuses) or create the missing leases and choose the wanted ones.

    Refused: a start in the future (nothing to read), a start or a reset of the scheduled lease set, and a
    ``feed_ranges`` entry that is neither a feed range token nor a lease id of the source (a typo would drain less,
    or nothing, and succeed), the last before a reset deletes anything. ``open_source`` opens the lease set (both
    containers verified, new leases starting at ``request.since``); a dry run opens it only to look up lease ids.
    """
    refuse_future_start(request.since, now)
    if request.scheduled:
        for field, asked, why in (
            ("since", request.since, "its new leases start at the beginning"),
            ("reset", request.reset, "it would drop its checkpoints"),
        ):
            if asked:
                shown = asked.isoformat() if isinstance(asked, datetime) else asked
                raise ConfigurationError(field, shown, f"is refused for the scheduled lease set ({why})")
    wanted = request.feed_ranges
    if request.plan_only:
        tokens = [r.token for r in monitored.read_feed_ranges(force_refresh=True)]
        if not wanted <= set(tokens):
            refuse_unknown_ranges(wanted, tokens, [lease.id for lease in open_source().store.list_leases()])
        plan = {
            "source": request.source,
            "lease_prefix": request.lease_prefix,
            "feed_ranges": [token for token in tokens if not wanted or token in wanted],
            "pending": count_pending(monitored, since=request.since),
            "since": request.since.isoformat() if request.since else None,
            "reset": request.reset,
        }
        return LeaseListing(plan=plan)
    source = open_source()
    tokens = [r.token for r in source.monitored.read_feed_ranges()]
    if not wanted <= set(tokens):
        refuse_unknown_ranges(wanted, tokens, [lease.id for lease in source.store.list_leases()])
    reset = tuple(reset_leases(source.store)) if request.reset else ()
    leases = source.topology.ensure_leases()
    chosen = tuple(lease for lease in leases if not wanted or lease.token in wanted or lease.id in wanted)
    return LeaseListing(leases=chosen, reset=reset, start_from=source.store.start_from)


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
