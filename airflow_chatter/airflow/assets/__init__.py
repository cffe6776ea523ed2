"""The assets of the Airflow layer: the per-source pending asset of event-driven drains, and the per-topic assets a
drain run's asset events name.

``pending_asset(source)`` is ``Asset("chatter_pending_<name>")`` with one ``AssetWatcher`` running
``ChatterPendingOutboxEventTrigger`` in the triggerer; each event the trigger fires is an asset event, and the DAG
scheduled on the asset runs (``schedule: on_pending``). Building it does no I/O (it happens while the DAG file is
parsed).

The topics a drain publishes to are known only at run time (an unmapped destination is its own topic), so the task
that emits their events (``operators/topic_events.py``) declares an ``AssetAlias`` as its outlet and adds one
``Asset`` per topic through it; Airflow creates the asset on its first event. The asset of topic ``T`` on the
brokers whose first bootstrap server is ``B`` is ``kafka://B/T``: the Apache Kafka provider's scheme for a topic
(``airflow.providers.apache.kafka.assets.kafka.create_asset(server=B, topic=T)``), so a DAG scheduled on it runs
after a chatter drain and after a Kafka-provider producer alike::

    with DAG("consume_orders", schedule=[Asset("kafka://broker-1:9092/orders.events")], ...): ...

DEPRECATED: each event is also emitted for the old asset ``chatter://S/T`` (``S`` the source's name), for one
release, so DAGs scheduled on it keep running; move them to the ``kafka://`` asset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, AssetWatcher

from airflow_chatter.airflow.sources import ON_PENDING, SourceConfig
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
        # The source's name is in the URI too: sources on one container each need an asset of their own (Airflow
        # keeps one asset per URI).
        uri=f"chatter://{source.database}/{source.monitored_container}/pending/{source.name}",
        group="chatter",
        watchers=[AssetWatcher(name=f"{name}_watcher", trigger=trigger)],
    )


def drain_schedule(source: SourceConfig) -> object:
    """What a drain DAG is scheduled on: the pending asset for ``on_pending``, else the cron/preset as given."""
    return [pending_asset(source)] if source.schedule == ON_PENDING else source.schedule


#: The Apache Kafka provider's asset URI scheme for a topic: ``kafka://<bootstrap server>/<topic>``.
KAFKA_ASSET_SCHEME = "kafka"
#: DEPRECATED (emitted beside the ``kafka://`` asset for one release): ``chatter://<source>/<topic>``.
ASSET_SCHEME = "chatter"
#: The key of a drain's XCom (``return_value``, or ``summary`` of a failed drain) that counts its confirmed messages
#: per topic.
TOPICS_KEY = "topics"
#: The key of a drain's XCom naming the first bootstrap server of its Kafka connection (``host:port``).
KAFKA_SERVER_KEY = "kafka_server"


def kafka_asset_uri(server: str, topic: str) -> str:
    """The asset of ``topic`` on the brokers whose first bootstrap server is ``server`` (the Kafka provider's URI)."""
    return f"{KAFKA_ASSET_SCHEME}://{server}/{topic}"


def topic_asset_uri(source: str, topic: str) -> str:
    """DEPRECATED: the old asset of ``topic`` drained from ``source``; :func:`kafka_asset_uri` replaces it."""
    return f"{ASSET_SCHEME}://{source}/{topic}"


def topic_asset_uris(server: str | None, source: str, topic: str) -> list[str]:
    """The assets one topic's event is emitted for: the ``kafka://`` asset (when the server is known), then the
    deprecated ``chatter://`` one."""
    return [*([kafka_asset_uri(server, topic)] if server else []), topic_asset_uri(source, topic)]


def topic_backlog_asset(
    topic: str,
    group_id: str,
    *,
    kafka_conn_id: str = "chatter_kafka_default",
    server: str | None = None,
    poll_interval: float = 2.0,
) -> Asset:
    """The ``kafka://`` asset of ``topic``, watched for records past ``group_id``'s committed offsets: a receiver
    DAG scheduled on it runs when its group has records to read (``ChatterTopicBacklogTrigger`` in the triggerer),
    and also on each asset event a drain (or a Kafka-provider producer) emits for the topic.

    ``server``: the first bootstrap server; default read from ``kafka_conn_id`` (a connection read while the DAG
    file is parsed, no network I/O; in a task's process the task's hooks share it: ``ReadOnceHook``).
    """
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
    from airflow_chatter.airflow.triggers.topic_backlog import ChatterTopicBacklogTrigger

    uri = kafka_asset_uri(server or ChatterKafkaHook(kafka_conn_id).bootstrap_server(), topic)
    trigger = ChatterTopicBacklogTrigger(
        topic=topic, group_id=group_id, kafka_conn_id=kafka_conn_id, poll_interval=poll_interval
    )
    return Asset(uri, watchers=[AssetWatcher(name=f"backlog_{group_id}_{topic}", trigger=trigger)])


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
    *,
    server: str | None,
) -> list[str]:
    """Add, per topic of ``confirmed`` (topic → confirmed messages, each above 0), one asset event for each of
    ``topic_asset_uris(server, source, topic)`` through each ``AssetAlias`` among the task's ``outlets`` (``extra``:
    ``published`` and the topic's entry of ``extras``); return the URIs. Outside a task run (no ``outlet_events`` in
    the context) nothing is emitted.
    """
    from airflow.sdk import Asset, AssetAlias

    events = context.get("outlet_events") if context else None
    aliases = [outlet for outlet in outlets or () if isinstance(outlet, AssetAlias)]
    if events is None or not aliases:
        return []
    uris = []
    for topic, count in sorted(confirmed.items()):
        extra = {"published": count, **(extras or {}).get(topic, {})}
        for uri in topic_asset_uris(server, source, topic):
            for alias in aliases:
                events[alias].add(Asset(uri), extra=extra)
            uris.append(uri)
    return uris
