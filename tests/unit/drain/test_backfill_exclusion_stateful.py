"""F-04 for a backfill: a scheduled drain and a backfill (its own lease set, reset to read from the beginning) never
drain one range at the same time, while the feed ranges change under both. A stateful hypothesis test.

The backfill drains each of its leases inside ``exclusive_with`` (what ``ChatterDrainOperator`` does with
``exclusive_with_scheduled=True``), holding the scheduled leases of that range. Either drain may run while the other
is inside its publish. No message may be published twice, and in the end every document is delivered.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from airflow_chatter.drain.leases import LeaseHeldError
from airflow_chatter.errors import ChatterError
from airflow_chatter.operations.backfill import exclusive_with
from airflow_chatter.operations.plans import reset_leases
from airflow_chatter.ports import Document
from airflow_chatter.testing.fakes import FakePublisher

from ._drain_support import Rig, outbox_doc
from ._stateful_support import (
    MeanwhilePublisher,
    assert_published_once,
    assert_tiles_key_space,
    merge_two,
    published_ids,
    split_one,
    stateful_settings,
)

TENANTS = 8


class ScheduledAndBackfill(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = Rig()
        self.scheduled_publisher = MeanwhilePublisher()
        self.backfill_publisher = MeanwhilePublisher()
        self.scheduled = self.rig.engine(self.scheduled_publisher, owner="scheduled", max_batch_size=3)
        self.backfill = self.rig.engine(
            self.backfill_publisher, owner="backfill", max_batch_size=3, lease_prefix="backfill-"
        )
        self.docs: dict[str, Document] = {}
        self.running: set[str] = set()

    # ------------------------------------------------------------------ the world

    @rule(tenants=st.lists(st.integers(0, TENANTS - 1), min_size=1, max_size=5))
    def write(self, tenants: list[int]) -> None:
        for tenant in tenants:
            message_id = f"m-{len(self.docs)}"
            self.docs[message_id] = self.rig.seed(outbox_doc(message_id, f"tenant-{tenant}"))[0]

    @rule(pick=st.integers(0, 31), merge=st.booleans())
    def the_ranges_change(self, pick: int, merge: bool) -> None:
        if merge:
            merge_two(self.rig.monitored, pick)
        else:
            split_one(self.rig.monitored, pick, max_ranges=6)

    # ------------------------------------------------------------------ the two drains

    def _scheduled_run(self) -> None:
        if self._enter("scheduled"):
            try:
                self.scheduled.drain_all(max_documents=4)
            finally:
                self.running.discard("scheduled")

    def _backfill_run(self) -> None:
        if self._enter("backfill"):
            try:
                self._backfill_leases()
            finally:
                self.running.discard("backfill")

    def _enter(self, name: str) -> bool:
        """Whether drain ``name`` may start: not while it is already running (a queued action reached from inside
        its own publish, through the other drain). One owner never runs inside itself; each Airflow task has its
        own owner (dag.task[map_index]@instance)."""
        if name in self.running:
            return False
        self.running.add(name)
        return True

    def _backfill_leases(self) -> None:
        for lease in self.backfill.ensure_leases():
            try:
                with exclusive_with(self.backfill, lease.id, other_prefix="", hold_seconds=120):
                    self.backfill.drain_lease(lease.id, max_documents=4)
            except (LeaseHeldError, ChatterError):
                pass  # the scheduled drain owns (part of) the range now, or has no lease on it yet: next time

    @rule()
    def scheduled_runs(self) -> None:
        self._scheduled_run()
        self.scheduled_publisher.queued.clear()

    @rule()
    def backfill_runs(self) -> None:
        self._backfill_run()
        self.backfill_publisher.queued.clear()

    @rule()
    def the_backfill_is_reset_to_the_beginning(self) -> None:
        reset_leases(self.backfill.store)

    @rule(backfill_inside_scheduled=st.booleans())
    def meanwhile(self, backfill_inside_scheduled: bool) -> None:
        if backfill_inside_scheduled:
            self.scheduled_publisher.queued.append(self._backfill_run)
        else:
            self.backfill_publisher.queued.append(self._scheduled_run)

    # ------------------------------------------------------------------ what always holds

    def _sent(self) -> list[str]:
        return published_ids(self.scheduled_publisher, self.backfill_publisher)

    @invariant()
    def no_message_is_published_twice(self) -> None:
        assert_published_once(self._sent())

    @invariant()
    def between_runs_a_listing_tiles_the_key_space(self) -> None:
        # No drain runs between two steps, so no lease is held: every lease set must cover each key exactly once.
        for engine in (self.scheduled, self.backfill):
            assert_tiles_key_space([lease.feed_range for lease in engine.ensure_leases()])

    def teardown(self) -> None:
        self.scheduled_publisher.queued.clear()
        self.backfill_publisher.queued.clear()
        for _ in range(3):
            for summary in self.scheduled.drain_all():
                summary.raise_for_error()
        assert sorted(self._sent()) == sorted(self.docs), "every document published, once"


ScheduledAndBackfill.TestCase.settings = stateful_settings("CHATTER_BACKFILL_EXAMPLES", 25)
test_f04_a_backfill_and_the_scheduled_drain_never_publish_a_document_twice = ScheduledAndBackfill.TestCase


def test_f04_the_exclusion_judges_the_scheduled_leases_by_the_engines_clock() -> None:
    # The rig's clock is hours behind the wall clock: a scheduled lease live by it must still hold the backfill off
    # (judged by the wall clock it looked expired and was taken over mid-drain).
    rig = Rig()
    scheduled = rig.engine(owner="scheduled")
    backfill = rig.engine(FakePublisher(), owner="backfill", lease_prefix="backfill-")
    rig.seed(outbox_doc("m-0", "tenant-0"))
    (scheduled_lease,) = scheduled.ensure_leases()
    scheduled.store.acquire(scheduled_lease.id)  # the scheduled drain is running
    (backfill_lease,) = backfill.ensure_leases()
    with pytest.raises(LeaseHeldError):
        with exclusive_with(backfill, backfill_lease.id, other_prefix="", hold_seconds=120):
            pass
