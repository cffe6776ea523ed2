"""The monitoring read model (``airflow_chatter.operations.monitoring``) and the operator's interventions
(``airflow_chatter.operations.interventions``) against the in-memory container, after real drains."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from airflow_chatter.drain.follow import StopRequest
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.tries import Attempt
from airflow_chatter.operations.interventions import LeaseChangedError, Selected, release_lease, requeue_selected
from airflow_chatter.operations.monitoring import (
    RunRecord,
    SourceOverview,
    lease_views,
    list_undeliverable,
    monitor_store,
    run_points,
    source_overview,
    totals,
)
from airflow_chatter.operations.overview import overview_row
from airflow_chatter.operations.pending import estimate_pending
from airflow_chatter.ports import PatchOperation, ServiceUnavailable
from tests.unit.drain._drain_support import ABSENT, Rig, fail_operation, outbox_doc
from tests.unit.drain._follow_script import Script


@pytest.fixture
def rig() -> Rig:
    return Rig()


def _runs(*summaries: dict) -> list[RunRecord]:  # type: ignore[type-arg]
    return [RunRecord(f"run-{n}", "scheduled", "success", None, (s,)) for n, s in enumerate(summaries)]


def test_the_monitor_reads_the_drains_own_lease_set_through_the_source_identity(rig: Rig) -> None:
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    assert store.processor_name == engine.store.processor_name
    assert [lease.id for lease in store.list_leases()] == [lease.id]


def test_pending_estimate_counts_pending_documents_after_the_checkpoint_without_moving_it(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"), outbox_doc("m2"))
    engine = rig.engine()
    rig.drain(engine)
    rig.seed(outbox_doc("m3"), outbox_doc("m4"), outbox_doc("m5"))
    lease = rig.lease(engine)

    estimate = estimate_pending(rig.monitored, lease)

    assert (estimate.count, estimate.bounded) == (3, False)
    assert rig.lease(engine).continuation == lease.continuation, "read-only: the checkpoint did not move"
    assert rig.drain(engine).published == 3, "the drain still publishes all three"


def test_pending_estimate_is_bounded_and_says_so(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"m{n}") for n in range(7)))
    lease = rig.engine().ensure_leases()[0]
    estimate = estimate_pending(rig.monitored, lease, page_items=2, max_pages=2)
    assert (estimate.count, estimate.documents_read, estimate.bounded) == (4, 4, True)


def test_overview_shows_one_suspended_lease_with_its_window_end_and_last_fault(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"))
    engine = rig.engine()
    summaries = [rig.drain(engine).to_dict() for _ in range(5)]  # five Confirmation Failures open it (SUS-02)
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)

    overview = source_overview("orders", "chatter_drain_orders", store, rig.monitored, _runs(*reversed(summaries)))

    (suspension,) = overview.suspensions
    lease = rig.lease(engine)
    assert suspension.lease_id == lease.id and suspension.consecutive_failures == 5
    assert suspension.window_end == (lease.suspension.armed_at + timedelta(seconds=60)).isoformat()
    assert suspension.last_fault is not None
    assert (
        suspension.last_fault.error_type == "ServiceUnavailable" and "stamp down" in suspension.last_fault.error_message
    )
    assert overview.attention and overview.undeliverable_count == 0


def test_sus_the_refusal_of_a_suspended_lease_is_not_reported_as_its_last_fault(rig: Rig) -> None:
    engine = rig.engine()
    engine.ensure_leases()
    engine.store.save_suspension(rig.lease(engine), SuspensionState(5, True, rig.clock.now, False))
    refused = rig.drain(engine).to_dict()
    assert refused["error_type"] == "DrainSuspendedError"
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    (suspension,) = source_overview("orders", "d", store, rig.monitored, _runs(refused)).suspensions
    assert suspension.last_fault is None


def test_lease_view_shows_continuation_age_last_drain_and_owner(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"))
    engine = rig.engine()
    summary = rig.drain(engine).to_dict()
    rig.clock.advance(90)
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)

    (view,) = source_overview("orders", "d", store, rig.monitored, _runs(summary)).leases

    assert view.continuation_age_seconds == 90.0
    assert view.last_drain is not None and view.last_drain["delivered"] == 1 and view.last_drain_run == "run-0"
    assert view.owner is None and not view.live, "the drain released it"
    assert view.pending is not None and view.pending.count == 0


def test_ctr_undeliverable_documents_are_listed_with_violations_re_derived_from_the_document(rig: Rig) -> None:
    rig.seed(outbox_doc("good"), outbox_doc("bad-1", Destination=ABSENT), outbox_doc("bad-2", MessageBody=ABSENT))
    summary = rig.drain().to_dict()
    assert summary["undeliverable"] == 2

    page = list_undeliverable(rig.monitored)

    assert {item.message_id: item.violations for item in page.items} == {
        "bad-1": ("Destination",),
        "bad-2": ("MessageBody",),
    }
    assert page.continuation is None
    assert all(item.etag for item in page.items)


def test_undeliverable_documents_are_paged_by_continuation_and_searched_by_message_id(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"bad-{n}", Destination=ABSENT) for n in range(5)), outbox_doc("other", Destination=ABSENT))
    rig.drain()

    first = list_undeliverable(rig.monitored, size=2)
    second = list_undeliverable(rig.monitored, size=2, continuation=first.continuation)
    third = list_undeliverable(rig.monitored, size=2, continuation=second.continuation)
    seen = [i.message_id for page in (first, second, third) for i in page.items]

    assert len(seen) == 6 and len(set(seen)) == 6 and third.continuation is None
    assert [i.message_id for i in list_undeliverable(rig.monitored, message_id="oth").items] == ["other"]


def test_run_points_report_request_units_per_delivered_document_when_summaries_carry_them() -> None:
    runs = _runs(
        {"lease": "a", "published": 4, "delivered": 4, "request_units": 40.0, "continuation_age_seconds": 3.0},
        {"lease": "a", "published": 2, "delivered": 2, "continuation_age_seconds": 300.0},
    )
    newest, older = run_points(runs)
    assert (newest.delivered, newest.request_units, newest.request_units_per_delivered) == (4, 40.0, 10.0)
    assert (older.request_units, older.request_units_per_delivered, older.max_continuation_age_seconds) == (
        None,
        None,
        300.0,
    )


def test_requeue_selected_sets_pending_and_the_next_drain_publishes_them(rig: Rig) -> None:
    (bad,) = rig.seed(outbox_doc("bad-1", Destination=ABSENT))
    engine = rig.engine()
    rig.drain(engine)
    (shown,) = list_undeliverable(rig.monitored).items
    rig.monitored.patch(bad["id"], "t1", [PatchOperation("set", "/Destination", "orders")])  # the writer's fix
    (repaired,) = list_undeliverable(rig.monitored).items
    assert repaired.violations == ()

    stale = requeue_selected(rig.monitored, rig.paths, [Selected(shown.id, shown.etag)])
    assert stale.changed_meanwhile == (shown.id,) and stale.requeued == (), "the ETag the page showed is stale"

    done = requeue_selected(rig.monitored, rig.paths, [Selected(repaired.id, repaired.etag), Selected("nope", '"x"')])
    assert done.requeued == (repaired.id,) and done.not_found == ("nope",)
    assert rig.current(bad)["status"] == "pending"
    again = requeue_selected(rig.monitored, rig.paths, [Selected(repaired.id, repaired.etag)])
    assert again.already_pending == (repaired.id,) and again.not_found == (), (
        "a repeated requeue says the document is pending already, not that it does not exist"
    )
    assert rig.drain(engine).published == 1


def test_release_clears_a_stuck_lease_owner_through_the_lease_store_and_keeps_its_checkpoint(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"))
    engine = rig.engine()
    rig.drain(engine)
    stuck = engine.store.acquire(rig.lease(engine).id)  # a worker took it and died
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)

    with pytest.raises(LeaseChangedError, match="changed since it was shown"):
        release_lease(store, stuck.id, expected_etag='"stale"')
    released = release_lease(store, stuck.id, expected_etag=stuck.etag)

    after = store.get(stuck.id)
    assert released.released and released.previous_owner == "drain-a"
    assert after.owner is None and after.expires_at is None and after.continuation == stuck.continuation
    assert rig.engine(owner="drain-b").drain_all()[0].lease_held_by is None, "another drain takes it at once"


def _three_tries(rig: Rig, *, last_fails: bool) -> list[dict]:  # type: ignore[type-arg]
    """One drain task of one run tried three times: the first two publish and fail on the stamp, the third
    publishes again and succeeds (or fails too). What Airflow keeps is the last try's summary only."""
    rig.seed(outbox_doc("m1"))
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    summaries = []
    for number in (1, 2, 3):
        if number < 3 or last_fails:
            fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"), times=1)
        attempt = Attempt("chatter_drain_orders/run-1/drain/0", number)
        summaries.append(engine.drain_lease(lease.id, attempt=attempt).to_dict())
    return summaries


