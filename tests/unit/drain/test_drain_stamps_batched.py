"""F-10 batched stamps and F-11 request units, in memory: every fault the stamp path can meet.

Each test drives the default (``batched``) stamp writer through a real ``DrainEngine`` against the in-memory
container's fault plan, and asserts document state, published messages and the summary: nothing lost, the
checkpoint never past an unconfirmed document, Confirmation Failures counted as in one-by-one order.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.pacing import Pacer
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from airflow_chatter.ports import (
    BatchFailed,
    BatchOperation,
    BatchOperationResult,
    ChangeFeedPage,
    Document,
    FeedRange,
    NotFound,
    PartitionKey,
    PatchOperation,
    ServiceUnavailable,
    Throttled,
)
from airflow_chatter.ports.request_charges import report

from ._drain_support import Rig, calls, fail_operation, outbox_doc

BATCHED: dict[str, Any] = {"stamp_mode": "batched", "stamp_concurrency": 4}


class ProcessDied(BaseException):
    """The worker process is killed: not an ``Exception``, so nothing in the drain handles it."""


def seed(rig: Rig, count: int, tenants: int) -> list[Document]:
    return rig.seed(*(outbox_doc(f"m-{i}", f"t{i % tenants}") for i in range(count)))


def statuses(rig: Rig, docs: list[Document]) -> dict[str, str]:
    return {doc["id"]: rig.current(doc)["status"] for doc in docs}


def published(rig: Rig) -> list[str]:
    return [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]


def test_f10_a_page_is_stamped_in_one_batch_per_partition_key() -> None:
    rig = Rig()
    docs = seed(rig, 12, tenants=3)
    summary = rig.drain(rig.engine(**BATCHED))
    summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert calls(rig.monitored, "execute_batch") == 3, "one transactional batch per partition key"
    assert calls(rig.monitored, "patch") == 0
    assert (summary.published, summary.delivered, summary.confirmation_failures) == (12, 12, 0)
    assert rig.lease(rig.engine(**BATCHED)).continuation is not None


def test_f10_a_group_of_one_is_a_point_patch() -> None:
    rig = Rig()
    docs = seed(rig, 3, tenants=3)
    rig.drain(rig.engine(**BATCHED)).raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert (calls(rig.monitored, "execute_batch"), calls(rig.monitored, "patch")) == (0, 3)


def test_f10_a_batch_is_cut_at_100_operations() -> None:
    rig = Rig()
    docs = seed(rig, 250, tenants=1)
    rig.drain(rig.engine(max_batch_size=250, **BATCHED)).raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert calls(rig.monitored, "execute_batch") == 3, "100 + 100 + 50"


def test_f10_rly_06_a_document_deleted_meanwhile_fails_its_own_stamp_only_and_the_page_is_not_checkpointed() -> None:
    rig = Rig()
    docs = seed(rig, 6, tenants=2)
    gone = docs[2]  # t0, in the middle of its group
    fail_operation(
        rig.monitored,
        "execute_batch",
        BatchFailed("404 on one op", failed_index=1, status_code=404, operation_statuses=[424, 404, 424]),
        when=lambda call: any(op.id == gone["id"] for op in call.arguments["operations"]),
    )
    fail_operation(rig.monitored, "patch", NotFound("deleted meanwhile"), when=lambda call: call.item_id == gone["id"])
    engine = rig.engine(**BATCHED)
    summary = rig.drain(engine)
    with pytest.raises(NotFound, match="deleted meanwhile"):
        summary.raise_for_error()
    assert summary.confirmation_failures == 1, "one page, one Confirmation Failure, as one-by-one counted it"
    assert summary.delivered == 5
    assert statuses(rig, docs) == {d["id"]: ("pending" if d is gone else "delivered") for d in docs}
    assert rig.lease(engine).continuation is None, "never past an unconfirmed document"
    assert calls(rig.monitored, "patch") == 3, "the refused batch fell back to one patch per document"
    rig.monitored.handler = None
    rig.drain(engine).raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert published(rig).count(gone[MESSAGE_ID_FIELD]) == 2, (
        "the unconfirmed document is published again, nothing lost"
    )


def test_f10_a_batch_refused_as_a_whole_falls_back_to_one_by_one_and_every_document_lands() -> None:
    rig = Rig()
    docs = seed(rig, 8, tenants=2)
    fail_operation(rig.monitored, "execute_batch", ServiceUnavailable("batch refused"), times=1)
    summary = rig.drain(rig.engine(**BATCHED))
    summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert summary.confirmation_failures == 0
    assert calls(rig.monitored, "patch") == 4, "the refused batch's four documents, one by one"


def test_f10_sus_a_stamp_that_fails_one_by_one_too_is_one_confirmation_failure_and_five_open_a_suspension() -> None:
    rig = Rig()
    docs = seed(rig, 4, tenants=2)
    fail_operation(rig.monitored, "execute_batch", ServiceUnavailable("stamps down"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamps down"))
    engine = rig.engine(**BATCHED)
    failures = []
    for _ in range(5):
        summary = rig.drain(engine)
        failures.append(summary.confirmation_failures)
    assert failures == [1, 1, 1, 1, 1]
    assert summary.suspended, "SUS-03: the 5th consecutive Confirmation Failure opens a Drain Suspension"
    assert set(statuses(rig, docs).values()) == {"pending"}
    refused = rig.drain(engine)
    assert refused.refused_batches == 1 and refused.published == 0, "SUS-04: refused before any document"


def test_f11_a_429_on_a_batch_is_retried_after_its_retry_after_and_counted() -> None:
    rig = Rig()
    docs = seed(rig, 6, tenants=2)
    fail_operation(rig.monitored, "execute_batch", Throttled("busy", retry_after_ms=1), times=1)
    summary = rig.drain(rig.engine(stamp_mode="batched", stamp_concurrency=1))
    summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert (summary.throttled, summary.throttle_limit_reached, summary.confirmation_failures) == (1, False, 0)
    assert summary.to_dict()["throttled"] == 1


def test_f11_a_429_past_the_retry_limits_stops_the_drain_at_that_page_nothing_lost_and_says_so() -> None:
    rig = Rig()
    docs = seed(rig, 8, tenants=1)
    fail_operation(rig.monitored, "execute_batch", Throttled("busy", retry_after_ms=1))
    fail_operation(rig.monitored, "patch", Throttled("busy", retry_after_ms=1))
    engine = rig.engine(max_batch_size=4, max_throttle_retries=0, **BATCHED)
    summary = rig.drain(engine)
    with pytest.raises(Throttled, match="raise max_throttle_retries.*stops at this page, nothing lost"):
        summary.raise_for_error()
    assert summary.throttle_limit_reached and summary.throttled >= 1
    assert "throttled=" in summary.log_line()
    assert rig.lease(engine).continuation is None, "the first page was not confirmed: the checkpoint stays"
    rig.monitored.handler = None
    rig.drain(engine).raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}


def test_f10_the_process_dying_between_batches_loses_nothing() -> None:
    rig = Rig()
    docs = seed(rig, 9, tenants=3)
    fail_operation(rig.monitored, "execute_batch", ProcessDied(), on_call=2)
    engine = rig.engine(stamp_mode="batched", stamp_concurrency=1)
    with pytest.raises(ProcessDied):
        engine.drain_all()
    assert rig.lease(engine).continuation is None, "a page cut short by a crash is not checkpointed"
    rig.monitored.handler = None
    rig.clock.advance(120)  # the dead drain's lease lapses
    for summary in rig.engine(owner="drain-b", **BATCHED).drain_all():
        summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert set(published(rig)) == {d[MESSAGE_ID_FIELD] for d in docs}, "every document published, some twice"


def test_f10_sequential_mode_keeps_one_patch_per_document_in_feed_order() -> None:
    rig = Rig()
    docs = seed(rig, 6, tenants=2)
    rig.drain(rig.engine(stamp_mode="sequential")).raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert (calls(rig.monitored, "execute_batch"), calls(rig.monitored, "patch")) == (0, 6)


# ------------------------------------------------------------------------------------------- request units


class ChargingContainer(MemoryDocumentContainer):
    """Reports a fixed charge per request, as an adapter does from each response's own headers."""

    CHARGES = {"read_change_feed": 2.5, "patch": 10.0, "execute_batch": 0.0, "other": 1.0}

    def read_change_feed(self, feed_range: FeedRange, **kwargs: Any) -> ChangeFeedPage:
        page = super().read_change_feed(feed_range, **kwargs)
        report(self.CHARGES["read_change_feed"])
        return page

    def patch(self, item_id: str, partition_key: PartitionKey, operations: Any, **kwargs: Any) -> Document:
        written = super().patch(item_id, partition_key, operations, **kwargs)
        report(self.CHARGES["patch"])
        return written

    def execute_batch(self, partition_key: PartitionKey, operations: Any) -> list[BatchOperationResult]:
        results = super().execute_batch(partition_key, operations)
        report(10.0 * len(operations))
        return results

    def replace(self, *args: Any, **kwargs: Any) -> Document:
        written = super().replace(*args, **kwargs)
        report(self.CHARGES["other"])
        return written


