"""Drain Suspension inside a drain (SUS-02..15, F-05): persisted on the lease, refused batches, probes, receipts."""

from __future__ import annotations

import logging

import pytest

from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.telemetry import BATCHES, DOCUMENTS, FAILURES, SUSPENSIONS
from airflow_chatter.errors import DrainSuspendedError
from airflow_chatter.ports import PublishError, ServiceUnavailable
from airflow_chatter.testing.fakes import fail_all

from ._drain_support import (
    ABSENT,
    Rig,
    calls,
    clear_faults,
    domain_doc,
    fail_operation,
    fail_stamp,
    outbox_doc,
    split,
)


@pytest.fixture
def rig() -> Rig:
    return Rig()


def _prime(rig: Rig, engine, state: SuspensionState) -> None:  # type: ignore[no-untyped-def]
    """Write a suspension state onto the (single) lease, as an earlier process would have."""
    engine.ensure_leases()
    engine.store.save_suspension(rig.lease(engine), state)


def _suspend(rig: Rig, engine) -> None:  # type: ignore[no-untyped-def]
    _prime(rig, engine, SuspensionState(5, True, rig.clock.now, False))


def test_sus_issue_scenario_five_stamp_failures_open_refuse_probe_and_a_receipt_closes(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    (doc,) = rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    for attempt in range(1, 6):
        summary = rig.drain(engine)
        assert summary.error_type == "ServiceUnavailable" and summary.published == 1, attempt
    assert summary.suspended, "the 5th consecutive Confirmation Failure opens the suspension"
    assert rig.metrics.counter(SUSPENSIONS) == 1
    assert len(rig.publisher.sent) == 5

    refused = rig.drain(engine)
    assert isinstance(refused.error, DrainSuspendedError) and refused.refused_batches == 1
    assert len(rig.publisher.sent) == 5, "the sixth batch is refused without publishing"
    assert calls(rig.monitored, "patch") == 5, "and without stamping"

    rig.clock.advance(60)
    clear_faults(rig.monitored)
    fresh = rig.engine(owner="drain-b")  # a new task process: state comes from the lease document
    with caplog.at_level(logging.INFO, logger="airflow_chatter.drain"):
        probe = rig.drain(fresh)
    assert probe.error is None and probe.published == 1 and probe.delivered == 1, "the probe went through"
    assert not probe.suspended and rig.lease(fresh).suspension == SuspensionState(), "a receipt closes it"
    assert rig.current(doc)["status"] == "delivered"
    assert any("lifted" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    assert rig.metrics.counter(SUSPENSIONS) == 1, "closing emits no metric"


def test_sus_15_suspension_state_survives_a_new_engine_instance(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    for _ in range(5):
        rig.drain(rig.engine(owner="run-a"))  # every run its own engine, like every Airflow task
    state = rig.lease(rig.engine(owner="run-b")).suspension
    assert state.suspended and state.consecutive_failures == 5 and state.armed_at == rig.clock.now
    refused = rig.drain(rig.engine(owner="run-c"))
    assert refused.error_type == "DrainSuspendedError" and len(rig.publisher.sent) == 5


def test_sus_02_four_failures_still_process_the_fifth_batch(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    for _ in range(4):
        rig.drain(engine)
    fifth = rig.drain(engine)
    assert fifth.published == 1 and fifth.error_type == "ServiceUnavailable", "processed, published, raised"


def test_sus_04_refused_before_any_document_is_looked_at_but_the_batch_is_recorded(rig: Rig) -> None:
    resolver_calls: list[object] = []
    engine = rig.engine(body_resolver=lambda ctx: resolver_calls.append(ctx))
    _suspend(rig, engine)
    rig.seed(domain_doc(), outbox_doc("msg-1"), outbox_doc("msg-2", Destination=ABSENT))
    before = rig.metrics.counter(BATCHES)
    summary = rig.drain(engine)
    assert summary.error_type == "DrainSuspendedError" and summary.suspended
    assert rig.publisher.attempted == [] and calls(rig.monitored, "patch") == 0
    assert resolver_calls == [], "no resolver is invoked while suspended"
    assert summary.skipped == 0 and rig.metrics.points(DOCUMENTS) == [], "not even the pre-gate ran"
    assert rig.metrics.counter(BATCHES) == before + 1, "the refused batch is still counted"
    assert rig.metrics.counter(FAILURES, error__type="DrainSuspendedError") == 1
    assert rig.lease(engine).continuation is None, "a refused batch is not checkpointed"


def test_sus_06_a_failing_probe_rearms_the_window(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    _suspend(rig, engine)
    rig.clock.advance(60)
    probe = rig.drain(engine)
    assert probe.published == 1 and probe.error_type == "ServiceUnavailable"
    state = rig.lease(engine).suspension
    assert state.consecutive_failures == 6 and state.armed_at == rig.clock.now
    rig.clock.advance(59)
    assert rig.drain(engine).error_type == "DrainSuspendedError", "another full 60 s"
    assert rig.metrics.counter(SUSPENSIONS) == 0, "a re-arm emits no suspension metric"


def test_sus_07_a_probe_that_confirms_nothing_consumes_the_probe(rig: Rig) -> None:
    engine = rig.engine()
    _suspend(rig, engine)
    rig.seed(domain_doc())
    rig.clock.advance(60)
    probe = rig.drain(engine)
    assert probe.skipped == 1 and probe.suspended, "a domain-only probe lifts nothing"
    assert probe.error_type == "DrainSuspendedError", "the next batch in the same run was refused"
    rig.seed(outbox_doc("msg-1"))
    assert rig.drain(engine).error_type == "DrainSuspendedError" and rig.publisher.sent == []


def test_sus_09_receipt_less_batches_neither_lift_nor_reset(rig: Rig) -> None:
    engine = rig.engine()
    _prime(rig, engine, SuspensionState(4))
    rig.seed(domain_doc())
    assert rig.drain(engine).error is None
    assert rig.lease(engine).suspension.consecutive_failures == 4, "a batch that wrote nothing is evidence of nothing"
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    assert rig.drain(engine).suspended, "4 + 1 consecutive failures open the suspension"


def test_sus_10_a_landed_stamp_resets_the_count(rig: Rig) -> None:
    engine = rig.engine()
    _prime(rig, engine, SuspensionState(4))
    rig.seed(outbox_doc("msg-1"))
    assert rig.drain(engine).delivered == 1
    assert rig.lease(engine).suspension == SuspensionState()


def test_sus_11_an_undeliverable_stamp_is_a_receipt(rig: Rig) -> None:
    engine = rig.engine()
    _suspend(rig, engine)
    rig.seed(outbox_doc("msg-1", Destination=ABSENT))
    rig.clock.advance(60)
    summary = rig.drain(engine)
    assert summary.undeliverable == 1 and not summary.suspended and summary.error is None


def test_sus_12_a_confirmation_failure_voids_the_receipts_of_its_batch(rig: Rig) -> None:
    engine = rig.engine()
    _prime(rig, engine, SuspensionState(4))
    a, x = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-x"))
    fail_stamp(rig.monitored, x["id"], ServiceUnavailable("x stamp"))  # one by one or in a batch (F-10)
    summary = rig.drain(engine)
    assert rig.current(a)["status"] == "delivered", "the earlier stamp landed"
    assert summary.suspended, "but the batch raised before presenting it: 5 consecutive failures"


@pytest.mark.parametrize("fault", ["publish", "resolver", "undeliverable_stamp", "drop_stamp"])
def test_sus_13_only_post_publish_stamp_failures_count(rig: Rig, fault: str) -> None:
    def raising_resolver(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("resolver broke")

    kwargs = {}
    doc = outbox_doc("msg-1")
    if fault == "publish":
        rig.publisher.handler = fail_all()
    elif fault == "resolver":
        kwargs["body_resolver"] = raising_resolver
    elif fault == "undeliverable_stamp":
        doc = outbox_doc("msg-1", Destination=ABSENT)
        fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    else:
        kwargs["body_resolver"] = lambda ctx: None
        fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    rig.seed(doc)
    engine = rig.engine(**kwargs)
    for _ in range(6):
        summary = rig.drain(engine)
        assert summary.error is not None and summary.confirmation_failures == 0
    assert rig.lease(engine).suspension == SuspensionState(), f"a {fault} failure is not a Confirmation Failure"


def test_sus_14_a_suspended_lease_does_not_stop_a_sibling_lease() -> None:
    from ._drain_support import split

    rig = Rig()
    engine = rig.engine()
    (parent,) = rig.monitored.read_feed_ranges()
    split(rig.monitored, parent)
    leases = engine.ensure_leases()
    assert len(leases) == 2
    suspended, sibling = leases
    engine.store.save_suspension(suspended, SuspensionState(5, True, rig.clock.now, False))
    rig.seed(*(outbox_doc(f"msg-{i}", f"tenant-{i}") for i in range(20)))
    summaries = {s.lease: s for s in engine.drain_all()}
    assert summaries[suspended.id].error_type == "DrainSuspendedError"
    assert summaries[sibling.id].error is None and summaries[sibling.id].published > 0, "the sibling keeps publishing"


def test_sus_14_same_lease_token_of_another_source_is_unaffected(rig: Rig) -> None:
    from ._drain_support import memory_container

    engine = rig.engine()
    _suspend(rig, engine)
    other_monitored = memory_container(rig.clock, container_id="payments")
    other = type(engine).open(
        rig.source(name="payments-outbox"),
        other_monitored,
        rig.leases,
        rig.publisher,
        clock=rig.clock,
        telemetry=rig.telemetry,
        owner="drain-a",
    )
    assert other.source_identity != engine.source_identity
    other_monitored.create(outbox_doc("msg-p"), "t1")
    (summary,) = other.drain_all()
    assert summary.error is None and summary.delivered == 1
    assert rig.drain(engine).error_type == "DrainSuspendedError"


def test_sus_05_refused_runs_are_not_retried_in_a_loop(rig: Rig) -> None:
    engine = rig.engine()
    _suspend(rig, engine)
    rig.seed(outbox_doc("msg-1"))
    summary = rig.drain(engine)
    assert summary.pages == 1 and summary.refused_batches == 1, "one refused batch ends this lease's run (F-05)"
    reads = calls(rig.monitored, "read_change_feed")
    assert reads == 1


def test_sus_13_publish_error_is_reported_with_its_own_type(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    rig.publisher.handler = fail_all(PublishError("nope"))
    assert rig.drain().error_type == "PublishError"


def test_sus_f04_a_suspended_lease_that_splits_hands_its_suspension_to_its_children(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"msg-{i}", f"tenant-{i}") for i in range(4)))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    for _ in range(5):
        rig.drain(engine)
    (parent,) = engine.ensure_leases()
    assert parent.suspension.suspended
    split(rig.monitored, parent.feed_range)  # splitting the range does not fix the stamps
    published = len(rig.publisher.sent)

    refused = engine.drain_all()

    assert len(refused) == 2 and all(s.error_type == "DrainSuspendedError" for s in refused), refused
    assert len(rig.publisher.sent) == published, "no child publishes into a failing stamp target"
    rig.clock.advance(60)
    clear_faults(rig.monitored)
    probes = engine.drain_all()
    assert all(s.error is None and not s.suspended for s in probes), "each child's probe closes its own"
    assert {d["status"] for d in rig.monitored.query("SELECT * FROM c")} == {"delivered"}


def test_sus_log_01_03_04_logs_and_the_refusal_name_the_lease_by_its_id_as_the_summary_does_with_the_range_as_detail(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    with caplog.at_level(logging.INFO, logger="airflow_chatter.drain"):
        for _ in range(5):
            failed = rig.drain(engine)
        refused = rig.drain(engine)
        rig.clock.advance(60)
        clear_faults(rig.monitored)
        probe = rig.drain(engine)
    lease = rig.lease(engine)
    named = f"lease {lease.id} (feed range {lease.token})"
    assert failed.lease == refused.lease == probe.lease == lease.id, "the summary's name for the lease"
    messages = [r.getMessage() for r in caplog.records]
    failures = [m for m in messages if m.startswith("Drain of lease ")]
    assert len(failures) == 6 and all(m.startswith(f"Drain of {named} failed: ") for m in failures), failures
    (opened,) = [m for m in messages if "Drain Suspension opened" in m]
    assert opened.startswith(f"Drain Suspension opened for {named} after 5 consecutive confirmation failures")
    (lifted,) = [m for m in messages if "lifted" in m]
    assert lifted == f"Drain Suspension of {named} lifted by a confirmation receipt"
    assert isinstance(refused.error, DrainSuspendedError)
    assert refused.error.lease_id == lease.id and refused.error.lease_token == lease.token
    assert str(refused.error).startswith(f"Lease {lease.id!r} (feed range {lease.token}) of source ")
    assert refused.error_message == str(refused.error) and lease.id in refused.log_line()
