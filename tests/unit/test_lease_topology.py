"""F-04 under any sequence of splits, merges, writes and (partial) drains: a stateful hypothesis test.

Whatever the feed ranges do, the active leases of a source must tile the key space (no gap: a change nobody drains;
no overlap: a change two drains publish), and the drain must publish every pending document exactly once. The
in-memory container splits a range at its EPK midpoint and merges two adjacent ranges, as partitions do.
``CHATTER_TOPOLOGY_EXAMPLES`` (default 60) asks for a longer search.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from airflow_chatter.adapters.memory import EPK_SPACE
from airflow_chatter.leases import ACTIVE
from airflow_chatter.ports import FeedRange

from ._drain_support import Rig, outbox_doc

TENANTS = 16


def _bounds(feed_range: FeedRange) -> tuple[int, int]:
    span = json.loads(feed_range.token)["Range"]
    return int(span["min"], 16), int(span["max"], 16)


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
        ranges = self.rig.monitored.read_feed_ranges()
        low, high = _bounds(ranges[pick % len(ranges)])
        if high - low >= 2 and len(ranges) < 12:
            self.rig.monitored.split_feed_range(ranges[pick % len(ranges)])

    @precondition(lambda self: len(self.rig.monitored.read_feed_ranges()) > 1)
    @rule(pick=st.integers(0, 63))
    def merge(self, pick: int) -> None:
        ranges = sorted(self.rig.monitored.read_feed_ranges(), key=_bounds)
        first = pick % (len(ranges) - 1)
        self.rig.monitored.merge_feed_ranges(ranges[first], ranges[first + 1])

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
        ids = [dict(m.headers)["message-id"].decode() for m in self.rig.publisher.sent]
        assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)

    @invariant()
    def a_listing_leaves_active_leases_that_tile_the_key_space(self) -> None:
        spans = sorted(_bounds(lease.feed_range) for lease in self.engine.ensure_leases())
        edge = 0
        for low, high in spans:
            assert low == edge, f"{'gap' if low > edge else 'overlap'} at {edge:#x}: {spans}"
            edge = high
        assert edge == EPK_SPACE, spans
        stored = sorted(_bounds(lease.feed_range) for lease in self.engine.store.list_leases() if lease.state == ACTIVE)
        assert stored == spans, "every active lease is one the listing returns"

    def teardown(self) -> None:
        for _ in range(2):
            for summary in self.engine.drain_all():
                summary.raise_for_error()
        ids = [dict(m.headers)["message-id"].decode() for m in self.rig.publisher.sent]
        assert sorted(ids) == sorted(self.written), "every pending document published, exactly once"


LeaseTopology.TestCase.settings = settings(
    max_examples=int(os.environ.get("CHATTER_TOPOLOGY_EXAMPLES", "60")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_f04_leases_follow_any_sequence_of_splits_and_merges = LeaseTopology.TestCase
