"""The read model of the monitoring page: what a person needs to see, per source, to know in seconds whether any
lease is suspended or any Outbox Document undeliverable, and which lease lags.

Nothing here imports Airflow, and nothing here writes: leases are read through ``LeaseStore``, the pending estimate
reads the change feed after a lease's checkpoint without taking the lease or moving it, and every query is
parameterised and bounded (``TOP`` of a capped page size, a bounded number of change-feed pages). The Airflow
plugin (``airflow_chatter.airflow.plugins.api``) feeds in what only Airflow knows: the recent runs' drain summaries
(their XCom), and who asks.

The stamp of an undeliverable document records no reason (CTR-04: one ``status`` op), so its violations are
re-derived here by the Outbox Document Contract from the document itself: the same verdict the drain reached, or
none when the document has been repaired since (it can be requeued).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.drain.follow import FOLLOW_FIELD, FollowCounts
from airflow_chatter.drain.leases import ACTIVE, Lease, LeaseStore
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.source import SourceLeases
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.drain.suspension import WINDOW
from airflow_chatter.drain.tries import TryRecord
from airflow_chatter.operations.delivery_figures import DeliveryFigures, delivery_figures
from airflow_chatter.operations.outbox_queries import count_undeliverable, undeliverable_after
from airflow_chatter.operations.pending import PendingEstimate, estimate_pending
from airflow_chatter.operations.pending_age import PendingAge, oldest_pending_age
from airflow_chatter.outbox.contract import Undeliverable, verify
from airflow_chatter.outbox.document import DESTINATION_FIELD, MESSAGE_ID_FIELD
from airflow_chatter.ports import Document, DocumentContainer, FeedRangeGone

log = logging.getLogger(__name__)

#: Most rows one list request returns; a bigger page size is refused (each request stays bounded in RU).
MAX_PAGE_SIZE = 100
#: The owner name a read-only store carries; it never acquires, so it never appears on a lease.
MONITOR_OWNER = "chatter-monitor"

# ------------------------------------------------------------------------------------------------
# Values.
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """The last fault of a lease: the Confirmation Failure its suspension state recorded (``recorded_in`` "lease"),
    or, for a lease written before faults were recorded, the newest error a drain of it reported ("run summary")."""

    error_type: str
    error_message: str
    run_id: str | None
    at: str | None
    recorded_in: Literal["lease", "run summary"] = "run summary"


@dataclass(frozen=True)
class SuspensionView:
    """A lease's Drain Suspension as the page shows it: the window ends 60 s after it was (re-)armed."""

    lease_id: str
    feed_range: str
    consecutive_failures: int
    suspended: bool
    armed_at: str | None
    window_end: str | None
    probe_consumed: bool
    last_fault: Fault | None


@dataclass(frozen=True)
class FollowView:
    """What a following drain (``follow: true``) last wrote on its lease (``follow``, drain/follow.py): written on
    each renewal and each checkpoint, right after a change-feed read (``last_poll_at``), so at most half a lease
    duration old while it follows.

    ``live``: the drain that wrote it holds the lease now (its owner, unexpired): a live follower. A lease released,
    expired, or taken by another drain since keeps the block; it is then shown, not live.
    """

    live: bool
    last_poll_at: str | None
    published_last_minute: int | None
    lag_seconds: float | None
    polls: int | None
    published: int | None


@dataclass(frozen=True)
class LeaseView:
    id: str
    feed_range: str
    state: str
    owner: str | None
    expires_at: str | None
    live: bool
    checkpointed_at: str | None
    continuation_age_seconds: float | None
    suspension: SuspensionView
    pending: PendingEstimate | None
    last_drain: dict[str, Any] | None
    last_drain_run: str | None
    etag: str
    #: Follow mode: what a following drain last wrote on the lease; ``None`` for a lease no drain followed.
    follow: FollowView | None = None
    #: How long the oldest Pending Outbox Document after the checkpoint has waited (the lease's lag): 0 when caught
    #: up, ``None`` when unknown (not estimated, or pending documents beyond the pages the estimate reads).
    pending_age_seconds: float | None = None