def test_every_try_counts_a_run_tried_three_times_totals_all_three(rig: Rig) -> None:
    """A run retried three times used to count its last try only ("published 18" while Kafka held
    84 copies). Each try records its counts on the lease; the last try's summary carries the earlier ones."""
    tries = _three_tries(rig, last_fails=False)
    assert len(rig.publisher.sent) == 3, "each try published the document again"
    last = tries[-1]  # XCom: Airflow cleared the earlier tries'
    assert [t["try"] for t in last["earlier_tries"]] == [1, 2]
    assert [t["error_type"] for t in last["earlier_tries"]] == ["ServiceUnavailable", "ServiceUnavailable"]
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)

    overview = source_overview("orders", "d", store, rig.monitored, _runs(last))

    assert overview.totals["published"] == 3 == len(rig.publisher.sent), overview.totals
    assert (overview.totals["delivered"], overview.totals["confirmation_failures"]) == (1, 2), overview.totals
    (point,) = overview.runs
    assert (point.published, point.delivered, point.tries) == (3, 1, 3)
    counts = overview.failure_counts
    assert counts is not None and counts.totals_cover == "every try of each drain task of the runs shown"
    assert (counts.in_runs, counts.on_leases) == (2, 0), "the third try's success reset the lease's count"
    assert counts.why_they_differ is not None and "a success resets them" in counts.why_they_differ


