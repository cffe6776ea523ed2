"""The overview table's rules (``airflow_chatter.operations.overview``): a source's state and the severity order."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_chatter.operations.monitoring import SourceOverview
from airflow_chatter.operations.overview import SEVERITY, broken_row, derive_state, overview_row, sort_rows

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_most_severe_state_that_holds_wins_and_every_reason_is_listed() -> None:
    state, reasons = derive_state(suspended_leases=1, undeliverable=3, lagging_leases=2)
    assert state == "suspended"
    assert reasons == ("1 lease(s) suspended", "3 undeliverable document(s)", "2 lease(s) lagging over 300 s")
    assert derive_state(failing_leases=1, undeliverable=1)[0] == "failing"
    assert derive_state(undeliverable=1, lagging_leases=1)[0] == "undeliverable"
    assert derive_state(lagging_leases=1)[0] == "lagging"
    assert derive_state() == ("healthy", ())
    assert derive_state(broken=True)[0] == "broken config"


def test_severity_order_puts_what_stops_delivery_before_what_waits() -> None:
    assert SEVERITY == (
        "suspended",
        "broken config",
        "failing",
        "overdue",
        "undeliverable",
        "never drained",
        "lagging",
        "healthy",
    )


def _row(name: str, **counts: int) -> object:
    view = SourceOverview(name, f"chatter_drain_{name}", (), (), counts.get("undeliverable", 0), ())
    return overview_row(view, now=NOW)


def test_rows_sort_worst_first_then_by_name() -> None:
    healthy = _row("alpha")
    assert healthy.state == "never drained"  # type: ignore[attr-defined]
    undeliverable = _row("zeta", undeliverable=2)
    broken = broken_row("beta", "sources[1].database: field required")
    rows = sort_rows([healthy, undeliverable, broken])  # type: ignore[list-item]
    assert [(r.source, r.state) for r in rows] == [
        ("beta", "broken config"),
        ("zeta", "undeliverable"),
        ("alpha", "never drained"),
    ]
    assert rows[0].error == "sources[1].database: field required" and rows[0].undeliverable is None


def test_a_source_without_runs_or_leases_shows_unknown_not_zero() -> None:
    row = _row("alpha")
    assert row.pending is None and row.lag_seconds is None and row.last_drain_at is None  # type: ignore[attr-defined]
    assert row.request_units_per_delivered is None and row.live is None  # type: ignore[attr-defined]
