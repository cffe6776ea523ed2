"""Pages, budgets and checkpoints (BAT-02..04, F-04): a page without outbox documents is checkpointed too."""

from __future__ import annotations

import pytest

from airflow_chatter.drain.telemetry import BATCH_SIZE, BATCHES
from airflow_chatter.ports import ServiceUnavailable

from ._drain_support import Rig, calls, domain_doc, fail_operation, fail_stamp, outbox_doc


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_bat_02_an_empty_batch_is_recorded_as_size_0_and_checkpointed(rig: Rig) -> None:
    engine = rig.engine()
    summary = rig.drain(engine)
    assert summary.error is None and summary.pages == 1 and summary.documents == 0
    assert rig.metrics.counter(BATCHES) == 1 and rig.metrics.histogram_values(BATCH_SIZE) == (1, 0.0)
    assert rig.lease(engine).continuation is not None, "an empty page still moves the checkpoint"


def test_bat_04_the_pre_gate_runs_no_user_code_for_non_pending_documents(rig: Rig) -> None:
    calls_seen: list[object] = []
    rig.seed(domain_doc(), outbox_doc("msg-1", status="delivered"))
    summary = rig.drain(
        rig.engine(
            additional_pending_filter=lambda d: calls_seen.append(d) or True,
            body_resolver=lambda ctx: calls_seen.append(ctx),
        )
    )
    assert summary.skipped == 2 and calls_seen == [], "neither filter nor resolver ran for non-pending docs"


def test_f04_pages_of_only_domain_documents_advance_the_checkpoint(rig: Rig) -> None:
    rig.seed(*(domain_doc() for _ in range(5)))
    engine = rig.engine(max_batch_size=2)
    first = rig.drain(engine)
    assert first.skipped == 5 and first.pages == 4, "three pages of domain docs, then the empty page"
    assert rig.drain(engine).documents == 0, "the next run pays for none of them again"


def test_f04_checkpoint_only_after_the_whole_page_is_confirmed(rig: Rig) -> None:
    a, b = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-b"))
    fail_stamp(rig.monitored, b["id"], ServiceUnavailable("b"))  # one by one or in a batch (F-10)
    engine = rig.engine()
    rig.drain(engine)
    assert rig.current(a)["status"] == "delivered"
    assert rig.lease(engine).continuation is None, "half a page confirmed is not a checkpoint"


def test_f04_rly_07_sequential_each_confirmed_page_is_checkpointed_before_the_next_is_read(rig: Rig) -> None:
    docs = rig.seed(*(outbox_doc(f"msg-{i}") for i in range(6)))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("page 2"), on_call=4)
    engine = rig.engine(max_batch_size=3, stamp_mode="sequential")
    summary = rig.drain(engine)
    assert summary.delivered == 3 and summary.error_type == "ServiceUnavailable", "page 2 stops at its first stamp"
    continuation = rig.lease(engine).continuation
    assert continuation is not None, "page 1 was confirmed and checkpointed"
    page = rig.monitored.read_change_feed(rig.lease(engine).feed_range, continuation=continuation, max_item_count=10)
    assert [d["id"] for d in page.documents][:3] == [d["id"] for d in docs[3:]], "resume exactly after page 1"


def test_f04_f10_batched_each_confirmed_page_is_checkpointed_and_a_failed_stamp_holds_its_page_back(rig: Rig) -> None:
    docs = rig.seed(*(outbox_doc(f"msg-{i}") for i in range(6)))
    fail_stamp(rig.monitored, docs[3]["id"], ServiceUnavailable("page 2"))
    engine = rig.engine(max_batch_size=3, stamp_mode="batched")
    summary = rig.drain(engine)
    assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 1
    assert summary.delivered == 5, "F-10: the later stamps of page 2 landed and stay"
    assert [rig.current(d)["status"] for d in docs] == ["delivered"] * 3 + ["pending", "delivered", "delivered"]
    continuation = rig.lease(engine).continuation
    assert continuation is not None, "page 1 was confirmed and checkpointed"
    page = rig.monitored.read_change_feed(rig.lease(engine).feed_range, continuation=continuation, max_item_count=10)
    assert page.documents[0]["id"] == docs[3]["id"], "resume exactly after page 1, at the unconfirmed document"


def test_bat_pages_and_publish_batches_are_bounded_by_max_batch_size(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(10)))
    summary = rig.drain(rig.engine(max_batch_size=4))
    assert summary.published == 10
    assert max(len(batch) for batch in rig.publisher.batches) <= 4
    assert [len(batch) for batch in rig.publisher.batches] == [4, 4, 2], "one send_batch per page"


def test_budget_max_documents_stops_the_run_and_the_next_run_resumes(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(10)))
    engine = rig.engine(max_batch_size=3)
    first = rig.drain(engine, max_documents=4)
    assert first.documents == 4 and first.published == 4 and first.pages == 2, "pages of 3 then 1"
    second = rig.drain(engine)
    assert second.published == 6
    assert len(rig.publisher.sent) == 10, "nothing published twice across the budget boundary"


def test_budget_max_seconds_zero_reads_nothing(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    summary = rig.drain(max_seconds=0)
    assert summary.pages == 0 and summary.published == 0 and summary.error is None
    assert calls(rig.monitored, "read_change_feed") == 0


def test_f04_a_long_drain_renews_its_lease(rig: Rig) -> None:
    from airflow_chatter.testing.fakes import FakePublisher

    class SlowPublisher(FakePublisher):
        def send_batch(self, messages):  # type: ignore[no-untyped-def]
            rig.clock.advance(40)  # each page takes 40 s of a 60 s lease
            return super().send_batch(messages)

    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(6)))
    engine = rig.engine(SlowPublisher(), max_batch_size=2)
    summary = rig.drain(engine)
    assert summary.error is None and summary.published == 6, "never lost the lease across 120+ s of pages"
