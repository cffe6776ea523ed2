"""The backfill exclusion: a backfill and the scheduled drain never own one feed range at once; and the refusal of
a backfill request that would match nothing."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import datetime

from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import ACTIVE, Lease, LeaseStore
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.errors import ChatterError, ConfigurationError
from airflow_chatter.ports import DocumentContainer, FeedRange

#: Longest a backfill may hold the scheduled lease of a range beyond its own time budget; after that
#: the hold expires by itself even if the worker died.
BACKFILL_HOLD_MARGIN_SECONDS = 60.0


def refuse_future_start(since: datetime | None, now: datetime, *, field: str = "since") -> None:
    """A backfill's start after ``now`` reads nothing: refused naming ``field`` (the request's name for it)."""
    if since is not None and since > now:
        raise ConfigurationError(
            field,
            since.isoformat(),
            f"(the backfill's start) is in the future (now {now.isoformat()}): nothing to read",
        )


def refuse_unknown_ranges(wanted: Collection[str], tokens: Collection[str], lease_ids: Collection[str]) -> None:
    """A ``feed_ranges`` entry that is neither a feed range token nor a lease id of the source would silently drain
    less: refused naming ``feed_ranges``."""
    unknown = sorted(set(wanted) - set(tokens) - set(lease_ids))
    if unknown:
        raise ConfigurationError(
            "feed_ranges", unknown, f"match no feed range token or lease id of the source (tokens: {sorted(tokens)})"
        )


def refuse_backfill_request(
    monitored: DocumentContainer,
    backfill_leases: LeaseStore,
    *,
    wanted: Collection[str],
) -> None:
    """``refuse_unknown_ranges`` for a request about to become a run (the plugin's form, Airflow's trigger form and
    REST): the source's feed ranges and its backfill lease set's ids are read only when ``wanted`` needs them."""
    if not wanted:
        return
    tokens = [feed_range.token for feed_range in monitored.read_feed_ranges()]
    lease_ids = [lease.id for lease in backfill_leases.list_leases()] if set(wanted) - set(tokens) else []
    refuse_unknown_ranges(wanted, tokens, lease_ids)


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
