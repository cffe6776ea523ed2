"""RLY-05..07, SUS, CTR-04 and F-04 together, under any interleaving of writes, faults, time and drains.

A stateful hypothesis test. Publishes fail, stamps fail (Confirmation Failures, which open Drain Suspensions),
change-feed reads fail, lease reads and writes fail (before or after they land), feed ranges split and merge, the
clock moves, drains run with and without budgets. At every step: a document is stamped ``delivered`` only if it was
published, a document that breaks the contract is never published, and a published message belongs to a document.
Once the faults stop and time passes, every well-formed document is delivered and every malformed one undeliverable:
nothing is stuck and nothing lost.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.page_run import ResolveContext
from airflow_chatter.ports import Document, OutgoingMessage, PublishError, ServiceUnavailable, Throttled
from airflow_chatter.testing.fakes import fail_all
from airflow_chatter.testing.handlers import first_of

from ._drain_support import Rig, clear_faults, fail_operation, outbox_doc
from ._stateful_support import merge_two, published_ids, split_one, stateful_settings

TENANTS = 6


class DrainUnderFaults(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = Rig()
        self.engine = self._engine()
        self.docs: dict[str, Document] = {}
        self.malformed: set[str] = set()

    def _engine(self) -> DrainEngine:
        return self.rig.engine(max_batch_size=4)

    def _never_published(self) -> set[str]:
        """Documents that must never reach Kafka: those breaking the contract (CTR-04)."""
        return self.malformed

    def _acknowledged_unpublished(self) -> set[str]:
        """Documents stamped ``delivered`` without a publish: none here."""
        return set()

    def _final_status(self, message_id: str) -> str:
        return "undeliverable" if message_id in self.malformed else "delivered"

    def _stop_faults(self) -> None:
        self.rig.publisher.handler = None
        clear_faults(self.rig.monitored)
        clear_faults(self.rig.leases)

    # ------------------------------------------------------------------ the world

    @rule(tenant=st.integers(0, TENANTS - 1), malformed=st.booleans())
    def write(self, tenant: int, malformed: bool) -> None:
        message_id = f"m-{len(self.docs)}"
        overrides = {"Destination": "  "} if malformed else {}
        self.docs[message_id] = self.rig.seed(outbox_doc(message_id, f"tenant-{tenant}", **overrides))[0]
        if malformed:
            self.malformed.add(message_id)

    @rule(times=st.integers(1, 3))
    def publishes_fail(self, times: int) -> None:
        publisher = self.rig.publisher
        publisher.handler = first_of(publisher.handler, fail_all(PublishError("broker down"), times=times))

    @rule(times=st.integers(1, 6))
    def stamps_fail(self, times: int) -> None:
        # However they are written: one by one, a batch's fallback (patch), or a transactional batch (F-10).
        fail_operation(self.rig.monitored, "patch", ServiceUnavailable("stamp refused"), times=times)
        fail_operation(self.rig.monitored, "execute_batch", ServiceUnavailable("stamp refused"), times=times)

    @rule(operation=st.sampled_from(["replace", "create", "read", "query"]), after_apply=st.booleans())
    def a_lease_write_or_read_fails(self, operation: str, after_apply: bool) -> None:
        # Checkpoints, renewals, releases (replace), new leases (create), lease reads and listings (query); after
        # apply: the write landed but its answer was lost, as a timeout can do.
        fail_operation(self.rig.leases, operation, ServiceUnavailable("lease store"), times=1, after_apply=after_apply)

    @rule()
    def a_change_feed_read_fails(self) -> None:
        fail_operation(self.rig.monitored, "read_change_feed", ServiceUnavailable("feed unavailable"), times=1)

    @rule(seconds=st.sampled_from([1, 30, 61]))
    def time_passes(self, seconds: int) -> None:
        self.rig.clock.advance(seconds)

    @rule(pick=st.integers(0, 31))
    def a_range_splits(self, pick: int) -> None:
        split_one(self.rig.monitored, pick, max_ranges=6)

    @precondition(lambda self: len(self.rig.monitored.read_feed_ranges()) > 1)
    @rule(pick=st.integers(0, 31))
    def two_ranges_merge(self, pick: int) -> None:
        merge_two(self.rig.monitored, pick)

    # ------------------------------------------------------------------ the drain

    @rule(budget=st.one_of(st.none(), st.integers(1, 5)))
    def drain(self, budget: int | None) -> None:
        try:
            self.engine.drain_all(max_documents=budget)  # failures are reported per lease, in the summaries
        except ServiceUnavailable:
            pass  # the listing itself failed (a feed-range or lease-store fault); the next run lists again

    # ------------------------------------------------------------------ what always holds

    def _published(self) -> set[str]:
        return set(published_ids(self.rig.publisher))

    def _status(self, message_id: str) -> str:
        return str(self.rig.current(self.docs[message_id])["status"])

    @invariant()
    def stamped_delivered_only_after_a_publish(self) -> None:
        published = self._published()
        for message_id in set(self.docs) - self._acknowledged_unpublished():
            if self._status(message_id) == "delivered":
                assert message_id in published, message_id

    @invariant()
    def what_must_not_be_published_never_is(self) -> None:
        assert not self._published() & self._never_published()
        assert self._published() <= set(self.docs), "every message belongs to a document"

    def teardown(self) -> None:
        self._stop_faults()
        for _ in range(8):  # each round: past any suspension window, then a probe that closes it
            self.rig.clock.advance(61)
            for summary in self.engine.drain_all():
                summary.raise_for_error()
        statuses = {message_id: self._status(message_id) for message_id in self.docs}
        assert statuses == {m: self._final_status(m) for m in self.docs}, "nothing stuck, nothing lost"
        assert self._published() == set(self.docs) - self._never_published()


DrainUnderFaults.TestCase.settings = stateful_settings("CHATTER_FAULT_EXAMPLES", 30)
test_rly_sus_f04_drains_hold_under_any_interleaving_of_faults = DrainUnderFaults.TestCase


class ResolverUnderFaults(DrainUnderFaults):
    """The same, with a body resolver (RSV): it drops some documents (RSV-02, acknowledged without a publish) and
    fails for others while it is "down" (RSV-03: no stamp, the page fails), as a lookup service would."""

    def __init__(self) -> None:
        self.dropped: set[str] = set()
        self.resolver_down = False
        super().__init__()

    def _engine(self) -> DrainEngine:
        return self.rig.engine(max_batch_size=4, body_resolver=self._resolve)

    def _resolve(self, context: ResolveContext) -> OutgoingMessage | None:
        if self.resolver_down:
            raise RuntimeError("lookup service down")
        if context.message_id in self.dropped:
            return None
        body = str(context.document["MessageBody"]).encode()
        return OutgoingMessage("orders", body, None, (("message-id", context.message_id.encode()),))

    @rule(tenant=st.integers(0, TENANTS - 1))
    def write_one_to_drop(self, tenant: int) -> None:
        self.write(tenant, malformed=False)
        self.dropped.add(f"m-{len(self.docs) - 1}")

    @rule(down=st.booleans())
    def the_resolver_goes_down_or_up(self, down: bool) -> None:
        self.resolver_down = down

    def _never_published(self) -> set[str]:
        # With a resolver the contract is not evaluated (RSV-01): malformed documents are published like the rest;
        # only dropped ones are not, and they end delivered all the same (RSV-02, acknowledged).
        return self.dropped

    def _acknowledged_unpublished(self) -> set[str]:
        return self.dropped

    def _final_status(self, message_id: str) -> str:
        return "delivered"

    def _stop_faults(self) -> None:
        super()._stop_faults()
        self.resolver_down = False


ResolverUnderFaults.TestCase.settings = DrainUnderFaults.TestCase.settings
test_rsv_rly_sus_a_resolver_under_any_interleaving_of_faults = ResolverUnderFaults.TestCase


class BatchedStampsUnderFaults(DrainUnderFaults):
    """The same world with the batched stamp writer (F-10): stamps also fail as whole batches (refused, or a 429
    past the retry limits), and a Confirmation Failure may leave later stamps of its page landed. The invariants
    and the teardown's "nothing stuck, nothing lost" are the same."""

    def _engine(self) -> DrainEngine:
        return self.rig.engine(max_batch_size=4, stamp_mode="batched", stamp_concurrency=2, max_throttle_retries=0)

    @rule(times=st.integers(1, 3), throttled=st.booleans())
    def batches_fail(self, times: int, throttled: bool) -> None:
        error = Throttled("busy", retry_after_ms=0) if throttled else ServiceUnavailable("batch refused")
        fail_operation(self.rig.monitored, "execute_batch", error, times=times)


BatchedStampsUnderFaults.TestCase.settings = DrainUnderFaults.TestCase.settings
test_f10_rly_sus_f04_batched_stamps_hold_under_any_interleaving_of_faults = BatchedStampsUnderFaults.TestCase