@dataclass(frozen=True)
class UndeliverableView:
    id: str
    message_id: str | None
    destination: str | None
    etag: str
    modified_at: str | None
    violations: tuple[str, ...]
    verdict: str


@dataclass(frozen=True)
class UndeliverablePage:
    """A page of undeliverable documents; ``continuation`` is the last item id shown when there is a next page."""

    items: tuple[UndeliverableView, ...]
    continuation: str | None
    page_size: int


@dataclass(frozen=True)
class RunRecord:
    """One DAG run and the drain summaries (XCom ``return_value``, or ``summary`` of a failed drain) of its tasks."""

    run_id: str
    run_type: str | None
    state: str | None
    started_at: str | None
    summaries: tuple[Mapping[str, Any], ...] = ()
    #: The source a backfill run drained (its conf ``source``); None for a source's own drain DAG.
    source: str | None = None


@dataclass(frozen=True)
class RunPoint:
    """One point of the page's chart: a run's totals over its leases."""

    run_id: str
    run_type: str | None
    state: str | None
    at: str | None
    published: int
    delivered: int
    undeliverable: int
    refused_batches: int
    max_continuation_age_seconds: float | None
    request_units: float | None
    request_units_per_delivered: float | None
    failed_leases: int
    #: The tries the point counts: each drain task's last try and the earlier ones it reported (every try counts).
    tries: int = 0


#: What the run totals count: every try of each drain task of the runs shown. Airflow keeps a task's XCom of its
#: last try only; that summary carries the earlier tries' counts, recorded on the lease (``drain/tries.py``).
TOTALS_COVER = "every try of each drain task of the runs shown"


@dataclass(frozen=True)
class FailureCounts:
    """Two counts of Confirmation Failures the page shows, side by side, so a difference is explained, not hidden.

    ``in_runs`` sums every try of each drain task of the runs shown; ``on_leases`` sums the leases' consecutive
    failures, which every try adds to and a successful page resets. They agree while the failures are the runs
    shown and none has succeeded since; otherwise ``why_they_differ`` says which scope explains the difference.
    """

    in_runs: int
    on_leases: int
    totals_cover: str
    why_they_differ: str | None


#: Run states whose drain tries may still be running: their counts are on the leases, not yet in their summaries.
IN_FLIGHT = ("running", "queued", "up_for_retry", "restarting")


def failure_counts(
    totals_: Mapping[str, float], leases: Sequence[LeaseView], runs: Sequence[RunRecord] = ()
) -> FailureCounts:
    """The two counts and, when they differ, which of the counts' scopes explains it: a run still in flight (its
    try has counted on the lease what its summary reports only when it ends), else the scopes' difference."""
    in_runs = int(totals_.get("confirmation_failures", 0))
    on_leases = sum(view.suspension.consecutive_failures for view in leases)
    why = None
    running = [run.run_id for run in runs if (run.state or "").lower() in IN_FLIGHT]
    if in_runs != on_leases and running and on_leases > in_runs:
        why = (
            f"the leases ({on_leases}) count the Confirmation Failures of a try still in flight (run "
            f"{', '.join(running)}): it reports them in the run totals ({in_runs}) when it ends"
        )
    elif in_runs != on_leases:
        why = (
            f"the run totals ({in_runs}) count {TOTALS_COVER}; the leases ({on_leases}) count the consecutive "
            "Confirmation Failures since each lease's last successful page: a success resets them, they include "
            "runs older than those shown, and a try killed before it released its lease recorded nothing in the "
            "run totals"
        )
    return FailureCounts(in_runs=in_runs, on_leases=on_leases, totals_cover=TOTALS_COVER, why_they_differ=why)


