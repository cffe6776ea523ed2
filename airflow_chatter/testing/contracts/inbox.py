"""The conformance suite of the downstream half over any ``DocumentContainer``: Unit of Work, standalone Inbox,
idempotent receiver (DTW, INB, DTI, C, F-07).

Subclass :class:`InboxContract` in a class whose name starts with ``Test`` and implement
:meth:`~InboxContract.make_container` (a fresh, empty container partitioned on the given paths)::

    class TestMyBackend(InboxContract):
        def make_container(self, partition_key_paths, default_ttl=None):
            return MyContainer(partition_key_paths)

The receiver tests drive ``IdempotentReceiver.handle_delivery`` with ``ReceivedMessage`` values (no broker): the
Kafka loop around it is tested against the real broker in ``tests/integration``. Every test's name carries the rule
it pins. Time comes from a :class:`~airflow_chatter.testing.clock.ManualClock`: leases are advanced, never waited for.

This module imports pytest; import it only from tests.
"""

from __future__ import annotations

import abc
import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

from airflow_chatter.errors import ItemIdTooLongError, ReservedIdError
from airflow_chatter.inbox.errors import (
    ClaimInFlightError,
    ForeignDocumentError,
    InboxIdentityError,
    MissingIdentityError,
)
from airflow_chatter.inbox.gate import ClaimDecision, Inbox, InboxOptions
from airflow_chatter.inbox.identity import topic_partition_offset_identity
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.inbox.receiver import Delivery, DeliveryOutcome, IdempotentReceiver
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.item_ids import build_item_id
from airflow_chatter.outbox.unit_of_work import BatchLimitError, CommitFailedError, UnitOfWork
from airflow_chatter.ports import DocumentContainer, NotFound, PatchOperation
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.inbox_support import CountingHandler, in_parallel, message

APP_PATH = "/tenantId"
INBOX_PATH = "/idempotencyKey"


