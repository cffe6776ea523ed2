"""F-10 "undeliverable stamps may ride the same batches": in batched mode a page's contract-violating documents,
rejected messages and resolver drops are stamped with its delivered stamps, per partition key, in the same
transactional batches; an undeliverable document between publishable ones cuts no ``send_batch``.

CTR-04/05 (stamp, then count, then log; a failed undeliverable stamp counts and logs nothing), SUS-11/13 (a failed
undeliverable or drop stamp is no Confirmation Failure) and RLY-07 (nothing stamped after the first unconfirmed
publish, the checkpoint never past an unconfirmed document) hold as in the one-by-one order.
"""

from __future__ import annotations

import logging

import pytest

from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.telemetry import UNDELIVERABLE
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from airflow_chatter.ports import Document, MessageRejected, OutgoingMessage, PublishError, ServiceUnavailable
from airflow_chatter.testing.fakes import fail_nth, fail_topic

from ._drain_support import ABSENT, Rig, calls, clear_faults, fail_stamp, outbox_doc

UNDELIVERABLE_LOG = "Outbox document stamped undeliverable"


def mixed_page(rig: Rig) -> list[Document]:
    """t0: publishable, undeliverable, publishable; t1: undeliverable, publishable; t2: one undeliverable alone."""
    return rig.seed(
        outbox_doc("d-0", "t0"),
        outbox_doc("u-0", "t0", Destination=ABSENT),
        outbox_doc("d-1", "t0"),
        outbox_doc("u-1", "t1", MessageBody=ABSENT),
        outbox_doc("d-2", "t1"),
        outbox_doc("u-2", "t2", Destination=ABSENT),
    )


def statuses(rig: Rig, docs: list[Document]) -> dict[str, str]:
    return {doc[MESSAGE_ID_FIELD]: rig.current(doc)["status"] for doc in docs}


def undeliverable_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and UNDELIVERABLE_LOG in r.msg]


def test_f10_ctr_04_a_mixed_page_is_stamped_in_one_batch_per_partition_key_and_published_in_one_send_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()
    docs = mixed_page(rig)
    engine = rig.engine(stamp_mode="batched")
    with caplog.at_level(logging.INFO, logger="airflow_chatter.drain"):
        summary = rig.drain(engine)
    summary.raise_for_error()
    assert statuses(rig, docs) == {
        "d-0": "delivered",
        "u-0": "undeliverable",
        "d-1": "delivered",
        "u-1": "undeliverable",
        "d-2": "delivered",
        "u-2": "undeliverable",
    }
    assert all("ttl" not in rig.current(d) for d in docs if d[MESSAGE_ID_FIELD].startswith("u")), "CTR-04: no ttl"
    assert calls(rig.monitored, "execute_batch") == 2, "t0 (3 stamps) and t1 (2 stamps), one batch each"
    assert calls(rig.monitored, "patch") == 1, "t2's lone undeliverable stamp is a point patch"
    assert [len(batch) for batch in rig.publisher.batches] == [3], "the undeliverable documents cut no send_batch"
    assert (summary.published, summary.delivered, summary.undeliverable, summary.confirmation_failures) == (3, 3, 3, 0)
    assert rig.metrics.counter(UNDELIVERABLE) == 3
    logs = undeliverable_logs(caplog)
    assert len(logs) == 3 and all(any(u in line for line in logs) for u in ("u-0", "u-1", "u-2")), logs
    assert rig.lease(engine).continuation is not None, "the page is checkpointed past its undeliverable documents"


def test_rly_07_sequential_a_mixed_page_still_stamps_each_undeliverable_document_in_place() -> None:
    rig = Rig()
    docs = mixed_page(rig)
    summary = rig.drain(rig.engine(stamp_mode="sequential"))
    summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered", "undeliverable"}
    assert (calls(rig.monitored, "execute_batch"), calls(rig.monitored, "patch")) == (0, 6), "one patch each"
    assert [len(batch) for batch in rig.publisher.batches] == [1, 1, 1], "each in-place stamp flushed the run first"
    assert (summary.delivered, summary.undeliverable) == (3, 3)


