"""F-04 under any sequence of splits, merges, writes and (partial) drains: a stateful hypothesis test.

Whatever the feed ranges do, the active leases of a source must tile the key space (no gap: a change nobody drains;
no overlap: a change two drains publish), and the drain must publish every pending document exactly once. The
in-memory container splits a range at its EPK midpoint and merges two adjacent ranges, as partitions do.
``CHATTER_TOPOLOGY_EXAMPLES`` (default 60) asks for a longer search.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from airflow_chatter.drain.leases import ACTIVE

from ._drain_support import Rig, outbox_doc
from ._stateful_support import (
    assert_published_once,
    assert_tiles_key_space,
    epk_span,
    merge_two,
    published_ids,
    split_one,
    stateful_settings,
)

TENANTS = 16


class LeaseTopology(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = Rig()
        self.engine = self.rig.engine(max_batch_size=3)
        self.written: list[str] = []
        self.engine.ensure_leases()

    # ------------------------------------------------------------------ what happens to the container

    @rule(tenants=st.lists(st.integers(0, TENANTS - 1), min_size=1, max_size=6))
    def write(self, tenants: list[int]) -> None:
        for tenant in tenants:
            message_id = f"m-{len(self.written)}"
            self.rig.seed(outbox_doc(message_id, f"tenant-{tenant}"))
            self.written.append(message_id)

    @rule(pick=st.integers(0, 63))
    def split(self, pick: int) -> None:
        split_one(self.rig.monitored, pick, max_ranges=12)

    @precondition(lambda self: len(self.rig.monitored.read_feed_ranges()) > 1)
    @rule(pick=st.integers(0, 63))
    def merge(self, pick: int) -> None:
        merge_two(self.rig.monitored, pick)

    # ------------------------------------------------------------------ what the drains do

    @rule(budget=st.one_of(st.none(), st.integers(1, 4)))
    def drain_all(self, budget: int | None) -> None:
        for summary in self.engine.drain_all(max_documents=budget):
            summary.raise_for_error()

    @rule(pick=st.integers(0, 63))
    def drain_a_lease_without_listing_first(self, pick: int) -> None:
        # A task that was handed its lease id before the ranges changed: the read itself finds out.
        active = [lease for lease in self.engine.store.list_leases() if lease.state == ACTIVE]
        if active:
            self.engine.drain_lease(active[pick % len(active)].id, max_documents=4).raise_for_error()

    @rule()
    def list_leases(self) -> None:
        self.engine.ensure_leases()

    # ------------------------------------------------------------------ what must always hold

    @invariant()
    def nothing_is_published_twice(self) -> None:
        assert_published_once(published_ids(self.rig.publisher))

    @invariant()
    def a_listing_leaves_active_leases_that_tile_the_key_space(self) -> None:
        listed = [lease.feed_range for lease in self.engine.ensure_leases()]
        assert_tiles_key_space(listed)
        stored = [lease.feed_range for lease in self.engine.store.list_leases() if lease.state == ACTIVE]
        assert sorted(map(epk_span, stored)) == sorted(map(epk_span, listed)), "every active lease is one listed"

    def teardown(self) -> None:
        for _ in range(2):
            for summary in self.engine.drain_all():
                summary.raise_for_error()
        assert sorted(published_ids(self.rig.publisher)) == sorted(self.written), "every document published, once"


LeaseTopology.TestCase.settings = stateful_settings("CHATTER_TOPOLOGY_EXAMPLES", 25)
test_f04_leases_follow_any_sequence_of_splits_and_merges = LeaseTopology.TestCase