def charging_rig() -> Rig:
    rig = Rig()
    rig.monitored = ChargingContainer(partition_key_paths=rig.paths, clock=rig.clock)
    rig.leases = ChargingContainer(partition_key_paths=("/id",), clock=rig.clock, container_id="leases")
    return rig


def test_f11_request_units_are_summed_per_drain_by_kind_from_each_requests_own_charge() -> None:
    rig = charging_rig()
    seed(rig, 6, tenants=2)
    summary = rig.drain(rig.engine(**BATCHED))
    summary.raise_for_error()
    # Every feed read 2.5 RU, six stamps (two batches of three) 10 RU each.
    assert summary.request_units_by_kind["feed"] == 2.5 * calls(rig.monitored, "read_change_feed")
    assert summary.request_units_by_kind["stamps"] == 60.0
    assert summary.request_units_by_kind["leases"] >= 2.0, "checkpoints and the release are lease writes"
    assert summary.request_units == sum(summary.request_units_by_kind.values())
    assert summary.request_units_per_delivered == pytest.approx(summary.request_units / 6)
    assert f"ru={summary.request_units:.1f}" in summary.log_line()
    stamped = rig.metrics.counter(
        "chatter.messaging.outbox.drain.request_units", **{"chatter.messaging.outbox.request_kind": "stamps"}
    )
    assert stamped == 60


