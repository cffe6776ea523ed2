"""Operators: list a source's leases, drain one lease, requeue undeliverable documents.

Each ``execute`` resolves the two hooks, builds the core objects and calls one core function; loops
and decisions stay in ``airflow_chatter.drain.engine`` and ``airflow_chatter.operations``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.assets import KAFKA_SERVER_KEY, TOPICS_KEY, emit_topic_events
from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.operators.lineage import ChatterLineage, LineageRecord, kafka_dataset
from airflow_chatter.airflow.operators.topic_events import ConfirmedTopics
from airflow_chatter.airflow.utils.values import as_bool, as_datetime, as_float, as_int, as_list, is_unset
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.drain.source import SourceLeases
    from airflow_chatter.drain.tries import Attempt

#: The drain summary's counts the ``chatter_drain`` lineage facet carries.
_DRAIN_FACET = ("delivered", "undeliverable", "skipped", "dropped", "documents")


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


class ChatterDrainOperator(ChatterLineage, ChatterSourceBaseOperator):
    """Run one bounded drain of one lease and return its ``DrainSummary.to_dict()`` (XCom), with ``topics``: the
    messages the broker confirmed, per Kafka topic, and ``kafka_server``: the first bootstrap server (what
    ``ChatterTopicEventsOperator`` turns into asset events).

    Logs the summary on one line. A failed drain raises its original error after pushing the summary
    as XCom ``summary``, so Airflow retries it; a lease held by another live drain is left alone and
    reported in the summary (``lease_held_by``), not failed.

    :param source: the source config (a ``SourceConfig`` or its dict form).
    :param lease_id: (templated) the lease to drain, usually mapped from ``ChatterListLeasesOperator``.
    :param max_documents: (templated) change-feed documents to read at most; default the source's.
    :param max_seconds: (templated) seconds to drain at most; default the source's.
    :param lease_set: ``"scheduled"`` (default) or ``"backfill"`` (the source's backfill prefix).
    :param exclusive_with_scheduled: also hold the scheduled lease of the same range while draining
        (backfills), so a backfill and the scheduled drain never own a range together.
    :param outlets: give an ``AssetAlias`` and the task emits through it, per topic it delivered to, an asset event
        ``kafka://<bootstrap server>/<topic>`` and the deprecated ``chatter://<source>/<topic>`` (``extra``:
        ``published``, ``lease``). The DAG
        factories do not: mapped drains reaching a new topic together race Airflow's creation of its asset, so
        their DAGs emit the events from one ``ChatterTopicEventsOperator`` after the drains.
    :param since: (templated) only publish documents modified at or after this ISO timestamp: a ``_ts``
        filter over what the lease reads. A backfill from a point in time does not use it: its leases start
        there (``ChatterListLeasesOperator(since=...)``), so older changes are not read at all.

    A source with ``follow: true`` keeps the lease once caught up and polls every ``follow_poll_seconds`` until
    ``max_seconds`` / ``max_documents`` (drain/follow.py). SIGTERM (Airflow calls ``on_kill``) asks it to stop at the
    next page boundary: the page in hand is published and checkpointed, the lease released, the task succeeds.

    OpenLineage (with ``apache-airflow-providers-openlineage``): input the monitored container, outputs the topics
    the broker confirmed messages on (``outputStatistics.rowCount``), run facet ``chatter_drain`` (delivered,
    undeliverable, skipped, ...); a failed drain adds its error (``errorMessage``).
    """

    template_fields: Sequence[str] = (
        "source_name",
        "lease_id",
        "max_documents",
        "max_seconds",
        "since",
        "cosmos_conn_id",
        "kafka_conn_id",
    )

    def __init__(
        self,
        *,
        lease_id: str,
        max_documents: Any = None,
        max_seconds: Any = None,
        exclusive_with_scheduled: bool = False,
        since: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lease_id = lease_id
        self.max_documents = max_documents
        self.max_seconds = max_seconds
        self.exclusive_with_scheduled = exclusive_with_scheduled
        self.since = since
        self._stop: Any = None  # the running drain's StopRequest (on_kill sets it)

    def lineage_before_run(self) -> LineageRecord:
        return LineageRecord(inputs=[self.monitored_dataset()], outputs=[])

    def on_kill(self) -> None:
        """SIGTERM: stop the drain at its next page boundary. Only sets a flag: this runs in a signal handler."""
        if self._stop is not None:
            self._stop.request()

    @task_scope
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.drain.follow import Follow, StopRequest
        from airflow_chatter.operations.backfill import BACKFILL_HOLD_MARGIN_SECONDS, exclusive_with

        config = self.config
        max_documents = as_int(
            config.max_documents if is_unset(self.max_documents) else self.max_documents,
            "max_documents",
        )
        max_seconds = as_float(config.max_seconds if is_unset(self.max_seconds) else self.max_seconds, "max_seconds")
        if not isinstance(self.lease_id, str) or not self.lease_id:
            raise ConfigurationError("lease_id", self.lease_id, "must be a lease id")
        self._stop = StopRequest()
        follow = (
            Follow(config.follow_poll_seconds, should_stop=self._stop)
            if config.follow
            else Follow(should_stop=self._stop)
        )
        publisher = ConfirmedTopics(self.publisher())
        try:
            engine = self.engine(context, publisher, since=as_datetime(self.since, "since"))
            if self.exclusive_with_scheduled and self.lease_prefix == config.lease_prefix:
                raise ConfigurationError(
                    "exclusive_with_scheduled", True, "needs a lease set other than the scheduled one"
                )
            guard = (
                exclusive_with(
                    engine,
                    self.lease_id,
                    other_prefix=config.lease_prefix,
                    hold_seconds=max_seconds + BACKFILL_HOLD_MARGIN_SECONDS,
                )
                if self.exclusive_with_scheduled
                else nullcontext()
            )
            with engine, guard:
                summary = engine.drain_lease(
                    self.lease_id,
                    max_documents=max_documents,
                    max_seconds=max_seconds,
                    follow=follow,
                    attempt=_attempt(context),
                )
        finally:
            publisher.close()
        server = self.kafka_server()
        self.record_lineage(
            LineageRecord(
                inputs=[replace(self.monitored_dataset(), rows=summary.documents)],
                outputs=[kafka_dataset(server, topic, count) for topic, count in sorted(publisher.confirmed.items())],
                facet=("chatter_drain", {"lease": self.lease_id, **{k: getattr(summary, k) for k in _DRAIN_FACET}}),
                error=f"{summary.error_type}: {summary.error_message}" if summary.failed else None,
            )
        )
        if summary.lease_token is None:
            # The engine logs the summary line of every drain that took its lease; one that did not (held by
            # another drain, or the take failed) is logged here, so each task logs exactly one summary line.
            self.log.info("%s", summary.log_line())
        result = summary.to_dict()
        result[TOPICS_KEY] = dict(sorted(publisher.confirmed.items()))
        result[KAFKA_SERVER_KEY] = server
        if summary.failed:
            if context and context.get("ti") is not None:
                context["ti"].xcom_push(key="summary", value=result)
            summary.raise_for_error()
        emit_topic_events(
            context,
            self.outlets,
            config.name,
            publisher.confirmed,
            {topic: {"lease": self.lease_id} for topic in publisher.confirmed},
            server=server,
        )
        if summary.split_into:
            self.log.info("Lease %s split into %s; the next run drains them", self.lease_id, summary.split_into)
        return result


def _attempt(context: Context | Mapping[str, Any] | None) -> Attempt | None:
    """Which try of which task run this is: the lease records each try's counts under it (``drain/tries.py``),
    since Airflow keeps the XCom of a task's last try only."""
    from airflow_chatter.drain.tries import Attempt

    ti = context.get("ti") if context else None
    if ti is None:
        return None
    run = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{getattr(ti, 'map_index', -1)}"
    return Attempt(run, int(getattr(ti, "try_number", 1) or 1))


