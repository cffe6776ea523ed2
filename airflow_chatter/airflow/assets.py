"""The per-source asset of event-driven drains: ``schedule: on_pending`` schedules a drain DAG on it.

``pending_asset(source)`` is ``Asset("chatter_pending_<name>")`` with one ``AssetWatcher`` running
``ChatterPendingOutboxEventTrigger`` in the triggerer; each event the trigger fires is an asset event, and the DAG
scheduled on the asset runs. Building it does no I/O (it happens while the DAG file is parsed).
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher

from airflow_chatter.airflow.config import ON_PENDING, SourceConfig
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
