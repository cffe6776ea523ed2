"""The top of the monitoring page: one row per source, the worst first, so a suspended lease is the first thing an
operator sees however many sources there are (as a consumer-group list with its lag, or Airflow's DAG list).

A row's state is a rule, derived here from the source's read model (``monitoring.SourceOverview``) and nowhere else;
the page only draws it. States, most severe first:

* ``suspended`` - a lease's Drain Suspension is open: its documents wait until the fault is fixed.
* ``broken config`` - the source's entry in the sources file does not parse: nothing drains it.
* ``failing`` - a lease's last drain failed, or its suspension counts consecutive failures (not yet open).
* ``overdue`` - the oldest Pending Outbox Document has waited longer than the source's ``max_pending_age_seconds``.
* ``undeliverable`` - documents were stamped Undeliverable and wait for a repair and a requeue.
* ``never drained`` - no lease and no run: nothing has drained the source yet (its DAG paused, or new).
* ``lagging`` - a lease's oldest Pending document has waited longer than ``LAG_SECONDS``.
* ``healthy`` - none of these.

Lag is the time the oldest Pending Outbox Document has waited (``pending_age.py``), 0 and ``caught_up`` when none is
pending, ``None`` when unknown; never the continuation's age, which grows on an idle, caught-up lease.

Nothing here imports Airflow or writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from airflow_chatter.operations.monitoring import SourceOverview

State = Literal[
    "suspended", "broken config", "failing", "overdue", "undeliverable", "never drained", "lagging", "healthy"
]

#: Most severe first; a row's ``severity`` is its state's index here (0 is the worst).
SEVERITY: tuple[State, ...] = (
    "suspended",
    "broken config",
    "failing",
    "overdue",
    "undeliverable",
    "never drained",
    "lagging",
    "healthy",
)
#: A lease whose oldest Pending document has waited longer than this lags.
LAG_SECONDS = 300.0
#: "Published in the last hour" counts the runs started within this window: the API reads every run since
#: ``recent_since(now)`` besides the newest few, so the hour is summed, not the last N runs.
RECENT = timedelta(hours=1)
#: At most this many runs of one source are read for its hour (a run every 5 s); a cap, not a setting.
MAX_RUNS_IN_HOUR = 720
#: A refused batch fails its drain with this; the suspension speaks, the source is already ``suspended``.
_REFUSAL = "DrainSuspendedError"


@dataclass(frozen=True)
class OverviewRow:
    """One source's row. ``None`` means unknown (no lease, no run, a broken entry), never zero."""

    source: str
    dag_id: str | None
    state: State
    severity: int
    reasons: tuple[str, ...]
    leases: int
    suspended_leases: int
    pending: int | None
    pending_bounded: bool
    lag_seconds: float | None
    undeliverable: int | None
    last_drain_at: str | None
    last_drain_state: str | None
    last_drain_run: str | None
    published_last_hour: int
    request_units_per_delivered: float | None
    error: str | None = None
    #: Follow mode: whether a following drain holds one of the source's leases now; ``None`` when no drain ever
    #: followed one (the source drains in runs).
    live: bool | None = None
    #: Of the live followers: the newest poll, what they published in the last minute, the largest lag (``None``
    #: with none live).
    last_poll_at: str | None = None
    published_last_minute: int | None = None
    follow_lag_seconds: float | None = None
    #: No document pending on any lease (every lease's estimate exact): the lag column says "caught up".
    caught_up: bool = False
    #: The source's ``max_pending_age_seconds`` (``None``: not set) and the age's verdict against it.
    max_pending_age_seconds: float | None = None
    pending_age_verdict: str = "no limit"


def derive_state(
    *,
    broken: bool = False,
    suspended_leases: int = 0,
    failing_leases: int = 0,
    overdue: str | None = None,
    undeliverable: int = 0,
    never_drained: bool = False,
    lagging_leases: int = 0,
) -> tuple[State, tuple[str, ...]]:
    """The row's state (the most severe that holds) and every reason that holds, most severe first."""
    held: list[tuple[State, str]] = []
    if suspended_leases:
        held.append(("suspended", f"{suspended_leases} lease(s) suspended"))
    if broken:
        held.append(("broken config", "the sources entry does not parse"))
    if failing_leases:
        held.append(("failing", f"{failing_leases} lease(s) failing"))
    if overdue:
        held.append(("overdue", overdue))
    if undeliverable:
        held.append(("undeliverable", f"{undeliverable} undeliverable document(s)"))
    if never_drained:
        held.append(("never drained", "no drain has run yet: no lease, no run"))
    if lagging_leases:
        held.append(("lagging", f"{lagging_leases} lease(s) lagging over {LAG_SECONDS:.0f} s"))
    if not held:
        return "healthy", ()
    return held[0][0], tuple(reason for _, reason in held)


