"""A backfill request checked before its run is created: a start in the future, or ``feed_ranges`` naming neither
a feed range nor a backfill lease of the source, is refused naming the field (the core's
``refuse_backfill_request``), whether it comes from the plugin's form (``POST /chatter/api/.../backfill``) or from
Airflow's trigger form and REST (``POST /api/v2/dags/chatter_backfill/dagRuns``, through ``ChatterConfGuard``).

What Airflow's own param validation answers (an unknown source, a malformed timestamp, a wrong type) is left to it.
Reads the sources file and, only for ``feed_ranges``, the source's feed ranges and backfill leases.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from airflow_chatter.airflow.sources import LoadedSources, SourceConfig
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import DocumentContainer


class SourcesAndContainers(Protocol):
    def sources(self) -> LoadedSources: ...
    def containers(self, source: SourceConfig) -> tuple[DocumentContainer, DocumentContainer]: ...


def wanted_ranges(conf: Mapping[str, Any]) -> list[str]:
    """The ``feed_ranges`` a backfill conf names (strings only: a wrong type is Airflow's param schema's to refuse)."""
    ranges = conf.get("feed_ranges") or []
    return [r for r in ranges if isinstance(r, str)] if isinstance(ranges, list) else []


def check_backfill_start(conf: Mapping[str, Any]) -> None:
    """Raise ``ConfigurationError`` naming ``start`` for a start in the future (no I/O)."""
    from airflow_chatter.operations.backfill import refuse_future_start

    refuse_future_start(_moment(conf.get("start")), datetime.now(UTC), field="start")


def check_backfill_conf(backend: SourcesAndContainers, conf: Mapping[str, Any]) -> None:
    """Raise ``ConfigurationError`` naming ``start`` or ``feed_ranges`` for a backfill that would read nothing."""
    from airflow_chatter.operations.backfill import refuse_backfill_request
    from airflow_chatter.operations.monitoring import monitor_store

    check_backfill_start(conf)
    wanted = wanted_ranges(conf)
    if not wanted:
        return
    loaded = backend.sources()
    name = conf.get("source")
    if loaded.config is None or not isinstance(name, str):
        return
    try:
        config = loaded.config.get(name)
    except ConfigurationError:
        return  # not a source of the file: the DAG's enum param refuses it
    monitored, leases = backend.containers(config)
    store = monitor_store(config.to_options(lease_prefix=config.backfill_lease_prefix), monitored, leases)
    refuse_backfill_request(monitored, store, wanted=wanted)


def _moment(start: object) -> datetime | None:
    """A timestamp ``start`` (UTC when it names no zone, as the DAG reads it); ``beginning``/``resume``/junk: None."""
    if not isinstance(start, str) or start in ("beginning", "resume"):
        return None
    try:
        moment = datetime.fromisoformat(start)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
