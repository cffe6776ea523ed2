"""``ChatterListLeasesOperator``: create a source's missing leases and hand out the active ones to the drains."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.utils.values import as_bool, as_datetime, as_list
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.drain.source import SourceLeases


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
        from airflow_chatter.operations.backfill import refuse_empty_backfill
        from airflow_chatter.operations.outbox_queries import count_pending
        from airflow_chatter.operations.plans import lease_report, reset_leases

        wanted = set(as_list(self.feed_ranges, "feed_ranges"))
        reset = as_bool(self.reset, "reset")
        since = as_datetime(self.since, "since")
        refuse_empty_backfill(wanted=(), tokens=(), lease_ids=(), since=since, now=datetime.now(UTC))
        if as_bool(self.plan_only, "plan_only"):
            monitored, _ = self.containers()
            ranges = [r.token for r in monitored.read_feed_ranges(force_refresh=True)]
            self._refuse_unknown_ranges(context, wanted, ranges)  # what the real run refuses, the dry run does too
            plan = {
                "source": self.config.name,
                "lease_prefix": self.lease_prefix,
                "feed_ranges": [r for r in ranges if not wanted or r in wanted],
                "pending": count_pending(monitored, since=since),
                "since": since.isoformat() if since else None,
                "reset": reset,
            }
            self.log.info("Dry run, nothing drained: %s", plan)
            if context and context.get("ti") is not None:
                context["ti"].xcom_push(key="plan", value=plan)
            return []
        scheduled = self.lease_set != "backfill" or self.lease_prefix == self.config.lease_prefix
        if since is not None and scheduled:
            raise ConfigurationError(
                "since", self.since, "is refused for the scheduled lease set (its new leases start at the beginning)"
            )
        source = self.source_leases(context, start_from=since)
        self._refuse_unknown_ranges(context, wanted, [r.token for r in source.monitored.read_feed_ranges()], source)
        if reset:
            if scheduled:
                raise ConfigurationError(
                    "reset", True, "is refused for the scheduled lease set (it would drop its checkpoints)"
                )
            deleted = reset_leases(source.store)
            self.log.info("Reset %d lease(s) of prefix %r: %s", len(deleted), self.lease_prefix, deleted)
        leases = source.topology.ensure_leases()
        chosen = [lease for lease in leases if not wanted or lease.token in wanted or lease.id in wanted]
        if since is not None:
            self.log.info("Leases created now start reading at %s", source.store.start_from)
        for lease in chosen:
            self.log.info("Lease %s", lease_report(lease))
        return [lease.id for lease in chosen]

    def _refuse_unknown_ranges(
        self, context: Context, wanted: set[str], tokens: list[str], source: SourceLeases | None = None
    ) -> None:
        """``feed_ranges`` naming neither a feed range token nor an existing lease id fails before anything is
        written (a reset included): a typo would otherwise drain less, or nothing, and succeed."""
        from airflow_chatter.operations.backfill import refuse_empty_backfill

        if wanted and not wanted <= set(tokens):
            known = [lease.id for lease in (source or self.source_leases(context)).store.list_leases()]
            refuse_empty_backfill(wanted=wanted, tokens=tokens, lease_ids=known, since=None, now=datetime.now(UTC))
