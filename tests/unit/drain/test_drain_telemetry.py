"""The instruments (MET-01..09, F-09, F-11, follow mode) and the guarded always-on logs (LOG-01..05)."""

from __future__ import annotations

import logging

import pytest

from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.telemetry import (
    ATTR_ERROR_TYPE,
    ATTR_LEASE_TOKEN,
    ATTR_SOURCE_IDENTITY,
    BATCH_SIZE,
    BATCH_SIZE_BUCKETS,
    BATCHES,
    DOCUMENTS,
    EMPTY_POLL_REQUEST_UNITS,
    EMPTY_POLLS,
    FAILURES,
    LAG,
    LAG_BUCKETS,
    POLLS,
    SUSPENSIONS,
    UNDELIVERABLE,
    DrainTelemetry,
)
from airflow_chatter.ports import PublishError, ServiceUnavailable
from airflow_chatter.testing.fakes import fail_all
from airflow_chatter.testing.handlers import first_of

from ._drain_support import ABSENT, Rig, domain_doc, fail_operation, fail_stamp, outbox_doc

OUTCOME = "chatter__messaging__outbox__drain__outcome"


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_met_f09_instruments_have_their_names_units_and_the_airflow_chatter_meter(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-u", Destination=ABSENT), domain_doc())
    rig.drain()
    # Not reached by one clean drain: a failure and a suspension opening.
    rig.telemetry.record_failure("p", "0", OSError("x"))
    rig.telemetry.record_suspension_opened("p", "0", 5, OSError("x"))
    rig.telemetry.record_poll("p", "0", empty=True, request_units=1.0)  # only a following drain polls
    found = rig.metrics.collect()
    expected_units = {
        LAG: "s",
        DOCUMENTS: "{document}",
        BATCH_SIZE: "{document}",
        BATCHES: "{batch}",
        FAILURES: "{failure}",
        UNDELIVERABLE: "{document}",
        SUSPENSIONS: "{suspension}",
        POLLS: "{poll}",
        EMPTY_POLLS: "{poll}",
        EMPTY_POLL_REQUEST_UNITS: "{request_unit}",
    }
    for name, unit in expected_units.items():
        assert found[f"{name}#unit"] == [unit], name
        assert found[f"{name}#scope"] == ["airflow_chatter"], "F-09: the meter is named airflow_chatter"


def test_met_01_lag_is_recorded_at_admission_from_ts(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), domain_doc())
    rig.clock.advance(30)
    summary = rig.drain()
    assert rig.metrics.histogram_values(LAG) == (1, 30.0), "once per admitted doc, now - _ts"
    assert summary.max_lag_seconds == 30.0
    (point,) = rig.metrics.points(LAG)
    assert tuple(point.explicit_bounds) == LAG_BUCKETS, "advised buckets"


def test_met_01_no_lag_without_an_integer_ts(rig: Rig) -> None:
    from airflow_chatter.drain.summary import DrainCounts

    engine = rig.engine()
    doc = outbox_doc("msg-1")
    tally = DrainCounts(lease="lease")
    for ts in (None, "1700000000", 1.5, True, 10**13, -5):
        engine._record_lag({**doc, "_ts": ts}, tally)
    assert tally.max_lag_seconds is None and rig.metrics.points(LAG) == []


def test_met_01_with_the_default_clock_the_lag_is_wall_clock_seconds_since_ts() -> None:
    """The default clock reads the epoch seconds without an aware datetime; it must be the same wall clock."""
    import time

    from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
    from airflow_chatter.drain.summary import DrainCounts

    metrics_rig = Rig()
    engine = DrainEngine.open(
        metrics_rig.source(),
        MemoryDocumentContainer(partition_key_paths=metrics_rig.paths, default_ttl=-1),
        MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases"),
        metrics_rig.publisher,
        telemetry=metrics_rig.telemetry,
    )

    class Seconds(int):
        """An int subclass is still an integer ``_ts``."""

    tally = DrainCounts(lease="lease")
    before = time.time()
    engine._record_lag({**outbox_doc("msg-1"), "_ts": int(before) - 100}, tally)
    engine._record_lag({**outbox_doc("msg-2"), "_ts": Seconds(int(before) - 40)}, tally)
    engine._record_lag({**outbox_doc("msg-3"), "_ts": int(before) + 3600}, tally)  # clock skew: never negative
    after = time.time()
    count, total = metrics_rig.metrics.histogram_values(LAG)
    assert count == 3
    assert tally.max_lag_seconds is not None and 100 <= tally.max_lag_seconds <= 101 + (after - before)
    assert 140 <= total <= 142 + 2 * (after - before), "100 + 40 + 0 seconds"


def test_met_02_outcomes_admitted_skipped_dropped_and_nothing_for_failures(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), domain_doc())
    rig.drain()
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 1
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "skipped"}) == 2, "the domain doc and our own stamp"
    failing = Rig()
    failing.seed(outbox_doc("msg-1"))
    failing.publisher.handler = fail_all(PublishError("no"))
    failing.drain()
    assert failing.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 0, "MET-09: a fault is not an outcome"


