"""Operators: list a source's leases, drain one lease, requeue undeliverable documents.

Each ``execute`` resolves the two hooks, builds the core objects and calls one core function; loops
and decisions stay in ``airflow_chatter.drain.engine`` and ``airflow_chatter.drain.operations``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_chatter.airflow.config import SourceConfig, SourcesFile
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import OutgoingMessage, Publisher, PublishOutcome

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.drain.engine import DrainEngine
    from airflow_chatter.ports import DocumentContainer


def source_config(source: SourceConfig | Mapping[str, Any]) -> SourceConfig:
    """Accept a ``SourceConfig`` or its dict form (validated: a bad one fails at DAG parse time)."""
    if isinstance(source, SourceConfig):
        return source
    from airflow_chatter.airflow.config import parse_sources

    return parse_sources({"sources": [dict(source)]}, path="source").sources[0]


def as_int(value: Any, option: str, *, minimum: int = 1) -> int:
    """A rendered template is a string: convert it, naming the option when it is not an integer."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(option, value, "must be an integer") from None
    if number < minimum:
        raise ConfigurationError(option, value, f"must be at least {minimum}")
    return number


def as_float(value: Any, option: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(option, value, "must be a number of seconds") from None
    if not number > 0:
        raise ConfigurationError(option, value, "must be positive")
    return number


def as_bool(value: Any, option: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "1", "yes"}:
        return True
    if text in {"false", "0", "no", "", "none"}:
        return False
    raise ConfigurationError(option, value, "must be true or false")


def as_datetime(value: Any, option: str) -> datetime | None:
    """``None``/empty/``beginning`` → ``None``; otherwise an ISO 8601 timestamp (naive means UTC)."""
    if value is None or isinstance(value, datetime):
        return value
    text = str(value).strip()
    if not text or text.lower() in {"none", "beginning"}:
        return None
    try:
        parsed = datetime.fromisoformat(text)  # Python 3.11 reads a trailing "Z" too
    except ValueError:
        raise ConfigurationError(option, value, "must be an ISO 8601 timestamp such as 2026-01-31T00:00:00Z") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def as_list(value: Any, option: str) -> list[str]:
    """A list of strings from a list, a JSON list rendered to text, or a comma-separated string."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            try:
                value = json.loads(text)
            except ValueError:
                raise ConfigurationError(option, value, "is not a JSON list") from None
        else:
            return [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(option, value, "must be a list of strings")
    return [v for v in value if v]


class ChatterSourceBaseOperator(BaseOperator):
    """Shared plumbing of the operators and the sensor: the source config, the connections, the lease
    set, the engine.

    Give ``source`` (a ``SourceConfig`` or its dict form), or ``source_name`` (templated) with the
    ``sources`` catalog it is looked up in (how the backfill DAG lets its trigger form pick one).
    ``lease_set`` is ``"scheduled"`` (the source's ``lease_prefix``) or ``"backfill"`` (its
    ``backfill_lease_prefix``); ``lease_prefix`` overrides both.
    """

    ui_color = "#cfe8fc"

    def __init__(
        self,
        *,
        source: SourceConfig | Mapping[str, Any] | None = None,
        source_name: str | None = None,
        sources: SourcesFile | Mapping[str, Any] | None = None,
        cosmos_conn_id: str | None = None,
        kafka_conn_id: str | None = None,
        lease_set: str = "scheduled",
        lease_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (source is None) == (source_name is None):
            raise ConfigurationError("source/source_name", source_name, "give exactly one of source or source_name")
        if lease_set not in ("scheduled", "backfill"):
            raise ConfigurationError("lease_set", lease_set, "must be 'scheduled' or 'backfill'")
        self.source = source_config(source).model_dump(mode="json") if source is not None else None
        self.source_name = source_name
        if source_name is not None and sources is None:
            raise ConfigurationError("sources", None, "is required with source_name")
        self.sources = (
            (sources if isinstance(sources, SourcesFile) else SourcesFile.model_validate(sources)).model_dump(
                mode="json"
            )
            if sources is not None
            else None
        )
        self.cosmos_conn_id = cosmos_conn_id
        self.kafka_conn_id = kafka_conn_id
        self.lease_set = lease_set
        self._lease_prefix = lease_prefix

    @property
    def config(self) -> SourceConfig:
        if self.source is not None:
            return SourceConfig.model_validate(self.source)
        return SourcesFile.model_validate(self.sources).get(str(self.source_name))

    @property
    def lease_prefix(self) -> str:
        if self._lease_prefix is not None:
            return self._lease_prefix
        config = self.config
        return config.backfill_lease_prefix if self.lease_set == "backfill" else config.lease_prefix

    def _owner(self, context: Context | Mapping[str, Any]) -> str:
        from airflow_chatter.drain.identity import instance_name

        ti = context.get("ti") if context else None
        if ti is None:
            return instance_name()
        return f"airflow:{ti.dag_id}.{ti.task_id}[{getattr(ti, 'map_index', -1)}]@{instance_name()}"

    def containers(self) -> tuple[DocumentContainer, DocumentContainer]:
        """The monitored and lease containers (lazy adapters: no I/O yet)."""
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

        config = self.config
        hook = ChatterCosmosHook(self.cosmos_conn_id or config.cosmos_conn_id, database_name=config.database)
        return hook.get_container(config.monitored_container), hook.get_container(config.lease_container)

    def publisher(self) -> Publisher:
        from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

        return ChatterKafkaHook(self.kafka_conn_id or self.config.kafka_conn_id).get_publisher()

    def engine(
        self,
        context: Context | Mapping[str, Any],
        publisher: Publisher,
        *,
        since: datetime | None = None,
        start_from: datetime | None = None,
    ) -> DrainEngine:
        """``since`` filters what a lease reads by ``_ts``; ``start_from`` is where the leases it creates start."""
        from airflow_chatter.drain.operations import build_engine, modified_since

        monitored, leases = self.containers()
        return build_engine(
            self.config,
            monitored,
            leases,
            publisher,
            lease_prefix=self.lease_prefix,
            extra_filter=modified_since(since) if since is not None else None,
            owner=self._owner(context),
            start_from=start_from,
        )


class UnusedPublisher(Publisher):
    """Listing leases builds an engine but publishes nothing; this fails loudly if that changes."""

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        raise RuntimeError("listing leases must not publish")


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

    def execute(self, context: Context) -> list[str]:
        from airflow_chatter.drain.operations import count_pending, lease_report, reset_leases

        wanted = set(as_list(self.feed_ranges, "feed_ranges"))
        reset = as_bool(self.reset, "reset")
        since = as_datetime(self.since, "since")
        if as_bool(self.plan_only, "plan_only"):
            monitored, _ = self.containers()
            ranges = [r.token for r in monitored.read_feed_ranges(force_refresh=True)]
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
        engine = self.engine(context, UnusedPublisher(), start_from=since)
        if reset:
            if scheduled:
                raise ConfigurationError(
                    "reset", True, "is refused for the scheduled lease set (it would drop its checkpoints)"
                )
            deleted = reset_leases(engine.store)
            self.log.info("Reset %d lease(s) of prefix %r: %s", len(deleted), self.lease_prefix, deleted)
        leases = engine.ensure_leases()
        chosen = [lease for lease in leases if not wanted or lease.token in wanted or lease.id in wanted]
        if wanted and not chosen:
            raise ConfigurationError("feed_ranges", sorted(wanted), f"match none of {[l.token for l in leases]}")
        if since is not None:
            self.log.info("Leases created now start reading at %s", engine.store.start_from)
        for lease in chosen:
            self.log.info("Lease %s", lease_report(lease))
        return [lease.id for lease in chosen]


class ChatterDrainOperator(ChatterSourceBaseOperator):
    """Run one bounded drain of one lease and return its ``DrainSummary.to_dict()`` (XCom).

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
    :param since: (templated) only publish documents modified at or after this ISO timestamp: a ``_ts``
        filter over what the lease reads. A backfill from a point in time does not use it: its leases start
        there (``ChatterListLeasesOperator(since=...)``), so older changes are not read at all.
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

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.drain.operations import BACKFILL_HOLD_MARGIN_SECONDS, exclusive_with

        config = self.config
        max_documents = as_int(
            config.max_documents if self.max_documents in (None, "", "None") else self.max_documents,
            "max_documents",
        )
        max_seconds = as_float(
            config.max_seconds if self.max_seconds in (None, "", "None") else self.max_seconds, "max_seconds"
        )
        if not isinstance(self.lease_id, str) or not self.lease_id:
            raise ConfigurationError("lease_id", self.lease_id, "must be a lease id")
        publisher = self.publisher()
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
            with guard:
                summary = engine.drain_lease(self.lease_id, max_documents=max_documents, max_seconds=max_seconds)
        finally:
            publisher.close()
        self.log.info("%s", summary.log_line())
        result = summary.to_dict()
        if summary.failed:
            if context and context.get("ti") is not None:
                context["ti"].xcom_push(key="summary", value=result)
            summary.raise_for_error()
        if summary.split_into:
            self.log.info("Lease %s split into %s; the next run drains them", self.lease_id, summary.split_into)
        return result


class ChatterRequeueUndeliverableOperator(ChatterSourceBaseOperator):
    """Set undeliverable outbox documents back to pending once their writer is fixed; log who and what.

    Select by ``document_ids`` (outbox item ids), by ``where`` (a Cosmos SQL condition on ``c``, with
    ``parameters``), or both. Each document is patched conditionally on the ETag it was read with.
    The next scheduled drain verifies and publishes them again.

    :param document_ids: (templated) item ids; a list, a JSON list or a comma-separated string.
    :param where: (templated) e.g. ``"c.Destination = @topic"``; combined with the undeliverable filter.
    :param parameters: query parameters for ``where``, e.g. ``{"@topic": "orders"}``.
    :param limit: (templated) most documents to requeue in one run; default 1000.
    :param requested_by: (templated) who asked; default the user who triggered the DAG run.
    :param plan_only: (templated) a dry run: select and log, change nothing.
    """

    template_fields: Sequence[str] = ("document_ids", "where", "limit", "requested_by", "plan_only")

    def __init__(
        self,
        *,
        document_ids: Any = None,
        where: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        limit: Any = 1000,
        requested_by: str | None = None,
        plan_only: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.document_ids = document_ids
        self.where = where
        self.parameters = dict(parameters or {})
        self.limit = limit
        self.requested_by = requested_by
        self.plan_only = plan_only

    def _who(self, context: Context | Mapping[str, Any]) -> str:
        if self.requested_by:
            return str(self.requested_by)
        dag_run = context.get("dag_run") if context else None
        return str(getattr(dag_run, "triggering_user_name", None) or "unknown")

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.drain.operations import requeue_undeliverable, select_undeliverable

        ids = as_list(self.document_ids, "document_ids")
        where = (self.where or "").strip() or None
        if not ids and not where:
            raise ConfigurationError(
                "document_ids/where", None, "select documents by id, by a where condition, or both"
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
        return {"requested_by": who, "dry_run": False, **result.to_dict()}