def test_every_try_counts_three_failing_tries_agree_with_the_lease(rig: Rig) -> None:
    last = _three_tries(rig, last_fails=True)[-1]
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    overview = source_overview("orders", "d", store, rig.monitored, _runs(last))
    assert overview.totals["published"] == 3 and overview.totals["confirmation_failures"] == 3, overview.totals
    counts = overview.failure_counts
    assert counts is not None and (counts.in_runs, counts.on_leases, counts.why_they_differ) == (3, 3, None)


def test_a_try_still_in_flight_is_named_as_why_the_leases_count_more_failures(rig: Rig) -> None:
    """Two tries failed and a third is running: the lease counts 2, the finished run shown reported none. The reason
    is the run in flight, not a success that reset the lease or a killed try."""
    summaries = _three_tries(rig, last_fails=True)
    rig.lease(rig.engine())  # the lease carries the failures of the tries
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    running = RunRecord("run-now", "scheduled", "running", None, ())
    overview = source_overview("orders", "d", store, rig.monitored, [running])
    counts = overview.failure_counts
    assert counts is not None and (counts.in_runs, counts.on_leases) == (0, len(summaries)), counts
    assert counts.why_they_differ is not None and "a try still in flight (run run-now)" in counts.why_they_differ
    assert "a success resets them" not in counts.why_they_differ


def test_the_next_run_starts_its_own_record_of_tries(rig: Rig) -> None:
    _three_tries(rig, last_fails=False)
    rig.seed(outbox_doc("m2"))
    engine = rig.engine()
    (lease,) = engine.store.list_leases()
    summary = engine.drain_lease(lease.id, attempt=Attempt("chatter_drain_orders/run-2/drain/0", 1)).to_dict()
    assert summary["earlier_tries"] == [] and summary["published"] == 1
    assert rig.lease(engine).document["run_tries"]["run"] == "chatter_drain_orders/run-2/drain/0"
    assert len(rig.lease(engine).document["run_tries"]["tries"]) == 1, "one task run's tries only: it stays small"


