"""Asset events of a drain: one per Kafka topic the drain delivered to, so downstream DAGs can be scheduled on it.

The topics a drain publishes to are known only at run time (an unmapped destination is its own topic), so a drain
task declares an ``AssetAlias`` as its outlet and adds one ``Asset`` per topic through it; Airflow creates the asset
on its first event. The asset of topic ``T`` of source ``S`` is ``chatter://S/T``::

    with DAG("consume_orders", schedule=[Asset("chatter://orders/orders.events")], ...): ...
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_chatter.ports import OutgoingMessage, Publisher, PublishOutcome

ASSET_SCHEME = "chatter"


def topic_asset_uri(source: str, topic: str) -> str:
    return f"{ASSET_SCHEME}://{source}/{topic}"


def topics_alias_name(dag_kind: str) -> str:
    """The outlet alias of a DAG's drain task: ``chatter-topics-<source name>``, or ``-backfill``."""
    return f"chatter-topics-{dag_kind}"


class ConfirmedTopics(Publisher):
    """Pass every batch through to ``inner`` and count, per topic, the messages the broker confirmed."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self.confirmed: Counter[str] = Counter()

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        outcomes = self.inner.send_batch(messages)
        self.confirmed.update(outcome.message.topic for outcome in outcomes if outcome.confirmed)
        return outcomes

    def close(self) -> None:
        self.inner.close()


def topics_alias(name: str) -> Any:
    from airflow.sdk import AssetAlias

    return AssetAlias(topics_alias_name(name))


def emit_topic_events(
    context: Mapping[str, Any] | None, outlets: Sequence[Any], source: str, confirmed: Mapping[str, int], lease_id: str
) -> list[str]:
    """Add one asset event per topic with confirmed messages through each ``AssetAlias`` among the task's
    ``outlets``; return the URIs. Outside a task run (no ``outlet_events`` in the context) nothing is emitted.
    """
    from airflow.sdk import Asset, AssetAlias

    events = context.get("outlet_events") if context else None
    aliases = [outlet for outlet in outlets or () if isinstance(outlet, AssetAlias)]
    if events is None or not aliases:
        return []
    uris = []
    for topic, count in sorted(confirmed.items()):
        uri = topic_asset_uri(source, topic)
        for alias in aliases:
            events[alias].add(Asset(uri), extra={"published": count, "lease": lease_id})
        uris.append(uri)
    return uris
