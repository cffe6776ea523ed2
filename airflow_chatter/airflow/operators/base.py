"""The base operator of the layer: a source's config, its two connections, its lease set, its engine.

The list-leases, drain and requeue operators and the pending-outbox sensor share it. Values are coerced by
``airflow_chatter.airflow.utils.values``. Every ``execute`` runs in ``task_scope``: a refusal no retry can cure
fails the task at once (``AirflowFailException``), and the Azure SDK's per-request HTTP lines stay out of the task log.
A task builds each hook once (``TaskHooks``), and a hook reads its connection once: one read per connection per task.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseOperator

from airflow_chatter.airflow.sources import SourceConfig, SourcesFile
from airflow_chatter.airflow.utils.sdk_logging import quiet_cosmos_http_logging
from airflow_chatter.errors import ConfigurationError, ContainerContractError
from airflow_chatter.ports import NotFound, Publisher

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
    from airflow_chatter.airflow.operators.lineage import LineageDataset
    from airflow_chatter.drain.engine import DrainEngine
    from airflow_chatter.drain.source import SourceLeases
    from airflow_chatter.ports import DocumentContainer

R = TypeVar("R")
H = TypeVar("H")


class TaskHooks:
    """The hooks of one task, each built once per class and arguments, so each connection is read once a task (a
    lookup may be a request to Airflow's API server or a secrets backend)."""

    def __init__(self) -> None:
        self._hooks: dict[tuple[Any, ...], Any] = {}

    def get(self, hook_class: Callable[..., H], conn_id: str, **kwargs: Any) -> H:
        key = (hook_class, conn_id, *sorted(kwargs.items()))
        if key not in self._hooks:
            self._hooks[key] = hook_class(conn_id, **kwargs)
        hook: H = self._hooks[key]
        return hook


def is_permanent_refusal(error: BaseException) -> bool:
    """A refusal no retry can cure: a bad option, or a container that violates the contract.

    A ``ContainerContractError`` that wraps a failed metadata read is permanent only when the container is not
    there (``NotFound``); a timeout or a throttled read may pass on the next try.
    """
    if isinstance(error, ConfigurationError):
        return True
    if isinstance(error, ContainerContractError):
        return error.__cause__ is None or isinstance(error.__cause__, NotFound)
    return False


@contextmanager
def fail_fast() -> Iterator[None]:
    """Turn a permanent refusal into ``AirflowFailException`` (no retries); everything else propagates as is."""
    try:
        yield
    except (ConfigurationError, ContainerContractError) as error:
        if not is_permanent_refusal(error):
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"{type(error).__name__}: {error} (not retried: a retry would meet it again)") from (
            error
        )


def task_scope(method: Callable[..., R]) -> Callable[..., R]:
    """Decorate ``execute``: ``fail_fast`` around it, the SDK's HTTP logging quiet inside it."""

    @functools.wraps(method)
    def wrapper(self: ChatterSourceBaseOperator, context: Any, *args: Any, **kwargs: Any) -> R:
        with fail_fast(), quiet_cosmos_http_logging(self.config.cosmos_http_logging):
            self.check_conf(context)
            result: R = method(self, context, *args, **kwargs)
            return result

    return wrapper


def source_config(source: SourceConfig | Mapping[str, Any]) -> SourceConfig:
    """Accept a ``SourceConfig`` or its dict form (validated: a bad one fails at DAG parse time)."""
    if isinstance(source, SourceConfig):
        return source
    from airflow_chatter.airflow.sources import parse_sources

    return parse_sources({"sources": [dict(source)]}, path="source").sources[0]


