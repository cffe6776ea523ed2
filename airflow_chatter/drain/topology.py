"""Lease topology: which leases a source needs as the monitored container's feed ranges split and merge (F-04).

``LeaseStore`` (``drain/leases.py``) owns the lease documents, their ownership and checkpoints, and every write
to them; this module decides, from the container's current feed ranges, which leases must exist, which retire
(split, merged) and where each new one starts, and asks the store to write that. It reads the ranges' EPK bounds
through ``FeedRange.epk_bounds`` (the one definition of the token format, in ``ports``) and compares them
through the container (``feed_range_overlap``, ``is_feed_range_subset``) where it can.

INVARIANT: no document is skipped or lost across a split or a merge: every successor starts at its
predecessor's position (or re-reads, never skips, where the positions cannot be carried over).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from airflow_chatter.drain.leases import ACTIVE, MERGED, SPLIT, Lease, LeaseLostError, LeaseStore
from airflow_chatter.ports import BadRequest, DocumentContainer, FeedRange, FeedRangeGone


class LeaseTopology:
    """The leases of one source (``store``) kept in step with the feed ranges of its ``monitored`` container."""

    def __init__(self, store: LeaseStore, monitored: DocumentContainer) -> None:
        self.store = store
        self.monitored = monitored

    def ensure_leases(self) -> list[Lease]:
        """Create a lease for every current feed range that has none; return the active leases.

        A lease whose range now spans several current ranges split: it is marked split, then replaced by its share
        of each, every share starting from its continuation (or, never checkpointed, its start). A share is the
        current range itself when that lies inside the lease (a plain split), and their overlap otherwise (a merged
        range split again at a boundary other than its parts').

        A new range that contains active leases of this source is a merge. When those leases tile it exactly, no
        lease is created: each keeps draining its own part from its own continuation (a sub-range of a physical
        partition stays readable, as the Change Feed Processor's leases do), so a merge costs no re-read. When
        they do not (a part never had a lease, or the ranges cannot be compared), the merged range gets a lease
        that starts like any new range and the partial leases are marked merged: a re-read, never a gap.

        A new range with neither starts at the store's ``start_from``, or at the beginning of the change feed
        without one (RLY-08).

        Nothing that overlaps a lease another live drain holds is created or retired: a successor would be
        drainable at once and read what that drain has in flight. Such a lease stays as it is (and is what this
        listing returns for its ranges) until a listing after its holder let go. A lease is retired before its
        successors exist, conditionally on the version read, so a drain that takes it meanwhile keeps it whole.

        A range can come back: a split merged back to the same bounds, a merge split back along its parts' edges.
        Its lease id is the range's, so its retired lease carries on rather than a new one: as a merge's parts
        when they tile it, otherwise revived at its own last position (a split's leftover) or at its parent's
        position (a share of a lease that split). Without that, the range would be left with no active lease and
        its changes would never be drained.
        """
        ranges = self.monitored.read_feed_ranges(force_refresh=True)
        known = {lease.token: lease for lease in self.store.list_leases()}
        now = self.store.now()
        held = self._split_spanning(ranges, known, now)
        served: dict[str, list[Lease]] = {}  # a range drained by other leases than its own: merge parts, held ones
        for feed_range in ranges:
            own = known.get(feed_range.token)
            if own is None or own.state != ACTIVE:
                serving = self._settle(feed_range, own, ranges, known, held, now)
                if serving is not None:
                    served[feed_range.token] = serving
        self._retire_split_leftovers(ranges, known, served, now)
        leases: list[Lease] = []
        for feed_range in ranges:
            if feed_range.token in served:
                leases.extend(served[feed_range.token])
            else:
                leases.append(self.store.get(self.store.lease_id(feed_range)))
        return list({lease.id: lease for lease in leases if lease.state == ACTIVE}.values())

    def _split_spanning(self, ranges: list[FeedRange], known: dict[str, Lease], now: datetime) -> list[Lease]:
        """Replace each active lease whose range now spans several current ranges by its shares (updating
        ``known``); return those another live drain holds, which stay as they are for now."""
        current = {r.token for r in ranges}
        held: list[Lease] = []
        for lease in list(known.values()):
            if lease.state != ACTIVE or lease.token in current:
                continue
            shares = self._shares(lease, ranges)
            if len(shares) < 2:
                continue  # inside one current range (a merge's part: settled with that range), or not comparable
            # Retired first, conditionally on what was read: if a drain took the lease meanwhile, it stays as it is.
            if self.store.held_elsewhere(lease, now) or not self.store.retire(lease, SPLIT, shares, "marking it split"):
                held.append(lease)
                continue
            del known[lease.token]
            for share in shares:
                if share.token not in known or known[share.token].state != ACTIVE:
                    known[share.token] = self.store.create(
                        share, lease.continuation, lease.start_from, lease.suspension
                    )
        return held

    def _settle(
        self,
        feed_range: FeedRange,
        own: Lease | None,
        ranges: list[FeedRange],
        known: dict[str, Lease],
        held: list[Lease],
        now: datetime,
    ) -> list[Lease] | None:
        """Give a current range without an active lease of its own what drains it: ``None`` once its own lease is
        active (created or revived, in ``known``), else the leases that drain it instead."""
        blocking = [lease for lease in held if self._overlaps(lease.feed_range, feed_range)]
        if blocking:
            return blocking
        parent = self._parent_of(feed_range, known.values())
        if parent is not None:
            # A split found through is_feed_range_subset only (the tokens' overlap cannot be computed).
            return self._split_contained(parent, ranges, known, now)
        if own is None:
            parent = _split_parent_of(feed_range, known.values())
        if parent is not None:
            known[feed_range.token] = self.store.create(
                feed_range, parent.continuation, parent.start_from, parent.suspension
            )
            return None
        parts = [
            lease
            for lease in known.values()
            if lease.state == ACTIVE and _is_child(self.monitored, feed_range, lease.feed_range)
        ]
        if parts and _tiles(feed_range, [part.feed_range for part in parts]):
            return [self.store.get(part.id) for part in parts]
        # The parts do not cover the range: they retire (each conditionally) before the range's own lease exists, so
        # the two never drain at the same time; while a drain holds one of them, the range stays as it is.
        if any(self.store.held_elsewhere(part, now) for part in parts) or not all(
            [self.store.retire(part, MERGED, [feed_range], "marking it merged") for part in parts]
        ):
            return [lease for lease in (self.store.get(part.id) for part in parts) if lease.state == ACTIVE]
        if own is not None:
            # A range with a retired lease (it split, and its parts merged back without tiling it): that lease
            # resumes from where it stopped, before anything its successors read, so nothing is skipped.
            known[feed_range.token] = self.store.revive(own, own.continuation, own.start_from)
        else:
            known[feed_range.token] = self.store.create(feed_range, None, self.store.start_from)
        return None

    def _split_contained(
        self, parent: Lease, ranges: list[FeedRange], known: dict[str, Lease], now: datetime
    ) -> list[Lease] | None:
        """Replace an active ``parent`` by the current ranges inside it, as ``_split_spanning`` does: retired first
        (conditionally, naming its children), then each child created from its position; ``None`` once they are in
        ``known``, else the lease that still drains them (another drain holds or took the parent).

        In this order no two active leases ever cover one range. A listing that stops after the retirement leaves
        the parent split with its children recorded, and the next one creates those still missing from its
        position (``_split_parent_of``); creating one that exists returns it, so nothing is skipped or doubled.
        """
        if self.store.held_elsewhere(parent, now):
            return [parent]
        children = [r for r in ranges if _is_child(self.monitored, parent.feed_range, r)]
        retired = self.store.retire(parent, SPLIT, children, "marking it split")
        parent = known[parent.token] = self.store.get(parent.id)
        if not retired and parent.state == ACTIVE:
            return [parent]  # a drain took it meanwhile: it stays whole until a listing after it let go
        if parent.state != SPLIT:
            return []  # another listing retired it otherwise meanwhile: the next listing settles the range
        for child in children:
            if child.token not in known or known[child.token].state != ACTIVE:
                known[child.token] = self.store.create(child, parent.continuation, parent.start_from, parent.suspension)
        return None

    def _retire_split_leftovers(
        self,
        ranges: list[FeedRange],
        known: dict[str, Lease],
        served: dict[str, list[Lease]],
        now: datetime,
    ) -> None:
        """Retire, as split, an active lease no current range is, whose children all have active leases already
        (``_split_contained`` met none of them without one): a state a listing of an older release could leave."""
        current = {r.token for r in ranges}
        serving = {lease.token for leases in served.values() for lease in leases}
        for lease in list(known.values()):
            if (
                lease.state == ACTIVE
                and lease.token not in current
                and lease.token not in serving
                and not self.store.held_elsewhere(lease, now)
            ):
                children = [r for r in ranges if _is_child(self.monitored, lease.feed_range, r)]
                if children:
                    self.store.retire(lease, SPLIT, children, "marking it split")

    def split(self, lease: Lease, gone: FeedRangeGone) -> list[Lease]:
        """Replace a gone range by its children, each starting from the parent's continuation.

        INVARIANT: no document is skipped or lost across a split, because every child starts at the
        parent's last checkpoint (tests/unit/drain/test_leases.py::test_f04_split_children_resume_from_parent;
        starting a child from ``None`` or from "now" would make that test fail). A parent never
        checkpointed has no checkpoint to hand on: its children take its ``start_from`` instead, not
        this store's, so a point-in-time lease keeps its start and a beginning lease keeps the beginning.
        """
        ranges = self.monitored.read_feed_ranges(force_refresh=True)
        children = self._shares(lease, ranges) or [r for r in ranges if _is_child(self.monitored, lease.feed_range, r)]
        if not children:
            raise gone  # the range is gone but nothing replaces it: let the caller report it
        # Retired first (the caller holds it): a drain of a child never overlaps one of the parent.
        if not self.store.retire(lease, SPLIT, children, "marking it split"):
            raise LeaseLostError(lease.id, "marking it split")
        return [self.store.create(child, lease.continuation, lease.start_from, lease.suspension) for child in children]

    def _overlaps(self, a: FeedRange, b: FeedRange) -> bool:
        try:
            return self.monitored.feed_range_overlap(a, b) is not None
        except BadRequest:
            return self.monitored.is_feed_range_subset(a, b) or self.monitored.is_feed_range_subset(b, a)

    def _shares(self, lease: Lease, ranges: list[FeedRange]) -> list[FeedRange]:
        """The lease's share of each current range it overlaps, in the ranges' order; ``[]`` when its range is
        itself current or its token cannot be compared.

        A share is the current range itself when that lies inside the lease (a plain split), and the overlap
        otherwise: a merged range split again at a boundary other than its parts' cuts a part in two, and each
        piece carries on from the part's continuation inside its new range, so nothing is read twice or skipped.
        """
        try:
            overlaps = [self.monitored.feed_range_overlap(lease.feed_range, r) for r in ranges]
        except BadRequest:
            return []
        shares = [share for share in overlaps if share is not None]
        return [] if any(share.token == lease.token for share in shares) else shares

    def _parent_of(self, child: FeedRange, leases: Iterable[Lease]) -> Lease | None:
        for lease in leases:
            if lease.state == ACTIVE and _is_child(self.monitored, lease.feed_range, child):
                return lease
        return None


def _split_parent_of(child: FeedRange, leases: Iterable[Lease]) -> Lease | None:
    """A lease retired as split that names ``child`` among its successors: a split whose listing stopped between
    retiring the parent and creating this child, which then starts from the parent's position all the same."""
    for lease in leases:
        if lease.state == SPLIT and child.token in lease.children:
            return lease
    return None


def _is_child(monitored: DocumentContainer, parent: FeedRange, candidate: FeedRange) -> bool:
    return candidate.token != parent.token and monitored.is_feed_range_subset(parent, candidate)


def _tiles(whole: FeedRange, parts: list[FeedRange]) -> bool:
    """Whether ``parts`` cover ``whole`` exactly, edge to edge, from the EPK bounds in the range tokens.

    EPK strings order as strings (see ``FeedRange``). A token not in the format: ``False``.
    """
    bounds = whole.epk_bounds()
    spans = [part.epk_bounds() for part in parts]
    if bounds is None or any(span is None for span in spans):
        return False
    edge = bounds[0]
    for low, high in sorted(span for span in spans if span is not None):
        if low != edge:
            return False
        edge = high
    return edge == bounds[1]


__all__ = ["LeaseTopology"]
