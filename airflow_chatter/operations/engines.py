"""A source's ``SourceLeases`` and ``DrainEngine`` from its configuration: its pending filters, its topic mapping.

``open_source_leases`` is the one place a source's configuration becomes its opened lease set; the drain, the
lease listing, the sensor and the pending watch all read their leases through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, Unpack

from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.source import LeaseOpening, SourceLeases
from airflow_chatter.ports import DocumentContainer, OutgoingMessage, Publisher, PublishOutcome


class TopicMappingPublisher(Publisher):
    """Send each message to ``topics[destination]`` (or the destination itself when unmapped)."""

    def __init__(self, inner: Publisher, topics: Mapping[str, str]) -> None:
        self.inner = inner
        self.topics = dict(topics)

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        mapped = [dataclasses.replace(m, topic=self.topics.get(m.topic, m.topic)) for m in messages]
        return self.inner.send_batch(mapped)

    def close(self) -> None:
        self.inner.close()


PendingFilter = Callable[[dict[str, Any]], bool]


def modified_since(since: datetime) -> PendingFilter:
    """A pending filter admitting documents last modified at or after ``since`` (``_ts``, UTC).

    It filters what a lease reads; it does not move where the lease starts. A backfill from a point in time
    starts its leases there instead (``open_source_leases(start_from=...)``), which does not read older changes.
    """
    threshold = since.astimezone(UTC).timestamp()

    def admit(document: dict[str, Any]) -> bool:
        ts = document.get("_ts")
        return isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= threshold

    return admit


def _both(first: PendingFilter | None, second: PendingFilter) -> PendingFilter:
    if first is None:
        return second
    return lambda document: bool(first(document)) and bool(second(document))


class EngineConfig(Protocol):
    """What ``open_source_leases`` and ``build_engine`` need of a source's configuration
    (``airflow_chatter.airflow.sources.SourceConfig``)."""

    @property
    def topics(self) -> Mapping[str, str]: ...

    def to_options(self, *, resolve: bool = False, lease_prefix: str | None = None) -> SourceOptions: ...


def open_source_leases(
    config: EngineConfig,
    monitored: DocumentContainer,
    leases: DocumentContainer,
    *,
    lease_prefix: str | None = None,
    extra_filter: PendingFilter | None = None,
    **opening: Unpack[LeaseOpening],
) -> SourceLeases:
    """Open a source's lease set (``SourceLeases.open``: verifies both containers, as ``opening`` says); imports
    its resolver/filter (do this in a task).

    ``lease_prefix`` overrides the source's (a backfill's lease set); ``extra_filter`` narrows its pending filter.
    Never give ``start_from`` for the scheduled lease set, whose new leases must start at the beginning (RLY-08).
    """
    options = config.to_options(resolve=True, lease_prefix=lease_prefix)
    if extra_filter is not None:
        narrowed = _both(options.additional_pending_filter, extra_filter)
        options = options.model_copy(update={"additional_pending_filter": narrowed})
    return SourceLeases.open(options, monitored, leases, **opening)


def build_engine(config: EngineConfig, leases: SourceLeases, publisher: Publisher) -> DrainEngine:
    """The ``DrainEngine`` of a source on its opened lease set, publishing through its topic mapping."""
    if config.topics:
        publisher = TopicMappingPublisher(publisher, config.topics)
    return DrainEngine(leases, publisher)