@dataclass(frozen=True)
class SourceOverview:
    source: str
    dag_id: str
    leases: tuple[LeaseView, ...]
    suspensions: tuple[SuspensionView, ...]
    undeliverable_count: int
    runs: tuple[RunPoint, ...]
    totals: dict[str, float] = field(default_factory=dict)
    #: The run totals' Confirmation Failures beside the leases' own count, and why they differ when they do.
    failure_counts: FailureCounts | None = None
    #: The oldest Pending Outbox Document's age against the source's ``max_pending_age_seconds``.
    pending_age: PendingAge = field(default_factory=lambda: PendingAge(None, None))
    #: The guarantee, Kafka transactions and throttling its drains reported over the runs shown.
    delivery: DeliveryFigures = field(default_factory=lambda: delivery_figures(()))

    @property
    def attention(self) -> bool:
        """Whether the page should draw the eye: a suspended lease or an undeliverable document."""
        return bool(self.suspensions) or self.undeliverable_count > 0


# ------------------------------------------------------------------------------------------------
# Leases.
# ------------------------------------------------------------------------------------------------


def monitor_store(
    options: SourceOptions, monitored: DocumentContainer, leases: DocumentContainer, *, clock: Clock = utc_now
) -> LeaseStore:
    """The ``LeaseStore`` of a source's scheduled lease set, for reading: the drain's own (``SourceLeases.open``,
    the same container check and Source Identity, SRC-02), holding nothing under its ``MONITOR_OWNER`` name."""
    return SourceLeases.open(options, monitored, leases, clock=clock, owner=MONITOR_OWNER).store


def suspension_view(lease: Lease, last_fault: Fault | None = None) -> SuspensionView:
    """``last_fault`` (from the runs) is shown only when the lease's own state recorded none."""
    state = lease.suspension
    if state.last_fault is not None:
        recorded = state.last_fault
        last_fault = Fault(recorded.error_type, recorded.message, None, _iso(recorded.at), "lease")
    window_end = state.armed_at + WINDOW if state.armed_at is not None else None
    return SuspensionView(
        lease_id=lease.id,
        feed_range=lease.token,
        consecutive_failures=state.consecutive_failures,
        suspended=state.suspended,
        armed_at=_iso(state.armed_at),
        window_end=_iso(window_end),
        probe_consumed=state.probe_consumed,
        last_fault=last_fault,
    )


def follow_view(lease: Lease, now: datetime) -> FollowView | None:
    """The ``follow`` block a following drain wrote on ``lease`` (``None``: none, or not an object); a value of the
    wrong type reads as unknown (``None``), never as a number it is not (``FollowCounts``)."""
    block = lease.document.get(FOLLOW_FIELD)
    if not isinstance(block, Mapping):
        return None
    counts = FollowCounts.model_validate(block)
    return FollowView(
        live=lease.is_live(now) and counts.owner is not None and counts.owner == lease.owner,
        last_poll_at=counts.last_poll_at,
        published_last_minute=counts.published_last_minute,
        lag_seconds=counts.lag_seconds,
        polls=counts.polls,
        published=counts.published,
    )


def lease_views(
    store: LeaseStore,
    monitored: DocumentContainer,
    runs: Sequence[RunRecord] = (),
    *,
    now: datetime | None = None,
    estimate: bool = True,
) -> list[LeaseView]:
    """Every active lease of the store, with its last drain (from ``runs``, newest first) and pending estimate."""
    moment = (now or store.now()).astimezone(UTC)
    views = []
    for lease in store.list_leases():
        if lease.state != ACTIVE:
            continue
        last, last_run = _last_summary(runs, lease.id)
        pending = None
        if estimate:
            try:
                pending = estimate_pending(monitored, lease)
            except FeedRangeGone:
                pending = None  # split since it was listed: the next drain creates its children
        age = (moment - lease.checkpointed_at).total_seconds() if lease.checkpointed_at is not None else None
        views.append(
            LeaseView(
                id=lease.id,
                feed_range=lease.token,
                state=lease.state,
                owner=lease.owner,
                expires_at=_iso(lease.expires_at),
                live=lease.is_live(moment),
                checkpointed_at=_iso(lease.checkpointed_at),
                continuation_age_seconds=round(max(0.0, age), 1) if age is not None else None,
                suspension=suspension_view(lease, _last_fault(runs, lease.id)),
                pending=pending,
                last_drain=dict(last) if last is not None else None,
                last_drain_run=last_run,
                etag=lease.etag,
                follow=follow_view(lease, moment),
                pending_age_seconds=pending.age_seconds(moment) if pending is not None else None,
            )
        )
    return views


