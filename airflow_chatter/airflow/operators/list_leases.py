"""``ChatterListLeasesOperator``: create a source's missing leases and hand out the active ones to the drains."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.utils.values import as_bool, as_datetime, as_list

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChatterListLeasesOperator(ChatterSourceBaseOperator):
    """Create missing lease documents (new feed ranges, split children) and return the active lease ids.

    The return value feeds ``ChatterDrainOperator.partial(...).expand(lease_id=...)``. The monitored and
    lease containers are verified first (partition key, TTL), so a misconfigured source fails here.

    :param source: the source config (a ``SourceConfig`` or its dict form).
    :param lease_set: ``"scheduled"`` (default) or ``"backfill"`` (the source's backfill prefix).
    :param feed_ranges: (templated) only return leases whose feed range token or lease id is listed;
        default all.
    :param reset: (templated) delete this lease set's idle leases first, so its drains start from the
        beginning (backfills only; refused for the scheduled lease set).
    :param plan_only: (templated) a dry run: create nothing; log and return no leases, pushing the plan (pending
        count, feed ranges) as XCom ``plan``.
    :param since: (templated) an ISO timestamp (UTC): the leases this task creates start reading the change
        feed there, to the whole second, instead of at the beginning (a backfill from a point in time; refused
        for the scheduled lease set). Leases that already exist keep their position, so combine it with
        ``reset``. A dry run counts the pending documents modified at or after it.
    """

    template_fields: Sequence[str] = ("source_name", "feed_ranges", "reset", "plan_only", "since", "cosmos_conn_id")

    def __init__(
        self,
        *,
        feed_ranges: Any = None,
        reset: Any = False,
        plan_only: Any = False,
        since: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.feed_ranges = feed_ranges
        self.reset = reset
        self.plan_only = plan_only  # NOTE: not "dry_run", which is a BaseOperator method
        self.since = since

    @task_scope
    def execute(self, context: Context) -> list[str]:
        from airflow_chatter.operations.plans import LeaseRequest, lease_report, list_leases

        since = as_datetime(self.since, "since")
        request = LeaseRequest(
            source=self.config.name,
            lease_prefix=self.lease_prefix,
            scheduled=self.lease_set != "backfill" or self.lease_prefix == self.config.lease_prefix,
            feed_ranges=frozenset(as_list(self.feed_ranges, "feed_ranges")),
            reset=as_bool(self.reset, "reset"),
            since=since,
            plan_only=as_bool(self.plan_only, "plan_only"),
        )
        monitored, _ = self.containers()
        listing = list_leases(
            request,
            monitored=monitored,
            open_source=lambda: self.source_leases(context, start_from=since),
            now=datetime.now(UTC),
        )
        if listing.plan is not None:
            self.log.info("Dry run, nothing drained: %s", listing.plan)
            if context and context.get("ti") is not None:
                context["ti"].xcom_push(key="plan", value=listing.plan)
            return []
        if request.reset:
            self.log.info("Reset %d lease(s) of prefix %r: %s", len(listing.reset), request.lease_prefix, listing.reset)
        if since is not None:
            self.log.info("Leases created now start reading at %s", listing.start_from)
        for lease in listing.leases:
            self.log.info("Lease %s", lease_report(lease))
        return [lease.id for lease in listing.leases]