def test_f11_each_drain_reports_only_its_own_request_units() -> None:
    rig = charging_rig()
    seed(rig, 2, tenants=1)
    engine = rig.engine(**BATCHED)
    first = rig.drain(engine)
    second = rig.drain(engine)  # nothing new: one empty feed read
    assert first.request_units_by_kind["stamps"] == 20.0
    assert second.request_units_by_kind["stamps"] == 0.0 and second.request_units_by_kind["feed"] == 2.5


def test_f11_max_request_units_per_second_paces_the_drain_on_measured_charges() -> None:
    rig = charging_rig()
    seed(rig, 20, tenants=20)  # one point patch each: 10 RU per document
    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    engine = rig.engine(max_request_units_per_second=50, timing=(lambda: now[0], sleep), **BATCHED)
    summary = rig.drain(engine)
    summary.raise_for_error()
    spent = summary.request_units
    # Charges are spent after each request; a request waits while the bucket is in debt. So the time waited
    # covers everything spent except the burst and the last request's own charge.
    assert sum(slept) >= (spent - 50 * 0.1 - 10 * 4) / 50
    assert sum(slept) <= spent / 50


def test_f11_the_token_bucket_waits_out_its_debt_at_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = Pacer(100, burst_seconds=0.1, clock=lambda: now[0], sleep=sleep)
    assert bucket.wait() == 0.0, "starts with its burst"
    bucket.spend(60)  # 10 banked - 60 = 50 in debt
    assert bucket.wait() == pytest.approx(0.5)
    now[0] += 10  # idle time banks at most the burst
    bucket.spend(10)
    assert bucket.wait() == 0.0
    bucket.spend(10)
    assert bucket.wait() == pytest.approx(0.1)


def test_f10_batch_operations_are_the_rly_03_patch() -> None:
    rig = Rig()
    seed(rig, 2, tenants=1)
    seen: list[tuple[BatchOperation, ...]] = []
    original = rig.monitored.execute_batch

    def spy(partition_key: PartitionKey, operations: Any) -> list[BatchOperationResult]:
        seen.append(tuple(operations))
        return original(partition_key, operations)

    rig.monitored.execute_batch = spy  # type: ignore[method-assign]
    rig.drain(rig.engine(**BATCHED)).raise_for_error()
    [ops] = seen
    assert {op.patch_operations for op in ops} == {
        (PatchOperation("set", "/status", "delivered"), PatchOperation("set", "/ttl", 86400))
    }