def drain_summaries(run: RunRecord) -> list[tuple[Mapping[str, Any], DrainSummary]]:
    """The run's drain summaries, each as pushed (the page shows it as it is) and read back with
    ``DrainSummary.model_validate``; an XCom value that is not a drain summary is left out, and logged."""
    read = []
    for raw in run.summaries:
        try:
            read.append((raw, DrainSummary.model_validate(raw)))
        except ValidationError as error:
            log.warning("Run %s: a drain summary that does not read back is left out: %s", run.run_id, error)
    return read


def _summaries_of(
    runs: Iterable[RunRecord], lease_id: str
) -> Iterable[tuple[RunRecord, Mapping[str, Any], DrainSummary]]:
    for run in runs:
        for raw, summary in drain_summaries(run):
            if summary.lease == lease_id:
                yield run, raw, summary


def _last_summary(runs: Sequence[RunRecord], lease_id: str) -> tuple[Mapping[str, Any] | None, str | None]:
    for run, raw, _ in _summaries_of(runs, lease_id):
        return raw, run.run_id
    return None, None


#: A refused batch fails its drain with this; it is the suspension speaking, not the fault that opened it.
_REFUSAL = "DrainSuspendedError"


def _last_fault(runs: Sequence[RunRecord], lease_id: str) -> Fault | None:
    """The newest error a drain of the lease reported, other than the suspension's own refusal."""
    for run, _, summary in _summaries_of(runs, lease_id):
        if summary.error_type and summary.error_type != _REFUSAL:
            return Fault(summary.error_type, summary.error_message or "", run.run_id, run.started_at)
    return None


# ------------------------------------------------------------------------------------------------
# Runs (the chart and the recent summaries).
# ------------------------------------------------------------------------------------------------


def run_points(runs: Sequence[RunRecord]) -> list[RunPoint]:
    """One point per run (newest first, as given): its leases' totals, continuation age and request units."""
    points = []
    for run in runs:
        summaries = [summary for _, summary in drain_summaries(run)]
        tries = [try_ for summary in summaries for try_ in every_try(summary)]
        ages = [s.continuation_age_seconds for s in summaries if s.continuation_age_seconds is not None]
        charges = [units for t in tries if (units := _reported_units(t)) is not None]
        delivered = sum(t.delivered for t in tries)
        units = round(sum(charges), 2) if charges else None
        points.append(
            RunPoint(
                run_id=run.run_id,
                run_type=run.run_type,
                state=run.state,
                at=run.started_at,
                published=sum(t.published for t in tries),
                delivered=delivered,
                undeliverable=sum(t.undeliverable for t in tries),
                refused_batches=sum(t.refused_batches for t in tries),
                max_continuation_age_seconds=round(max(ages), 1) if ages else None,
                request_units=units,
                request_units_per_delivered=round(units / delivered, 2) if units is not None and delivered else None,
                failed_leases=sum(1 for s in summaries if s.error_type),
                tries=len(tries),
            )
        )
    return points


def every_try(summary: DrainSummary) -> list[TryRecord | DrainSummary]:
    """A drain summary's tries, each with its counts: the ones before it that it reports (``earlier_tries``, as
    recorded on its lease) and itself, the last try."""
    return [*summary.earlier_tries, summary]


def _reported_units(try_: TryRecord | DrainSummary) -> float | None:
    """A try's request units if its summary reported them (F-11); a summary from before F-11 has none."""
    return try_.request_units if "request_units" in try_.model_fields_set else None


#: The summary fields the instruments count too (MET): their totals over the runs shown.
TOTALLED = ("published", "delivered", "undeliverable", "dropped", "refused_batches", "confirmation_failures")