def test_f10_ctr_05_sus_13_a_failing_undeliverable_stamp_in_a_batch_counts_logs_nothing_no_confirmation_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()
    docs = mixed_page(rig)
    u0 = docs[1]
    fail_stamp(rig.monitored, u0["id"], ServiceUnavailable("u-0 stamp down"))
    engine = rig.engine(stamp_mode="batched")
    with caplog.at_level(logging.INFO, logger="airflow_chatter.drain"):
        summary = rig.drain(engine)
    with pytest.raises(ServiceUnavailable, match="u-0 stamp down"):
        summary.raise_for_error()
    assert summary.confirmation_failures == 0, "SUS-11/13: a failed undeliverable stamp is pre-publish"
    assert rig.lease(engine).suspension == SuspensionState()
    assert statuses(rig, docs)["u-0"] == "pending", "its stamp failed: still pending"
    assert {k: v for k, v in statuses(rig, docs).items() if k != "u-0"} == {
        "d-0": "delivered",
        "d-1": "delivered",
        "u-1": "undeliverable",
        "d-2": "delivered",
        "u-2": "undeliverable",
    }, "F-10: the run's other stamps landed and stay"
    assert calls(rig.monitored, "execute_batch") == 2 and calls(rig.monitored, "patch") == 1 + 3, (
        "t0's batch was refused as a whole and fell back to one patch per document"
    )
    assert (summary.delivered, summary.undeliverable) == (3, 2), "only the stamps that landed are counted"
    assert rig.metrics.counter(UNDELIVERABLE) == 2
    logs = undeliverable_logs(caplog)
    assert len(logs) == 2 and not any("'u-0'" in line for line in logs), "CTR-05: no log for the failed stamp"
    assert rig.lease(engine).continuation is None, "never past the unconfirmed document"

    clear_faults(rig.monitored)
    again = rig.drain(engine)
    again.raise_for_error()
    assert (again.undeliverable, again.published) == (1, 0), "the next pass reaches the same verdict and stamps it"
    assert statuses(rig, docs)["u-0"] == "undeliverable"


def test_f10_sus_02_a_failing_delivered_stamp_beside_a_failing_undeliverable_stamp_is_one_confirmation_failure() -> (
    None
):
    rig = Rig()
    docs = mixed_page(rig)
    fail_stamp(rig.monitored, docs[1]["id"], ServiceUnavailable("u-0 stamp down"))  # undeliverable, first
    fail_stamp(rig.monitored, docs[2]["id"], ServiceUnavailable("d-1 stamp down"))  # delivered, after it
    summary = rig.drain(rig.engine(stamp_mode="batched"))
    with pytest.raises(ServiceUnavailable, match="d-1 stamp down"):
        summary.raise_for_error()
    assert summary.confirmation_failures == 1, "d-1 reached Kafka and its stamp failed: that is what SUS counts"
    assert (summary.delivered, summary.undeliverable) == (2, 2)
    assert [statuses(rig, docs)[m] for m in ("u-0", "d-1")] == ["pending", "pending"]


def test_f10_rly_07_an_undeliverable_document_after_the_first_unconfirmed_publish_is_not_stamped() -> None:
    rig = Rig()
    docs = rig.seed(
        outbox_doc("d-0", "t0"),
        outbox_doc("u-0", "t0", Destination=ABSENT),
        outbox_doc("d-1", "t0"),
        outbox_doc("u-1", "t0", Destination=ABSENT),
    )
    rig.publisher.handler = fail_nth(2, PublishError("d-1 refused"))
    engine = rig.engine(stamp_mode="batched")
    summary = rig.drain(engine)
    assert summary.error_type == "PublishError" and summary.confirmation_failures == 0
    assert statuses(rig, docs) == {"d-0": "delivered", "u-0": "undeliverable", "d-1": "pending", "u-1": "pending"}
    assert calls(rig.monitored, "execute_batch") == 1, "the confirmed prefix (d-0, u-0) in one batch"
    assert rig.lease(engine).continuation is None


