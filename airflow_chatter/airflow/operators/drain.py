"""``ChatterDrainOperator``: one bounded drain of one lease, publishing to Kafka.

``execute`` resolves the two hooks, builds the core objects and calls one core function; loops and decisions stay in
``airflow_chatter.drain.engine`` and ``airflow_chatter.operations``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.assets import KAFKA_SERVER_KEY, TOPICS_KEY, emit_topic_events
from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.operators.lineage import ChatterLineage, LineageRecord, kafka_dataset
from airflow_chatter.airflow.operators.topic_events import ConfirmedTopics
from airflow_chatter.airflow.utils.values import as_datetime, as_float, as_int, is_unset
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.drain.tries import Attempt

#: The drain summary's counts the ``chatter_drain`` lineage facet carries.
_DRAIN_FACET = ("delivered", "undeliverable", "skipped", "dropped", "documents")


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