class ChatterSourceBaseOperator(BaseOperator):
    """Shared plumbing of the operators and the sensor: the source config, the connections, the lease
    set, the engine.

    Give ``source`` (a ``SourceConfig`` or its dict form), or ``source_name`` (templated) with the
    ``sources`` catalog it is looked up in (how the backfill DAG lets its trigger form pick one).
    ``lease_set`` is ``"scheduled"`` (the source's ``lease_prefix``) or ``"backfill"`` (its
    ``backfill_lease_prefix``); ``lease_prefix`` overrides both. ``allowed_conf``: the DAG's parameter names; a
    run conf with any other key fails the task at once.
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
        allowed_conf: Sequence[str] | None = None,
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
        self.allowed_conf = list(allowed_conf) if allowed_conf is not None else None
        self.task_hooks = TaskHooks()

    def check_conf(self, context: Context | Mapping[str, Any]) -> None:
        """Refuse a DAG run conf with keys that are no parameter of the DAG (``allowed_conf``), before any I/O.

        Airflow validates each param's value when the run is created but keeps unknown keys; a misspelt
        ``"dryrun": true`` would otherwise be ignored silently.
        """
        if self.allowed_conf is None or not context:
            return
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        unknown = sorted(set(conf) - set(self.allowed_conf))
        if unknown:
            raise ConfigurationError(
                "conf", unknown, f"names no parameter of this DAG; its parameters are {sorted(self.allowed_conf)}"
            )

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

    def cosmos_hook(self) -> ChatterCosmosHook:
        """The source's Cosmos hook (one per task)."""
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

        config = self.config
        conn_id = self.cosmos_conn_id or config.cosmos_conn_id
        return self.task_hooks.get(ChatterCosmosHook, conn_id, database_name=config.database)

    def kafka_hook(self) -> ChatterKafkaHook:
        """The source's Kafka hook (one per task)."""
        from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

        return self.task_hooks.get(ChatterKafkaHook, self.kafka_conn_id or self.config.kafka_conn_id)

    def containers(self) -> tuple[DocumentContainer, DocumentContainer]:
        """The monitored and lease containers (lazy adapters: no I/O yet)."""
        config = self.config
        hook = self.cosmos_hook()
        return hook.get_container(config.monitored_container), hook.get_container(config.lease_container)

    def publisher(self) -> Publisher:
        return self.kafka_hook().get_publisher()

    def kafka_server(self) -> str:
        """The first bootstrap server of the source's Kafka connection: its topics' asset URIs and lineage name it."""
        return self.kafka_hook().bootstrap_server()

    def monitored_dataset(self) -> LineageDataset:
        """The OpenLineage dataset of the source's monitored container (connection reads only)."""
        from airflow_chatter.airflow.operators.lineage import cosmos_dataset

        return cosmos_dataset(self.cosmos_hook(), self.config.monitored_container)

    def source_leases(
        self, context: Context | Mapping[str, Any], *, since: datetime | None = None, start_from: datetime | None = None
    ) -> SourceLeases:
        """The source's opened lease set (both containers verified), from its config and its connections.

        ``since`` filters what a lease reads by ``_ts``; ``start_from`` is where the leases it creates start. The
        Cosmos connection's 429 limits (extras ``max_throttle_retries`` / ``max_throttle_wait_seconds``) apply where
        the source sets none (F-11).
        """
        from airflow_chatter.operations.engines import modified_since, open_source_leases

        monitored, leases = self.containers()
        return open_source_leases(
            self.config,
            monitored,
            leases,
            lease_prefix=self.lease_prefix,
            extra_filter=modified_since(since) if since is not None else None,
            owner=self._owner(context),
            start_from=start_from,
            throttle_limits=self.cosmos_hook().throttle_limits(),
            request_priority=self.cosmos_hook().settings().request_priority,
        )

    def engine(
        self, context: Context | Mapping[str, Any], publisher: Publisher, *, since: datetime | None = None
    ) -> DrainEngine:
        """The source's drain engine on :meth:`source_leases`, publishing to ``publisher``."""
        from airflow_chatter.operations.engines import build_engine

        return build_engine(self.config, self.source_leases(context, since=since), publisher)
