"""The Outbox page's delivery and throttling figures, summed from the drain summaries of the runs shown."""

from __future__ import annotations

from typing import Any

from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.operations.delivery_figures import FIGURES_COVER, delivery_figures
from airflow_chatter.operations.monitoring import RunRecord, monitor_store, source_overview
from tests.unit.drain._drain_support import Rig


def _run(run_id: str, *summaries: dict[str, Any]) -> tuple[str, list[DrainSummary]]:
    return run_id, [DrainSummary.model_validate(s) for s in summaries]


def test_exactly_once_figures_sum_transactions_fenced_drains_and_recovered_pages_over_the_runs() -> None:
    figures = delivery_figures(
        [
            _run(
                "run-2",
                {"lease": "a", "guarantee": "exactly_once", "transactions_committed": 4, "transactions_aborted": 1},
                {"lease": "b", "guarantee": "exactly_once", "transactions_committed": 2, "fenced": True},
            ),
            _run(
                "run-1", {"lease": "a", "guarantee": "exactly_once", "transactions_committed": 3, "recovered_pages": 2}
            ),
        ]
    )
    assert (figures.guarantee, figures.guarantees, figures.drains) == ("exactly_once", ("exactly_once",), 3)
    assert (figures.transactions_committed, figures.transactions_aborted) == (9, 1)
    assert (figures.fenced_drains, figures.recovered_pages) == (1, 2)


def test_a_guarantee_changed_within_the_runs_shows_both_the_newest_first() -> None:
    figures = delivery_figures(
        [_run("run-2", {"lease": "a", "guarantee": "exactly_once"}), _run("run-1", {"lease": "a"})]
    )
    assert figures.guarantee == "exactly_once"
    assert figures.guarantees == ("exactly_once", "at_least_once")


def test_f11_throttling_sums_429s_and_waits_and_the_paced_rate_is_the_newest_paced_runs_drains_summed() -> None:
    """F-11: 429s and the time waited on them add up over every drain shown; the paced rate is not a sum over time
    but what the newest paced run's lease drains ended at together (they share the container)."""
    figures = delivery_figures(
        [
            _run("run-3", {"lease": "a"}),  # not paced: no cap, no 429
            _run(
                "run-2",
                {"lease": "a", "throttled": 5, "throttle_waited_seconds": 2.25, "paced_request_units_per_second": 60.0},
                {"lease": "b", "throttled": 1, "throttle_waited_seconds": 0.5, "paced_request_units_per_second": 40.5},
                {"lease": "c"},
            ),
            _run(
                "run-1",
                {
                    "lease": "a",
                    "throttled": 9,
                    "throttle_waited_seconds": 30.0,
                    "throttle_limit_reached": True,
                    "paced_request_units_per_second": 10.0,
                },
            ),
        ]
    )
    assert (figures.throttled, figures.throttle_waited_seconds, figures.throttle_limit_reached) == (15, 32.8, 1)
    assert (figures.paced_request_units_per_second, figures.paced_run) == (100.5, "run-2")
    assert (figures.paced_drains, figures.run_drains) == (2, 3)


def test_runs_with_no_drain_summary_report_nothing_as_unknown_not_as_a_guarantee_or_a_rate() -> None:
    figures = delivery_figures([("run-1", [])])
    assert (figures.guarantee, figures.guarantees, figures.drains) == (None, (), 0)
    assert (figures.paced_request_units_per_second, figures.paced_run, figures.paced_drains) == (None, None, 0)
    assert (figures.throttled, figures.transactions_committed, figures.fenced_drains) == (0, 0, 0)


def test_f09_the_source_overview_carries_the_figures_read_back_from_the_runs_xcom() -> None:
    """F-09: the XCom form of a summary reads back; the overview sums its figures, the earlier tries left out."""
    rig = Rig()
    summary = DrainSummary(
        lease="l",
        guarantee="exactly_once",
        transactions_committed=3,
        throttled=2,
        throttle_waited_seconds=1.5,
        paced_request_units_per_second=80.0,
    ).to_dict()
    runs = [RunRecord("run-1", "scheduled", "success", None, ({**summary, "topics": ["t"]},))]
    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    view = source_overview("orders", "chatter_drain_orders", store, rig.monitored, runs, estimate=False)
    delivery = view.delivery
    assert (delivery.guarantee, delivery.transactions_committed, delivery.throttled) == ("exactly_once", 3, 2)
    assert (delivery.throttle_waited_seconds, delivery.paced_request_units_per_second) == (1.5, 80.0)
    assert delivery.covers == FIGURES_COVER