class InboxContract(abc.ABC):
    """The suite; see the module docstring."""

    @abc.abstractmethod
    def make_container(self, partition_key_paths: Sequence[str], default_ttl: int | None = None) -> DocumentContainer:
        """A fresh, empty container partitioned on ``partition_key_paths``."""

    # -- helpers ---------------------------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _fresh(self) -> None:
        self.clock = ManualClock()
        self.tenant = f"tenant-{uuid.uuid4().hex[:8]}"
        self._containers: dict[tuple[tuple[str, ...], int | None], DocumentContainer] = {}

    def container(self, path: str = APP_PATH, default_ttl: int | None = None) -> DocumentContainer:
        key = ((path,), default_ttl)
        if key not in self._containers:
            self._containers[key] = self.make_container([path], default_ttl)
        return self._containers[key]

    def ids(self) -> str:
        return f"msg-{uuid.uuid4().hex[:12]}"

    def receiver(self, handler: Callable[[Delivery], Any], name: str = "orders-group") -> IdempotentReceiver:
        return IdempotentReceiver(
            handler, name=name, container=self.container(), partition_key_paths=APP_PATH, clock=self.clock
        )

    def standalone(
        self, handler: Callable[[Delivery], Any], name: str = "orders-group", **options: Any
    ) -> IdempotentReceiver:
        inbox = Inbox(self.container(INBOX_PATH, default_ttl=-1), InboxOptions(**options), clock=self.clock)
        return IdempotentReceiver(handler, name=name, inbox=inbox, tier="standalone", clock=self.clock)

    def read_or_none(self, container: DocumentContainer, item_id: str, pk: Any) -> dict[str, Any] | None:
        try:
            return container.read(item_id, pk)
        except NotFound:
            return None

    # -- Unit of Work (DTW) ----------------------------------------------------------------------------------

    def test_dtw_03_commit_writes_app_documents_and_outbox_messages_in_one_batch(self) -> None:
        container = self.container()
        with UnitOfWork(container, APP_PATH, self.tenant) as unit:
            unit.create({"id": "order-1", "tenantId": self.tenant, "total": 5})
            unit.add_message(OutboxMessage("msg-1", "orders", '{"a":1}', "application/json", {"k": "v"}))
        order = container.read("order-1", self.tenant)
        outbox = container.read("outbox:bXNnLTE", self.tenant)
        assert order["total"] == 5, "the application's write landed"
        assert (outbox["_chatterType"], outbox["status"], outbox["MessageId"], outbox["tenantId"]) == (
            "outbox",
            "pending",
            "msg-1",
            self.tenant,
        ), "OBX-01: the outbox document the drain reads, stamped at the partition path"
        assert outbox["MessageContext"] == '{"k":"v"}', "OBX-01: the context is a JSON string"

    def test_dtw_03_commit_with_nothing_staged_writes_nothing_and_returns_no_results(self) -> None:
        unit = UnitOfWork(self.container(), APP_PATH, self.tenant)
        assert unit.commit() == [], "no batch was executed: there was nothing to write"

    def test_dtw_04_a_failed_operation_is_named_and_nothing_of_the_batch_is_written(self) -> None:
        container = self.container()
        container.create({"id": "order-1", "tenantId": self.tenant, "v": 1}, self.tenant)
        stale = container.read("order-1", self.tenant)["_etag"]
        container.replace("order-1", self.tenant, {"id": "order-1", "tenantId": self.tenant, "v": 2})
        unit = UnitOfWork(container, APP_PATH, self.tenant)
        unit.create({"id": "order-2", "tenantId": self.tenant})
        unit.replace({"id": "order-1", "tenantId": self.tenant, "v": 3}, if_match=stale)
        with pytest.raises(
            CommitFailedError, match=r"operation 1 \(replace of write 'order-1'\) failed with status 412"
        ):
            unit.commit()
        assert self.read_or_none(container, "order-2", self.tenant) is None, "the batch is all or nothing"
        assert container.read("order-1", self.tenant)["v"] == 2, "the stale replace did not land"

    def test_dtw_patch_upsert_and_delete_commit_together(self) -> None:
        container = self.container()
        container.create({"id": "counter", "tenantId": self.tenant, "n": 1}, self.tenant)
        container.create({"id": "gone", "tenantId": self.tenant}, self.tenant)
        with UnitOfWork(container, APP_PATH, self.tenant) as unit:
            unit.patch("counter", [PatchOperation("incr", "/n", 1)])
            unit.upsert({"id": "fresh", "tenantId": self.tenant})
            unit.delete("gone")
        assert container.read("counter", self.tenant)["n"] == 2
        assert container.read("fresh", self.tenant)["id"] == "fresh"
        assert self.read_or_none(container, "gone", self.tenant) is None

    def test_obx_05_application_writes_in_the_reserved_namespace_are_refused_and_nothing_is_staged(self) -> None:
        unit = UnitOfWork(self.container(), APP_PATH, self.tenant)
        with pytest.raises(ReservedIdError, match="outbox:x"):
            unit.create({"id": "outbox:x", "tenantId": self.tenant})
        with pytest.raises(ReservedIdError, match="inbox:y"):
            unit.delete("inbox:y")
        assert len(unit) == 0, "the refused operations were not staged"

    def test_a_document_of_another_partition_is_refused_at_staging(self) -> None:
        unit = UnitOfWork(self.container(), APP_PATH, self.tenant)
        with pytest.raises(ValueError, match="carries partition key 'other'.*bound to"):
            unit.create({"id": "order-1", "tenantId": "other"})

    def test_the_101st_operation_is_refused_before_any_write(self) -> None:
        container = self.container()
        unit = UnitOfWork(container, APP_PATH, self.tenant)
        for i in range(100):
            unit.create({"id": f"d-{i}", "tenantId": self.tenant})
        with pytest.raises(BatchLimitError, match="101 operations: a transactional batch holds at most 100"):
            unit.create({"id": "d-100", "tenantId": self.tenant})
        assert self.read_or_none(container, "d-0", self.tenant) is None, "nothing was written"

    def test_a_batch_over_2_mb_is_refused_before_any_write(self) -> None:
        unit = UnitOfWork(self.container(), APP_PATH, self.tenant)
        unit.create({"id": "big-1", "tenantId": self.tenant, "blob": "x" * 1_200_000})
        with pytest.raises(BatchLimitError, match="at most 2097152 bytes"):
            unit.create({"id": "big-2", "tenantId": self.tenant, "blob": "x" * 1_200_000})

    # -- standalone inbox (INB) ------------------------------------------------------------------------------

    def inbox(self, **options: Any) -> Inbox:
        return Inbox(self.container(INBOX_PATH, default_ttl=-1), InboxOptions(**options), clock=self.clock)

    def test_inb_01_the_pending_claim_has_the_deterministic_id_and_partition_value(self) -> None:
        inbox = self.inbox()
        seen: dict[str, Any] = {}
        with inbox.claim("msg-1") as claim:
            seen = inbox.container.read("inbox:bXNnLTE", "msg-1")
            assert claim.decision is ClaimDecision.FRESH
        assert (seen["_chatterType"], seen["MessageId"], seen["idempotencyKey"], seen["Completed"]) == (
            "inbox",
            "msg-1",
            "msg-1",
            False,
        ), "INB-01: the claim is pending while the work runs"
        assert "ttl" not in seen, "INB-01: no ttl unless one is configured"
        assert seen["ReceivedAtUtc"].endswith("Z")

    def test_inb_01_marker_ttl_is_stamped_only_when_configured(self) -> None:
        identity = self.ids()
        inbox = self.inbox(marker_ttl=timedelta(days=7))
        with inbox.claim(identity):
            pass
        assert inbox.container.read(marker_id(identity), identity)["ttl"] == 7 * 86400

    def test_inb_02_a_fresh_claim_runs_the_work_once_and_completes_the_marker(self) -> None:
        identity, runs = self.ids(), []
        inbox = self.inbox()
        assert inbox.handle(identity, lambda: runs.append(1)) == (True, None)
        assert inbox.container.read(marker_id(identity), identity)["Completed"] is True
        assert runs == [1]

    def test_inb_04a_inb_11_a_completed_marker_skips_the_work(self) -> None:
        identity, runs = self.ids(), []
        inbox = self.inbox()
        inbox.handle(identity, lambda: runs.append(1))
        ran, _ = inbox.handle(identity, lambda: runs.append(2))
        assert (ran, runs) == (False, [1]), "the sequential duplicate did not run the work"

    def test_inb_07_a_failing_work_leaves_the_claim_pending_and_the_error_unchanged(self) -> None:
        identity = self.ids()
        inbox = self.inbox()
        with pytest.raises(ZeroDivisionError):
            with inbox.claim(identity):
                raise ZeroDivisionError("boom")
        assert inbox.container.read(marker_id(identity), identity)["Completed"] is False

    def test_a_pending_claim_within_its_lease_is_refused_and_taken_over_after_it(self) -> None:
        identity, runs = self.ids(), []
        inbox = self.inbox(claim_lease=timedelta(seconds=30))
        inbox.begin(identity)  # a process that claimed and died
        with pytest.raises(ClaimInFlightError, match="claimed by another attempt until"):
            inbox.handle(identity, lambda: runs.append("early"))
        self.clock.advance(31)
        ran, _ = inbox.handle(identity, lambda: runs.append("late"))
        assert (ran, runs) == (True, ["late"]), "INB-04b/INB-15: the abandoned claim was taken over once"
        assert inbox.container.read(marker_id(identity), identity)["Completed"] is True

    def test_inb_04c_a_foreign_document_under_the_marker_id_is_never_a_duplicate(self) -> None:
        identity, runs = self.ids(), []
        inbox = self.inbox()
        foreign = {"id": marker_id(identity), "idempotencyKey": identity, "_chatterType": "order", "Completed": True}
        inbox.container.create(foreign, identity)
        with pytest.raises(ForeignDocumentError, match="_chatterType is 'order'"):
            inbox.handle(identity, lambda: runs.append(1))
        assert runs == [], "the work did not run, and the delivery was not taken for handled"
        assert inbox.container.read(marker_id(identity), identity)["_chatterType"] == "order", "left untouched"

    def test_inb_08_a_completed_marker_is_never_reverted_by_a_failing_redelivery(self) -> None:
        identity = self.ids()
        inbox = self.inbox()
        inbox.handle(identity, lambda: None)
        with inbox.claim(identity) as claim:
            assert not claim.should_run
        assert inbox.container.read(marker_id(identity), identity)["Completed"] is True

    def test_inb_09_inb_10_a_blank_or_over_long_identity_fails_before_any_write(self) -> None:
        inbox = self.inbox()
        for blank in ("", "   "):
            with pytest.raises(InboxIdentityError, match="non-blank identity"):
                inbox.begin(blank)
        with pytest.raises(ItemIdTooLongError, match="over the Cosmos DB id limit of 1023"):
            inbox.begin("x" * 1000)

    def test_inb_14_has_been_received_is_not_supported(self) -> None:
        with pytest.raises(NotImplementedError, match="not supported"):
            self.inbox().has_been_received("msg-1")

    def test_the_async_claim_runs_the_work_once(self) -> None:
        identity, runs = self.ids(), []
        inbox = self.inbox()

        async def twice() -> None:
            for n in (1, 2):
                async with inbox.claim_async(identity) as claim:
                    if claim.should_run:
                        runs.append(n)

        asyncio.run(twice())
        assert runs == [1]

    # -- the idempotent receiver, document tier (DTI, C, F-07) ----------------------------------------------

    def test_dti_01_the_marker_commits_with_the_handler_writes(self) -> None:
        identity, handler = self.ids(), CountingHandler()
        receiver = self.receiver(handler)
        assert receiver.handle_delivery(message(identity, key=self.tenant)) is DeliveryOutcome.PROCESSED
        container = self.container()
        marker = container.read(marker_id(identity, "orders-group"), self.tenant)
        assert (marker["_chatterType"], marker["MessageId"], marker["Receiver"], marker["tenantId"]) == (
            "inbox",
            identity,
            "orders-group",
            self.tenant,
        )
        assert "Completed" not in marker and "ttl" not in marker, "DTI-01: a document-tier marker has neither"
        assert container.read(f"order-{identity}", self.tenant)["by"] == "orders-group"
        assert container.read(build_item_id("outbox", f"shipped-{identity}"), self.tenant)["status"] == "pending"

    def test_dti_02_a_sequential_redelivery_applies_the_writes_once(self) -> None:
        identity, handler = self.ids(), CountingHandler()
        receiver = self.receiver(handler)
        outcomes = [receiver.handle_delivery(message(identity, key=self.tenant)) for _ in range(3)]
        assert outcomes == [DeliveryOutcome.PROCESSED, DeliveryOutcome.DUPLICATE, DeliveryOutcome.DUPLICATE]
        rows = list(self.container().query("SELECT VALUE COUNT(1) FROM c", partition_key=self.tenant))
        assert rows == [3], "one marker, one order, one outbox document: the redeliveries committed nothing"

    def test_dti_03_a_marker_only_batch_still_deduplicates(self) -> None:
        identity, calls = self.ids(), []
        receiver = self.receiver(lambda d: calls.append(d.identity))
        first = receiver.handle_delivery(message(identity, key=self.tenant))
        second = receiver.handle_delivery(message(identity, key=self.tenant))
        assert (first, second) == (DeliveryOutcome.PROCESSED, DeliveryOutcome.DUPLICATE)

    def test_dti_02_a_foreign_document_under_the_marker_id_is_never_a_duplicate(self) -> None:
        identity, handler = self.ids(), CountingHandler()
        container = self.container()
        container.create(
            {"id": marker_id(identity, "orders-group"), "tenantId": self.tenant, "_chatterType": "inbox"}, self.tenant
        )
        with pytest.raises(ForeignDocumentError, match="MessageId is None"):
            self.receiver(handler).handle_delivery(message(identity, key=self.tenant))
        assert self.read_or_none(container, f"order-{identity}", self.tenant) is None, "nothing was committed"

    def test_dtw_04_a_failed_handler_commits_nothing_and_the_redelivery_applies_once(self) -> None:
        identity, handler = self.ids(), CountingHandler(fail_times=1)
        receiver = self.receiver(handler)
        with pytest.raises(RuntimeError, match="on purpose"):
            receiver.handle_delivery(message(identity, key=self.tenant))
        container = self.container()
        assert self.read_or_none(container, marker_id(identity, "orders-group"), self.tenant) is None
        assert receiver.handle_delivery(message(identity, key=self.tenant)) is DeliveryOutcome.PROCESSED
        assert container.read(f"order-{identity}", self.tenant)["id"] == f"order-{identity}"

    def test_c_01_c_04_nested_dispatch_commits_with_the_delivery_and_reruns_after_an_outer_failure(self) -> None:
        identity, attempts = self.ids(), []

        def nested(delivery: Delivery, command: dict[str, str]) -> None:
            assert delivery.unit_of_work is not None
            delivery.unit_of_work.create({"id": command["id"], "tenantId": self.tenant})

        def outer(delivery: Delivery) -> None:
            attempts.append(1)
            delivery.dispatch(nested, {"id": f"nested-{identity}"})
            delivery.dispatch(nested, {"id": f"sibling-{identity}"})
            if len(attempts) == 1:
                raise RuntimeError("outer handler failed after dispatching")

        receiver = self.receiver(outer)
        container = self.container()
        with pytest.raises(RuntimeError, match="after dispatching"):
            receiver.handle_delivery(message(identity, key=self.tenant))
        assert self.read_or_none(container, f"nested-{identity}", self.tenant) is None, "C-01: nested work rolled back"
        assert receiver.dispatched == 0, "a failed attempt's dispatches committed nothing: not counted"
        assert receiver.handle_delivery(message(identity, key=self.tenant)) is DeliveryOutcome.PROCESSED
        assert container.read(f"nested-{identity}", self.tenant)["id"], "C-04: the redelivery was not skipped"
        assert container.read(f"sibling-{identity}", self.tenant)["id"], "C-04: a sibling dispatch still ran"
        assert receiver.dispatched == 2, "F-07: both nested messages committed with the processed delivery"
        assert receiver.handle_delivery(message(identity, key=self.tenant)) is DeliveryOutcome.DUPLICATE
        assert receiver.dispatched == 2, "a duplicate's handler ran (document tier) but its dispatches were discarded"

    def test_f_07_two_receivers_with_different_names_both_process_one_message(self) -> None:
        identity = self.ids()
        seen: list[str] = []

        def handler(delivery: Delivery) -> None:
            assert delivery.unit_of_work is not None
            delivery.unit_of_work.create({"id": f"{delivery.receiver}-{identity}", "tenantId": self.tenant})
            seen.append(delivery.receiver)

        for name in ("billing", "shipping"):
            assert self.receiver(handler, name).handle_delivery(message(identity, key=self.tenant)) is (
                DeliveryOutcome.PROCESSED
            )
        assert sorted(seen) == ["billing", "shipping"], "a marker is scoped to its receiver"
        assert self.receiver(handler, "billing").handle_delivery(message(identity, key=self.tenant)) is (
            DeliveryOutcome.DUPLICATE
        )

    def test_f_07_a_message_without_identity_is_not_processed(self) -> None:
        handler = CountingHandler()
        with pytest.raises(MissingIdentityError, match="no usable 'message-id' header.*neither processed nor ack"):
            self.receiver(handler).handle_delivery(message(None, key=self.tenant))
        assert handler.calls == 0, "the handler never ran"

    def test_f_07_a_user_identity_function_replaces_the_message_id(self) -> None:
        calls: list[str] = []
        receiver = IdempotentReceiver(
            lambda d: calls.append(d.identity),
            name="by-offset",
            container=self.container(),
            partition_key_paths=APP_PATH,
            identity=topic_partition_offset_identity,
            clock=self.clock,
        )
        topic = f"t-{uuid.uuid4().hex[:6]}"
        outcomes = [receiver.handle_delivery(message(None, key=self.tenant, topic=topic, offset=7)) for _ in range(2)]
        assert outcomes == [DeliveryOutcome.PROCESSED, DeliveryOutcome.DUPLICATE]
        assert calls == [f"{topic}/0/7"] * 2, "DTI-02: the duplicate's handler ran, its writes were discarded"

    def test_32_concurrent_deliveries_of_distinct_ids_are_all_processed(self) -> None:
        handler = CountingHandler()
        receiver = self.receiver(handler)
        ids = [self.ids() for _ in range(32)]
        outcomes = in_parallel(32, lambda i: receiver.handle_delivery(message(ids[i], key=self.tenant)))
        assert outcomes == [DeliveryOutcome.PROCESSED] * 32
        rows = list(self.container().query("SELECT VALUE COUNT(1) FROM c", partition_key=self.tenant))
        assert rows == [96], "32 markers, 32 orders, 32 outbox documents"

    def test_32_concurrent_deliveries_of_one_id_commit_its_writes_once(self) -> None:
        identity, handler = self.ids(), CountingHandler()
        receiver = self.receiver(handler)
        outcomes = in_parallel(32, lambda i: receiver.handle_delivery(message(identity, key=self.tenant)))
        assert outcomes.count(DeliveryOutcome.PROCESSED) == 1, outcomes
        assert outcomes.count(DeliveryOutcome.DUPLICATE) == 31, outcomes
        rows = list(self.container().query("SELECT VALUE COUNT(1) FROM c", partition_key=self.tenant))
        assert rows == [3], "exactly one batch committed"

    def test_dtw_04_a_409_on_an_application_write_is_an_error_not_a_duplicate(self) -> None:
        identity = self.ids()
        container = self.container()
        container.create({"id": f"order-{identity}", "tenantId": self.tenant}, self.tenant)
        with pytest.raises(CommitFailedError, match=r"operation 1 \(create of write 'order-.*status 409"):
            self.receiver(CountingHandler()).handle_delivery(message(identity, key=self.tenant))
        marker = marker_id(identity, "orders-group")
        assert self.read_or_none(container, marker, self.tenant) is None, "DTW-04: not acknowledged, nothing committed"

    def test_inb_10_an_over_long_identity_fails_before_the_handler_runs(self) -> None:
        handler = CountingHandler()
        with pytest.raises(ItemIdTooLongError, match="over the Cosmos DB id limit"):
            self.receiver(handler).handle_delivery(message("x" * 1000, key=self.tenant))
        assert handler.calls == 0

    def test_dti_01_a_partition_path_rooted_at_a_marker_field_is_refused(self) -> None:
        with pytest.raises(ValueError, match="rooted at the Inbox Marker field 'MessageId'"):
            IdempotentReceiver(lambda d: None, name="r", container=self.container(), partition_key_paths="/MessageId")

    # -- the idempotent receiver, standalone tier ------------------------------------------------------------

    def test_standalone_tier_redelivery_skips_and_a_failed_attempt_is_taken_over(self) -> None:
        identity, runs = self.ids(), []

        def handler(delivery: Delivery) -> None:
            runs.append(delivery.identity)
            if len(runs) == 1:
                raise RuntimeError("first attempt failed")

        receiver = self.standalone(handler, claim_lease=timedelta(seconds=10))
        with pytest.raises(RuntimeError, match="first attempt"):
            receiver.handle_delivery(message(identity))
        with pytest.raises(ClaimInFlightError):
            receiver.handle_delivery(message(identity))
        self.clock.advance(11)
        assert receiver.handle_delivery(message(identity)) is DeliveryOutcome.PROCESSED
        assert receiver.handle_delivery(message(identity)) is DeliveryOutcome.DUPLICATE
        assert runs == [identity, identity], "ran for the failed attempt and the take-over, not for the duplicate"

    def test_c_03_standalone_nested_dispatch_never_completes_the_delivery_so_an_outer_failure_reruns_it(self) -> None:
        identity, effects = self.ids(), []

        def nested(delivery: Delivery, command: str) -> None:
            effects.append(command)

        def outer(delivery: Delivery) -> None:
            delivery.dispatch(nested, "nested")
            if len(effects) == 1:
                raise RuntimeError("outer failed after the nested command ran")

        receiver = self.standalone(outer, claim_lease=timedelta(seconds=5))
        with pytest.raises(RuntimeError, match="outer failed"):
            receiver.handle_delivery(message(identity))
        marker = self.container(INBOX_PATH, default_ttl=-1).read(marker_id(identity, "orders-group"), identity)
        assert marker["Completed"] is False, "C-03: the nested command did not complete the delivery's marker"
        self.clock.advance(6)
        assert receiver.handle_delivery(message(identity)) is DeliveryOutcome.PROCESSED
        assert effects == ["nested", "nested"], "C-04: the redelivery ran the nested command again, not skipped"

    def test_standalone_tier_two_receivers_both_process_one_message(self) -> None:
        identity, seen = self.ids(), []
        for name in ("billing", "shipping"):
            self.standalone(lambda d: seen.append(d.receiver), name).handle_delivery(message(identity))
        assert sorted(seen) == ["billing", "shipping"]

    def test_standalone_tier_32_concurrent_deliveries_of_one_id_run_the_handler_once(self) -> None:
        identity, handler_runs = self.ids(), []
        lock = threading.Lock()

        def handler(delivery: Delivery) -> None:
            with lock:
                handler_runs.append(1)

        receiver = self.standalone(handler)
        outcomes = in_parallel(32, lambda i: receiver.handle_delivery(message(identity)))
        processed = [o for o in outcomes if o is DeliveryOutcome.PROCESSED]
        refused = [o for o in outcomes if isinstance(o, (ClaimInFlightError,)) or o is DeliveryOutcome.DUPLICATE]
        assert len(processed) == 1 and len(refused) == 31, outcomes
        assert handler_runs == [1], "within the claim's lease no other attempt ran the handler"


__all__ = ["InboxContract", "in_parallel", "message"]