def test_met_02_sequential_a_page_that_fails_still_counts_what_it_published_and_skipped(rig: Rig) -> None:
    # The page's outcomes are added once when it ends; a stamp fault on the 2nd of 3 pending documents ends it
    # early. The three went out in one send_batch and the broker confirmed all three before any stamp, so all three
    # are admitted (MET-02: after publish returns, before the stamp) and published; only msg-1 was stamped, and
    # msg-3's stamp was never tried (RLY-07). Counted as skipped: the domain doc.
    rig.seed(domain_doc(), outbox_doc("msg-1"), outbox_doc("msg-2"), outbox_doc("msg-3"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"), on_call=2)
    summary = rig.drain(rig.engine(stamp_mode="sequential"))
    assert isinstance(summary.error, ServiceUnavailable)
    assert (summary.published, summary.delivered, summary.skipped) == (3, 1, 1)
    assert summary.published == len(rig.publisher.sent), "what reached the broker"
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 3
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "skipped"}) == 1
    rig.drain()  # the next pass: msg-1's stamp and the domain doc come back skipped, msg-2 and msg-3 go out again
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 5
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "skipped"}) >= 2


def test_met_02_f10_batched_a_page_that_fails_still_counts_what_it_published_and_skipped(rig: Rig) -> None:
    # Batched, the three stamps go out together: msg-2's fails, msg-1's and msg-3's land and stay (F-10). The counts
    # are the same sums as one by one: all three admitted and published, the domain doc skipped.
    docs = rig.seed(domain_doc(), outbox_doc("msg-1"), outbox_doc("msg-2"), outbox_doc("msg-3"))
    fail_stamp(rig.monitored, docs[2]["id"], ServiceUnavailable("stamp down"))
    summary = rig.drain(rig.engine(stamp_mode="batched"))
    assert isinstance(summary.error, ServiceUnavailable) and summary.confirmation_failures == 1
    assert (summary.published, summary.delivered, summary.skipped) == (3, 2, 1)
    assert summary.published == len(rig.publisher.sent), "what reached the broker"
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 3
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "skipped"}) == 1
    rig.drain()  # the next pass: only msg-2 is still pending and goes out again; the rest come back skipped
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "admitted"}) == 4
    assert rig.metrics.counter(DOCUMENTS, **{OUTCOME: "skipped"}) >= 2


def test_met_03_04_batch_size_and_batches_are_paired_with_lease_attributes(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(3)))
    engine = rig.engine(max_batch_size=2)
    rig.drain(engine)
    token = rig.lease(engine).token
    attributes = {ATTR_SOURCE_IDENTITY: engine.source_identity, ATTR_LEASE_TOKEN: token}
    sizes = rig.metrics.points(BATCH_SIZE)
    batches = rig.metrics.points(BATCHES)
    assert [dict(p.attributes) for p in sizes] == [attributes] and [dict(p.attributes) for p in batches] == [attributes]
    assert sizes[0].count == batches[0].value, "always paired"
    assert tuple(sizes[0].explicit_bounds) == BATCH_SIZE_BUCKETS


def test_met_05_log_01_a_fault_is_counted_under_its_unwrapped_type_and_logged_with_the_lease(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        rig.drain(engine)
    token = rig.lease(engine).token
    (point,) = rig.metrics.points(FAILURES)
    assert dict(point.attributes) == {
        ATTR_SOURCE_IDENTITY: engine.source_identity,
        ATTR_LEASE_TOKEN: token,
        ATTR_ERROR_TYPE: "ServiceUnavailable",
    }, "error.type is the stamp fault, not the carrier"
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert token in record.getMessage() and "stamp down" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is ServiceUnavailable


def test_met_06_07_undeliverable_and_suspensions_counters(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-u", Destination=ABSENT))
    rig.drain()
    assert rig.metrics.counter(UNDELIVERABLE) == 1
    assert rig.metrics.counter(SUSPENSIONS) == 0


def test_met_08_without_an_sdk_nothing_is_recorded_and_draining_is_unchanged(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-u", Destination=ABSENT))
    engine = DrainEngine.open(
        rig.source(), rig.monitored, rig.leases, rig.publisher, clock=rig.clock, telemetry=DrainTelemetry()
    )
    (summary,) = engine.drain_all()
    assert (summary.delivered, summary.undeliverable, summary.error) == (1, 1, None)
    assert rig.metrics.collect() == {}, "the SDK provider of this test saw nothing"


class _BrokenFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        raise RuntimeError("the logging sink is broken")


@pytest.mark.parametrize("fault", ["stamp", "undeliverable", "suspension"])
def test_log_broken_logger_never_changes_the_outcome(rig: Rig, fault: str) -> None:
    logger = logging.getLogger("test.broken.drain")
    logger.addFilter(_BrokenFilter())
    rig.telemetry = rig.metrics.telemetry(logger=logger)
    if fault == "undeliverable":
        rig.seed(outbox_doc("msg-u", Destination=ABSENT))
    else:
        rig.seed(outbox_doc("msg-1"))
        fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    runs = 5 if fault == "suspension" else 1
    for _ in range(runs):
        summary = rig.drain(engine)
    if fault == "undeliverable":
        assert summary.error is None and summary.undeliverable == 1
    else:
        assert summary.error_type == "ServiceUnavailable", "the caller sees the drain's error, not the logger's"
    if fault == "suspension":
        assert summary.suspended and rig.metrics.counter(SUSPENSIONS) == 1


def test_log_05_a_failed_release_is_logged_and_the_drains_outcome_kept(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.seed(outbox_doc("msg-1"))
    rig.publisher.handler = fail_all(PublishError("broker said no"))
    rig.leases.handler = first_of(
        rig.leases.handler,
        fail(
            "replace",
            error=ServiceUnavailable("lease store down"),
            when=lambda call: call.arguments.get("document", {}).get("owner") is None,
        ),
    )
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        summary = rig.drain()
    assert summary.error_type == "PublishError", "the start/drain error is preserved"
    assert any("lease store down" in r.getMessage() for r in caplog.records), "the cleanup failure is logged"
