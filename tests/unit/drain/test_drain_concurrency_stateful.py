"""F-04 ownership under interleaving: two drains (a scheduled one and a backfill-like second owner of the same lease
set) and the feed ranges changing while a drain is between its publish and its stamps. A stateful hypothesis test.

While drain A has a page in flight (inside its ``send_batch``, or between its stamps), anything may happen: drain B
runs, a listing runs, a range splits or merges, a little time passes (less than the lease duration, so A still owns
what it holds). Ownership must keep the two drains apart: no message is ever published twice, a document is stamped
``delivered`` only after a publish, and in the end every document is delivered.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from airflow_chatter.ports import Document
from airflow_chatter.testing.fakes import FakePublisher

from ._drain_support import Rig, outbox_doc
from ._stateful_support import (
    MeanwhilePublisher,
    StampPoint,
    assert_published_once,
    assert_tiles_key_space,
    merge_two,
    published_ids,
    split_one,
    stateful_settings,
)

TENANTS = 8


class TwoDrains(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = Rig()
        self.stamps = StampPoint(partition_key_paths=("/tenantId",), default_ttl=-1, clock=self.rig.clock)
        self.rig.monitored = self.stamps
        self.a_publisher = MeanwhilePublisher()
        self.b_publisher = FakePublisher()
        self.a = self.rig.engine(self.a_publisher, owner="a", max_batch_size=3)
        self.b = self.rig.engine(self.b_publisher, owner="b", max_batch_size=3)
        self.docs: dict[str, Document] = {}

    # ------------------------------------------------------------------ the world

    @rule(tenants=st.lists(st.integers(0, TENANTS - 1), min_size=1, max_size=5))
    def write(self, tenants: list[int]) -> None:
        for tenant in tenants:
            message_id = f"m-{len(self.docs)}"
            self.docs[message_id] = self.rig.seed(outbox_doc(message_id, f"tenant-{tenant}"))[0]

    def _split(self, pick: int) -> None:
        split_one(self.stamps, pick, max_ranges=6)

    def _merge(self, pick: int) -> None:
        merge_two(self.stamps, pick)

    @rule(pick=st.integers(0, 31), merge=st.booleans())
    def the_ranges_change(self, pick: int, merge: bool) -> None:
        (self._merge if merge else self._split)(pick)

    # ------------------------------------------------------------------ what happens while A has a page in flight

    @rule(
        actions=st.lists(
            st.sampled_from(["b drains", "b lists", "split", "merge", "10 s pass"]), min_size=1, max_size=3
        ),
        pick=st.integers(0, 31),
        during=st.sampled_from(["publish", "stamp"]),
    )
    def meanwhile(self, actions: list[str], pick: int, during: str) -> None:
        do: dict[str, Callable[[], object]] = {
            "b drains": lambda: self._as_b(lambda: self.b.drain_all(max_documents=4)),
            "b lists": lambda: self._as_b(self.b.ensure_leases),
            "split": lambda: self._split(pick),
            "merge": lambda: self._merge(pick),
            "10 s pass": lambda: self.rig.clock.advance(10),
        }
        queue = self.a_publisher.queued if during == "publish" else self.stamps.queued
        queue.extend(do[action] for action in actions)  # type: ignore[misc]

    @rule(budget=st.one_of(st.none(), st.integers(1, 5)))
    def a_drains(self, budget: int | None) -> None:
        self.a.drain_all(max_documents=budget)
        # Actions A never got to (it published or stamped nothing) do not carry over to B's drains.
        self.a_publisher.queued.clear()
        self.stamps.queued.clear()

    @rule(budget=st.one_of(st.none(), st.integers(1, 5)))
    def b_drains(self, budget: int | None) -> None:
        self._as_b(lambda: self.b.drain_all(max_documents=budget))

    def _as_b(self, action: Callable[[], object]) -> None:
        """Run ``action`` as drain B: the actions queued for A's stamps must not run inside B's own stamps (B would
        then run inside itself, as the same owner, which no real drain does)."""
        queued, self.stamps.queued = self.stamps.queued, []
        try:
            action()
        finally:
            self.stamps.queued = queued + self.stamps.queued

    # ------------------------------------------------------------------ what always holds

    def _sent(self) -> list[str]:
        return published_ids(self.a_publisher, self.b_publisher)

    @invariant()
    def no_message_is_published_twice(self) -> None:
        assert_published_once(self._sent())

    @invariant()
    def stamped_delivered_only_after_a_publish(self) -> None:
        sent = set(self._sent())
        for message_id, doc in self.docs.items():
            if self.rig.current(doc)["status"] == "delivered":
                assert message_id in sent, message_id

    @invariant()
    def between_runs_a_listing_tiles_the_key_space(self) -> None:
        # No drain runs between two steps, so no lease is held: the lease set must cover each key exactly once.
        assert_tiles_key_space([lease.feed_range for lease in self.a.ensure_leases()])

    def teardown(self) -> None:
        self.a_publisher.queued.clear()
        self.stamps.queued.clear()
        for _ in range(3):
            for engine in (self.a, self.b):
                for summary in engine.drain_all():
                    summary.raise_for_error()
        assert sorted(self._sent()) == sorted(self.docs), "every document published, once"
        assert {self.rig.current(doc)["status"] for doc in self.docs.values()} <= {"delivered"}


TwoDrains.TestCase.settings = stateful_settings("CHATTER_CONCURRENCY_EXAMPLES", 25)
test_f04_two_drains_and_changing_ranges_never_publish_a_document_twice = TwoDrains.TestCase