def test_agreeing_failure_counts_need_no_explanation(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"))
    summary = rig.drain(rig.engine()).to_dict()
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    counts = source_overview("orders", "d", store, rig.monitored, _runs(summary)).failure_counts
    assert counts is not None and (counts.in_runs, counts.on_leases, counts.why_they_differ) == (0, 0, None)


def test_a_following_drain_is_shown_live_with_its_last_poll_published_in_the_last_minute_and_lag(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"), outbox_doc("m2"))
    rig.clock.advance(3)  # written 3 s before the drain admits them
    engine = rig.engine(lease_duration_seconds=1.0)  # renewed every half second: what a reader sees is that fresh
    (lease,) = engine.ensure_leases()
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    stop = StopRequest()
    during: list[SourceOverview] = []

    def look() -> None:
        during.append(source_overview("orders", "d", store, rig.monitored, now=rig.clock(), estimate=False))
        stop.request()

    script = Script(lambda: rig.monitored.calls["read_change_feed"], rig.clock.advance, {6: look})
    summary = engine.drain_lease(lease.id, follow=script.follow(stop))
    summary.raise_for_error()

    (view,) = during[0].leases
    assert view.follow is not None and view.follow.live
    assert view.follow.published_last_minute == 2 and view.follow.lag_seconds == 3.0
    assert view.follow.last_poll_at is not None and view.follow.polls is not None and view.follow.polls >= 3
    row = overview_row(during[0], now=rig.clock())
    assert (row.live, row.published_last_minute, row.follow_lag_seconds) == (True, 2, 3.0)
    assert row.last_poll_at == view.follow.last_poll_at

    after = source_overview("orders", "d", store, rig.monitored, now=rig.clock(), estimate=False)
    (released,) = after.leases
    assert released.follow is not None and not released.follow.live, "released: shown, no longer live"
    assert overview_row(after, now=rig.clock()).live is False


def test_a_lease_another_drain_took_after_a_follower_is_not_shown_live(rig: Rig) -> None:
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    stop = StopRequest()
    script = Script(lambda: rig.monitored.calls["read_change_feed"], rig.clock.advance, {2: stop.request})
    engine.drain_lease(lease.id, follow=script.follow(stop)).raise_for_error()
    rig.engine(owner="drain-b").store.acquire(lease.id)  # a short drain holds it now, the follow block still on it
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    (view,) = lease_views(store, rig.monitored, estimate=False)
    assert view.live and view.owner == "drain-b"
    assert view.follow is not None and not view.follow.live


def test_a_source_no_drain_followed_has_no_live_state(rig: Rig) -> None:
    rig.seed(outbox_doc("m1"))
    rig.drain()
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    overview = source_overview("orders", "d", store, rig.monitored, estimate=False)
    assert [view.follow for view in overview.leases] == [None]
    assert overview_row(overview, now=rig.clock()).live is None


def test_a_follow_block_of_the_wrong_shape_reads_as_unknown_not_as_a_number(rig: Rig) -> None:
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    for block, expected in (
        ("not an object", None),
        ({"published_last_minute": "many", "lag_seconds": True, "polls": 3, "owner": 7}, (None, None, 3, False)),
    ):
        document = dict(rig.leases.read(lease.id, lease.id))
        rig.leases.replace(lease.id, lease.id, {**document, "follow": block})
        (view,) = lease_views(store, rig.monitored, estimate=False)
        follow = view.follow
        shown = (
            None if follow is None else (follow.published_last_minute, follow.lag_seconds, follow.polls, follow.live)
        )
        assert shown == expected, block


def test_f_09_the_summary_xcom_reads_back_as_the_summary_it_was_the_operators_extra_keys_ignored(rig: Rig) -> None:
    """F-09: a drain's XCom form (``to_dict``) is plain JSON, and ``DrainSummary.model_validate`` reads it back to
    the same counts, earlier tries included; keys the operator adds (``topics``) are not the summary's."""
    tries = _three_tries(rig, last_fails=False)
    pushed = json.loads(json.dumps({**tries[-1], "topics": {"orders": 1}}))

    read = DrainSummary.model_validate(pushed)

    assert read.to_dict() == tries[-1]
    assert [(t.number, t.error_type) for t in read.earlier_tries] == [
        (1, "ServiceUnavailable"),
        (2, "ServiceUnavailable"),
    ]
    assert read.request_units_per_delivered == tries[-1]["request_units_per_delivered"]


def test_a_run_value_that_does_not_read_back_as_a_drain_summary_is_left_out_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = _runs({"lease": "a", "published": 4, "delivered": 4}, {"lease": "a", "published": "many"})

    with caplog.at_level("WARNING", logger="airflow_chatter.operations.monitoring"):
        points = run_points(runs)
        counted = totals(runs)

    assert [p.published for p in points] == [4, 0] and counted["published"] == 4
    assert "run-1" in caplog.text and "published" in caplog.text, caplog.text


def _row_after(rig: Rig, *, limit: float | None = None, runs: list[RunRecord] | None = None) -> object:
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    view = source_overview(
        "orders", "d", store, rig.monitored, runs or [], now=rig.clock.now, max_pending_age_seconds=limit
    )
    return overview_row(view, now=rig.clock.now)


def test_lag_is_the_age_of_the_oldest_pending_document_not_the_continuations(rig: Rig) -> None:
    """An idle, caught-up lease whose checkpoint is 9 minutes old has no lag: "caught up"; once documents are
    written, the lag is how long the oldest of them has waited, however old the checkpoint."""
    rig.seed(outbox_doc("m1"))
    summary = rig.drain().to_dict()
    rig.clock.advance(540)  # nine idle minutes
    idle = _row_after(rig, runs=_runs(summary))
    assert (idle.lag_seconds, idle.caught_up, idle.pending, idle.state) == (0.0, True, 0, "healthy"), idle  # type: ignore[attr-defined]

    rig.seed(outbox_doc("m2"))
    rig.clock.advance(400)
    rig.seed(outbox_doc("m3"))
    rig.clock.advance(20)
    waiting = _row_after(rig, runs=_runs(summary))
    assert (waiting.lag_seconds, waiting.caught_up, waiting.pending) == (420.0, False, 2), waiting  # type: ignore[attr-defined]
    assert waiting.state == "lagging", "the oldest has waited over LAG_SECONDS"  # type: ignore[attr-defined]


def test_a_bounded_estimate_without_a_pending_document_has_an_unknown_lag_never_zero(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"m{n}", status="delivered") for n in range(3)), outbox_doc("late"))
    lease = rig.engine().ensure_leases()[0]
    estimate = estimate_pending(rig.monitored, lease, page_items=1, max_pages=2)
    assert (estimate.count, estimate.bounded, estimate.age_seconds(rig.clock.now)) == (0, True, None)