class ChatterRequeueUndeliverableOperator(ChatterLineage, ChatterSourceBaseOperator):
    """Set undeliverable outbox documents back to pending once their writer is fixed; log who and what.

    Select by ``message_ids`` (the outbox messages' ids) or ``document_ids`` (outbox item ids), by ``where`` (a
    Cosmos SQL condition on ``c``, with ``parameters``), by both, or every one with ``all_undeliverable``. Each
    document is patched conditionally on the ETag it was read with. The next scheduled drain verifies and publishes
    them again.

    :param message_ids: (templated) message ids; a list, a JSON list or a comma-separated string.
    :param document_ids: (templated) item ids; a list, a JSON list or a comma-separated string.
    :param all_undeliverable: (templated) select every undeliverable document (up to ``limit``); refused together
        with a selection by id or ``where``.
    :param where: (templated) e.g. ``"c.Destination = @topic"``; combined with the undeliverable filter.
    :param parameters: query parameters for ``where``, e.g. ``{"@topic": "orders"}``.
    :param limit: (templated) most documents to requeue in one run; default 1000.
    :param requested_by: (templated) who asked; default the user who triggered the DAG run.
    :param plan_only: (templated) a dry run: select and log, change nothing.

    OpenLineage: the monitored container in and out (``outputStatistics.rowCount``: documents requeued), run facet
    ``chatter_requeue``.
    """

    template_fields: Sequence[str] = (
        "source_name",
        "message_ids",
        "document_ids",
        "all_undeliverable",
        "where",
        "limit",
        "requested_by",
        "plan_only",
    )

    def __init__(
        self,
        *,
        message_ids: Any = None,
        document_ids: Any = None,
        all_undeliverable: Any = False,
        where: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        limit: Any = 1000,
        requested_by: str | None = None,
        plan_only: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.message_ids = message_ids
        self.document_ids = document_ids
        self.all_undeliverable = all_undeliverable
        self.where = where
        self.parameters = dict(parameters or {})
        self.limit = limit
        self.requested_by = requested_by
        self.plan_only = plan_only

    def lineage_before_run(self) -> LineageRecord:
        container = self.monitored_dataset()
        return LineageRecord(inputs=[container], outputs=[container])

    def _requeue_lineage(self, requeued: int, changed: int, not_found: int, *, dry_run: bool) -> None:
        container = self.monitored_dataset()
        counts = {"requeued": requeued, "changed_meanwhile": changed, "not_found": not_found, "dry_run": dry_run}
        self.record_lineage(
            LineageRecord(
                inputs=[container],
                outputs=[replace(container, rows=requeued)],
                facet=("chatter_requeue", counts),
            )
        )

    def _who(self, context: Context | Mapping[str, Any]) -> str:
        if self.requested_by:
            return str(self.requested_by)
        dag_run = context.get("dag_run") if context else None
        return str(getattr(dag_run, "triggering_user_name", None) or "unknown")

    @task_scope
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.operations.outbox_queries import select_undeliverable
        from airflow_chatter.operations.requeue import requeue_undeliverable
        from airflow_chatter.outbox.item_ids import build_item_id

        ids = as_list(self.document_ids, "document_ids")
        ids += [build_item_id("outbox", m) for m in as_list(self.message_ids, "message_ids")]
        where = (self.where or "").strip() or None
        if as_bool(self.all_undeliverable, "all_undeliverable"):
            if ids or where:
                raise ConfigurationError(
                    "all_undeliverable", True, "cannot be combined with message_ids, document_ids or where"
                )
            where = "IS_DEFINED(c.id)"  # every document; the undeliverable filter is always added
        if not ids and not where:
            raise ConfigurationError(
                "message_ids/document_ids/where",
                None,
                "select documents by message id, by item id, by a where condition, or all_undeliverable",
            )
        limit = as_int(self.limit, "limit")
        who = self._who(context)
        monitored, _ = self.containers()
        documents = select_undeliverable(
            monitored, document_ids=ids or None, where=where, parameters=self.parameters, limit=limit
        )
        selection = {"document_ids": ids, "where": where, "parameters": self.parameters}
        if as_bool(self.plan_only, "plan_only"):
            found = [d["id"] for d in documents]
            self.log.info(
                "Dry run by %s: would requeue %d document(s) %s (selection %s)", who, len(found), found, selection
            )
            self._requeue_lineage(0, 0, 0, dry_run=True)
            return {"requested_by": who, "dry_run": True, "would_requeue": found}
        paths = self.config.to_options().partition_key_paths
        result = requeue_undeliverable(monitored, paths, documents, requested=ids)
        self.log.info(
            "%s requeued %d undeliverable document(s) to pending: %s "
            "(selection %s; changed meanwhile %s; not found %s)",
            who,
            len(result.requeued),
            list(result.requeued),
            selection,
            list(result.changed_meanwhile),
            list(result.not_found),
        )
        self._requeue_lineage(len(result.requeued), len(result.changed_meanwhile), len(result.not_found), dry_run=False)
        return {"requested_by": who, "dry_run": False, **result.to_dict()}
