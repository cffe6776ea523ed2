"""The Outbox page's delivery and throttling figures of one source, summed over the runs the page shows.

What a person asks of a source beside its counts: which delivery guarantee its drains kept, whether its Kafka
transactions commit (or abort, or were fenced by a takeover, or needed a recovery), and whether the container
throttles it (429s, the time its drains waited on them, the rate they paced themselves to). Every figure comes from
the drain summaries the page already reads (their XCom, ``DrainSummary``), as the page's other totals do; nothing here
reads Cosmos DB, Kafka or the OpenTelemetry instruments.

One scope differs from the run totals: a drain task's earlier tries record their counts on the lease
(``drain/tries.py``), not their 429s or transactions, so these figures sum the last try of each drain task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_chatter.drain.summary import DrainSummary

#: What the figures sum, said on the page beside them.
FIGURES_COVER = (
    "the last try of each drain task of the runs shown (an earlier try records its counts, not its 429s or "
    "transactions)"
)


@dataclass(frozen=True)
class DeliveryFigures:
    """One source's guarantee, transactions and throttling over the runs shown. ``None``: no drain reported it.

    ``guarantee`` is the newest drain's; ``guarantees`` every guarantee the runs drained under, newest first (two
    when the source's ``guarantee`` changed within them). ``paced_request_units_per_second`` is the newest run with a
    paced drain: the rates its lease drains ended at, summed (they share the container), ``paced_drains`` of its
    ``run_drains`` lease drains paced; an unpaced drain (no cap, no 429) has no rate to add.
    """

    guarantee: str | None
    guarantees: tuple[str, ...]
    drains: int
    transactions_committed: int
    transactions_aborted: int
    fenced_drains: int
    recovered_pages: int
    throttled: int
    throttle_limit_reached: int
    throttle_waited_seconds: float
    paced_request_units_per_second: float | None
    paced_run: str | None
    paced_drains: int
    run_drains: int
    covers: str = FIGURES_COVER


def delivery_figures(runs: Sequence[tuple[str, Sequence[DrainSummary]]]) -> DeliveryFigures:
    """The figures of ``runs`` (newest first): each run's id and its drain summaries, as read back."""
    summaries = [summary for _, run in runs for summary in run]
    guarantees = tuple(dict.fromkeys(summary.guarantee for summary in summaries))
    paced_run, paced = None, [0.0]
    run_drains = 0
    for run_id, run in runs:
        rates = [s.paced_request_units_per_second for s in run if s.paced_request_units_per_second is not None]
        if rates:
            paced_run, paced, run_drains = run_id, rates, len(run)
            break
    return DeliveryFigures(
        guarantee=guarantees[0] if guarantees else None,
        guarantees=guarantees,
        drains=len(summaries),
        transactions_committed=sum(s.transactions_committed for s in summaries),
        transactions_aborted=sum(s.transactions_aborted for s in summaries),
        fenced_drains=sum(1 for s in summaries if s.fenced),
        recovered_pages=sum(s.recovered_pages for s in summaries),
        throttled=sum(s.throttled for s in summaries),
        throttle_limit_reached=sum(1 for s in summaries if s.throttle_limit_reached),
        throttle_waited_seconds=round(sum(s.throttle_waited_seconds for s in summaries), 1),
        paced_request_units_per_second=round(sum(paced), 1) if paced_run is not None else None,
        paced_run=paced_run,
        paced_drains=len(paced) if paced_run is not None else 0,
        run_drains=run_drains,
    )


__all__ = ["FIGURES_COVER", "DeliveryFigures", "delivery_figures"]