def test_f10_ctr_04_a_rejected_message_and_a_contract_violation_ride_the_batch_of_their_key() -> None:
    rig = Rig()
    bad = "x" * 300
    docs = rig.seed(
        outbox_doc("d-0", "t0"),
        outbox_doc("r-0", "t0", destination=bad),
        outbox_doc("u-0", "t0", Destination=ABSENT),
        outbox_doc("d-1", "t0"),
    )
    rig.publisher.handler = fail_topic(bad, MessageRejected("topic name is illegal"))
    summary = rig.drain(rig.engine(stamp_mode="batched"))
    summary.raise_for_error()
    assert statuses(rig, docs) == {
        "d-0": "delivered",
        "r-0": "undeliverable",
        "u-0": "undeliverable",
        "d-1": "delivered",
    }
    assert (calls(rig.monitored, "execute_batch"), calls(rig.monitored, "patch")) == (1, 0), "four stamps, one batch"
    assert (summary.delivered, summary.undeliverable) == (2, 2)


def test_f10_rsv_02_resolver_drops_ride_the_batch_and_are_counted_dropped() -> None:
    rig = Rig()
    docs = rig.seed(*(outbox_doc(f"m-{i}", "t0") for i in range(5)))

    def every_other(ctx):  # type: ignore[no-untyped-def]
        if int(ctx.message_id.split("-")[1]) % 2:
            return None
        return OutgoingMessage("orders", b"{}", b"k")

    summary = rig.drain(rig.engine(stamp_mode="batched", body_resolver=every_other))
    summary.raise_for_error()
    assert set(statuses(rig, docs).values()) == {"delivered"}
    assert (summary.published, summary.delivered, summary.dropped) == (3, 3, 2)
    assert [len(batch) for batch in rig.publisher.batches] == [3], "the drops cut no send_batch"
    assert (calls(rig.monitored, "execute_batch"), calls(rig.monitored, "patch")) == (1, 0)


def test_f10_rsv_02_sus_13_a_failing_drop_stamp_in_a_batch_is_no_confirmation_failure() -> None:
    rig = Rig()
    docs = rig.seed(*(outbox_doc(f"m-{i}", "t0") for i in range(3)))
    fail_stamp(rig.monitored, docs[1]["id"], ServiceUnavailable("drop stamp down"))

    def drop_m1(ctx):  # type: ignore[no-untyped-def]
        return None if ctx.message_id == "m-1" else OutgoingMessage("orders", b"{}", b"k")

    engine = rig.engine(stamp_mode="batched", body_resolver=drop_m1)
    for _ in range(6):
        summary = rig.drain(engine)
        assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 0
    assert rig.lease(engine).suspension == SuspensionState(), "RSV-02: a failed drop stamp is no Confirmation Failure"
    assert statuses(rig, docs) == {"m-0": "delivered", "m-1": "pending", "m-2": "delivered"}


def test_f10_sus_11_a_page_ending_in_an_undeliverable_document_presents_its_receipt_and_lifts_a_suspension() -> None:
    rig = Rig()
    engine = rig.engine(stamp_mode="batched")
    rig.drain(engine)  # creates the lease
    lease = rig.lease(engine)
    engine.store.save_suspension(lease, SuspensionState(5, True, rig.clock.now, False))
    rig.clock.advance(60)  # the probe window
    rig.seed(outbox_doc("d-0", "t0"), outbox_doc("u-0", "t0", Destination=ABSENT))
    summary = rig.drain(engine)
    summary.raise_for_error()
    assert not summary.suspended and rig.lease(engine).suspension == SuspensionState()
    assert calls(rig.monitored, "execute_batch") == 1