def sort_rows(rows: Sequence[OverviewRow]) -> list[OverviewRow]:
    """The worst first; among equals, the longest lag first, then by name (a stable, readable order)."""
    return sorted(rows, key=lambda r: (r.severity, -(r.lag_seconds or 0.0), r.source))


def overview_row(view: SourceOverview, *, now: datetime) -> OverviewRow:
    """A configured source's row, from the same read model as its detail (``monitoring.source_overview``)."""
    moment = now.astimezone(UTC)
    failing = sum(
        1
        for lease in view.leases
        if not lease.suspension.suspended  # a suspended lease counts once, as suspended
        and _failing(lease.suspension.consecutive_failures, lease.last_drain)
    )
    counts = [lease.pending for lease in view.leases if lease.pending is not None]
    lagging = sum(1 for lease in view.leases if (lease.pending_age_seconds or 0.0) > LAG_SECONDS)
    age = view.pending_age
    state, reasons = derive_state(
        suspended_leases=len(view.suspensions),
        failing_leases=failing,
        overdue=age.message if age.verdict == "over" else None,
        undeliverable=view.undeliverable_count,
        never_drained=not view.leases and not view.runs,
        lagging_leases=lagging,
    )
    newest = view.runs[0] if view.runs else None
    recent = [p for p in view.runs if p.at is not None and moment - _parse(p.at) <= RECENT]
    published = sum(p.published for p in recent)
    delivered = sum(p.delivered for p in recent)
    units = [p.request_units for p in recent if p.request_units is not None]
    if not units and newest is not None:  # nothing ran in the hour: the newest run's figure
        units = [newest.request_units] if newest.request_units is not None else []
        delivered = newest.delivered
    followed = [lease.follow for lease in view.leases if lease.follow is not None]
    live = [follow for follow in followed if follow.live]
    polls = [follow.last_poll_at for follow in live if follow.last_poll_at is not None]
    lags = [follow.lag_seconds for follow in live if follow.lag_seconds is not None]
    return OverviewRow(
        source=view.source,
        dag_id=view.dag_id,
        state=state,
        severity=SEVERITY.index(state),
        reasons=reasons,
        leases=len(view.leases),
        suspended_leases=len(view.suspensions),
        pending=sum(p.count for p in counts) if counts else None,
        pending_bounded=any(p.bounded for p in counts),
        lag_seconds=age.seconds,
        undeliverable=view.undeliverable_count,
        last_drain_at=newest.at if newest else None,
        last_drain_state=newest.state if newest else None,
        last_drain_run=newest.run_id if newest else None,
        published_last_hour=published,
        request_units_per_delivered=round(sum(units) / delivered, 2) if units and delivered else None,
        live=bool(live) if followed else None,
        last_poll_at=max(polls, key=_parse) if polls else None,
        published_last_minute=sum(f.published_last_minute or 0 for f in live) if live else None,
        follow_lag_seconds=max(lags) if lags else None,
        caught_up=bool(view.leases) and len(counts) == len(view.leases) and age.seconds == 0.0,
        max_pending_age_seconds=age.limit_seconds,
        pending_age_verdict=age.verdict,
    )


def recent_since(now: datetime) -> datetime:
    """The start of the window "Published (1 h)" sums."""
    return now.astimezone(UTC) - RECENT


def broken_row(name: str, error: str, dag_id: str | None = None) -> OverviewRow:
    """The row of a sources entry that does not parse: its name and the error that names the field."""
    state, reasons = derive_state(broken=True)
    return OverviewRow(
        source=name,
        dag_id=dag_id,
        state=state,
        severity=SEVERITY.index(state),
        reasons=reasons,
        leases=0,
        suspended_leases=0,
        pending=None,
        pending_bounded=False,
        lag_seconds=None,
        undeliverable=None,
        last_drain_at=None,
        last_drain_state=None,
        last_drain_run=None,
        published_last_hour=0,
        request_units_per_delivered=None,
        error=error,
    )


def _failing(consecutive_failures: int, last_drain: object) -> bool:
    if consecutive_failures > 0:
        return True
    if isinstance(last_drain, dict):
        error = last_drain.get("error_type")
        return bool(error) and error != _REFUSAL
    return False


def _parse(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