def test_a_source_that_never_drained_says_so_not_healthy(rig: Rig) -> None:
    row = _row_after(rig)
    assert row.state == "never drained" and row.reasons == ("no drain has run yet: no lease, no run",)  # type: ignore[attr-defined]
    assert row.lag_seconds is None and not row.caught_up, "no lease: the age is unknown, never 0"  # type: ignore[attr-defined]


def test_a_pending_document_older_than_max_pending_age_makes_the_source_overdue(rig: Rig) -> None:
    """``max_pending_age_seconds``: the oldest pending document over it is the row's state, with the age named."""
    rig.seed(outbox_doc("m1"))
    summary = rig.drain().to_dict()
    rig.seed(outbox_doc("m2"))
    rig.clock.advance(200)
    within = _row_after(rig, limit=300, runs=_runs(summary))
    assert (within.state, within.pending_age_verdict) == ("healthy", "within")  # type: ignore[attr-defined]
    rig.clock.advance(150)
    over = _row_after(rig, limit=300, runs=_runs(summary))
    assert (over.state, over.pending_age_verdict, over.lag_seconds) == ("overdue", "over", 350.0)  # type: ignore[attr-defined]
    assert "waited 350 s, over max_pending_age_seconds 300" in over.reasons[0]  # type: ignore[attr-defined]
    rig.drain()
    assert _row_after(rig, limit=300, runs=_runs(summary)).state == "healthy", "drained: the alert clears"  # type: ignore[attr-defined]