def totals(runs: Sequence[RunRecord]) -> dict[str, float]:
    """Totals over the runs shown of what the drain instruments count, and request units when reported."""
    out: dict[str, float] = {name: 0 for name in TOTALLED}
    units = 0.0
    has_units = False
    for run in runs:
        for try_ in (t for _, summary in drain_summaries(run) for t in every_try(summary)):
            for name in TOTALLED:
                out[name] += getattr(try_, name)
            if (charge := _reported_units(try_)) is not None:
                units += charge
                has_units = True
    if has_units:
        out["request_units"] = round(units, 2)
    return out


# ------------------------------------------------------------------------------------------------
# Undeliverable documents.
# ------------------------------------------------------------------------------------------------


def undeliverable_view(document: Document) -> UndeliverableView:
    """An undeliverable document with its violations, re-derived by the Outbox Document Contract."""
    verdict = verify(document)
    if isinstance(verdict, Undeliverable):
        violations, message = verdict.violations, verdict.message
    else:
        violations, message = (), "passes the Outbox Document Contract now (repaired): it can be requeued"
    ts = document.get("_ts")
    message_id = document.get(MESSAGE_ID_FIELD)
    destination = document.get(DESTINATION_FIELD)
    return UndeliverableView(
        id=str(document.get("id")),
        message_id=message_id if isinstance(message_id, str) else None,
        destination=destination if isinstance(destination, str) else None,
        etag=str(document.get("_etag") or ""),
        modified_at=_iso(datetime.fromtimestamp(float(ts), UTC)) if isinstance(ts, (int, float)) else None,
        violations=tuple(violations),
        verdict=message,
    )


def list_undeliverable(
    container: DocumentContainer,
    *,
    size: int = 25,
    continuation: str | None = None,
    message_id: str | None = None,
) -> UndeliverablePage:
    """One page of undeliverable documents, by item id; ``message_id`` keeps those whose MessageId starts with it.

    ``continuation`` is the item id the page resumes after (the previous page's ``continuation``, ``None`` after the
    last page). One parameterised query per page, ``TOP size+1`` (the extra row says whether there is a next page).
    """
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise ValueError(f"a page holds 1 to {MAX_PAGE_SIZE} documents, not {size}")
    rows = undeliverable_after(container, top=size + 1, after=continuation, message_id=message_id)
    shown = rows[:size]
    more = len(rows) > size and shown
    return UndeliverablePage(
        items=tuple(undeliverable_view(document) for document in shown),
        continuation=str(shown[-1]["id"]) if more else None,
        page_size=size,
    )


# ------------------------------------------------------------------------------------------------
# The whole source.
# ------------------------------------------------------------------------------------------------


def source_overview(
    name: str,
    dag_id: str,
    store: LeaseStore,
    monitored: DocumentContainer,
    runs: Sequence[RunRecord] = (),
    *,
    now: datetime | None = None,
    estimate: bool = True,
    max_pending_age_seconds: float | None = None,
) -> SourceOverview:
    """Everything the page shows for one source; ``runs`` are its drain DAG's recent runs, newest first."""
    leases = lease_views(store, monitored, runs, now=now, estimate=estimate)
    run_totals = totals(runs)
    age = oldest_pending_age([view.pending_age_seconds for view in leases], max_pending_age_seconds)
    return SourceOverview(
        source=name,
        dag_id=dag_id,
        leases=tuple(leases),
        suspensions=tuple(view.suspension for view in leases if view.suspension.suspended),
        undeliverable_count=count_undeliverable(monitored),
        runs=tuple(run_points(runs)),
        totals=run_totals,
        failure_counts=failure_counts(run_totals, leases, runs),
        pending_age=age,
        delivery=delivery_figures([(run.run_id, [s for _, s in drain_summaries(run)]) for run in runs]),
    )


def measure_pending_age(
    store: LeaseStore, monitored: DocumentContainer, limit_seconds: float | None, *, now: datetime | None = None
) -> PendingAge:
    """The source's oldest pending age now, as the page computes it (the pending-age check's reading): the change
    feed after each active lease's checkpoint, read-only."""
    views = lease_views(store, monitored, now=now)
    return oldest_pending_age([view.pending_age_seconds for view in views], limit_seconds)


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None
