"""The assets of the Airflow layer: the per-source pending asset of event-driven drains, and the per-topic assets a
drain run's asset events name.

``pending_asset(source)`` is ``Asset("chatter_pending_<name>")`` with one ``AssetWatcher`` running
``ChatterPendingOutboxEventTrigger`` in the triggerer; each event the trigger fires is an asset event, and the DAG
scheduled on the asset runs (``schedule: on_pending``). Building it does no I/O (it happens while the DAG file is
parsed).

The topics a drain publishes to are known only at run time (an unmapped destination is its own topic), so the task
that emits their events (``operators/topic_events.py``) declares an ``AssetAlias`` as its outlet and adds one
``Asset`` per topic through it; Airflow creates the asset on its first event. The asset of topic ``T`` of source
``S`` is ``chatter://S/T``::

    with DAG("consume_orders", schedule=[Asset("chatter://orders/orders.events")], ...): ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, AssetWatcher

from airflow_chatter.airflow.dags.config import ON_PENDING, SourceConfig
from airflow_chatter.airflow.triggers.pending_event import ChatterPendingOutboxEventTrigger


def pending_asset_name(source_name: str) -> str:
    return f"chatter_pending_{source_name}"


def pending_asset(source: SourceConfig) -> Asset:
    """The asset whose watcher fires when ``source`` has pending outbox documents."""
    trigger = ChatterPendingOutboxEventTrigger(
        source=source.model_dump(mode="json"), poll_interval=source.on_pending_poll_seconds
    )
    name = pending_asset_name(source.name)
    return Asset(
        name=name,
        uri=f"chatter://{source.database}/{source.monitored_container}/pending",
        group="chatter",
        watchers=[AssetWatcher(name=f"{name}_watcher", trigger=trigger)],
    )


def drain_schedule(source: SourceConfig) -> object:
    """What a drain DAG is scheduled on: the pending asset for ``on_pending``, else the cron/preset as given."""
    return [pending_asset(source)] if source.schedule == ON_PENDING else source.schedule


ASSET_SCHEME = "chatter"
#: The key of a drain's XCom (``return_value``, or ``summary`` of a failed drain) that counts its confirmed messages
#: per topic.
TOPICS_KEY = "topics"


def topic_asset_uri(source: str, topic: str) -> str:
    return f"{ASSET_SCHEME}://{source}/{topic}"


def topics_alias_name(dag_kind: str) -> str:
    """The outlet alias of a DAG's ``topic_events`` task: ``chatter-topics-<source name>``, or ``-backfill``."""
    return f"chatter-topics-{dag_kind}"


def topics_alias(name: str) -> Any:
    from airflow.sdk import AssetAlias

    return AssetAlias(topics_alias_name(name))


def emit_topic_events(
    context: Mapping[str, Any] | None,
    outlets: Sequence[Any],
    source: str,
    confirmed: Mapping[str, int],
    extras: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """Add one asset event per topic of ``confirmed`` (topic → confirmed messages, each above 0) through each
    ``AssetAlias`` among the task's ``outlets`` (``extra``: ``published`` and the topic's entry of ``extras``);
    return the URIs. Outside a task run (no ``outlet_events`` in the context) nothing is emitted.
    """
    from airflow.sdk import Asset, AssetAlias

    events = context.get("outlet_events") if context else None
    aliases = [outlet for outlet in outlets or () if isinstance(outlet, AssetAlias)]
    if events is None or not aliases:
        return []
    uris = []
    for topic, count in sorted(confirmed.items()):
        uri = topic_asset_uri(source, topic)
        extra = {"published": count, **(extras or {}).get(topic, {})}
        for alias in aliases:
            events[alias].add(Asset(uri), extra=extra)
        uris.append(uri)
    return uris
