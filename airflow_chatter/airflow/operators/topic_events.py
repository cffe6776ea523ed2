"""The task that turns a drain run's deliveries into asset events: one per Kafka topic its drains delivered to.

The DAG factories emit them from one ``ChatterTopicEventsOperator`` after the mapped drains, not from each drain:
Airflow's creation of an alias's asset on its first event is not safe against itself. Two mapped drains that reach a
new topic at the same moment (measured: 5 ms apart, on two Celery workers) both insert its ``AssetModel``; Postgres
refuses the second and Airflow's execution API sets that drain's task failed, with no retry, although its drain
succeeded. One task per run cannot race itself. The assets and their URIs are defined in
``airflow_chatter.airflow.assets``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_chatter.airflow.assets import KAFKA_SERVER_KEY, TOPICS_KEY, emit_topic_events, topic_asset_uris
from airflow_chatter.ports import OutgoingMessage, Publisher, PublishOutcome

if TYPE_CHECKING:
    from airflow.sdk import Context


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


def _summaries(pulled: Any) -> list[Mapping[str, Any]]:
    """``xcom_pull`` of a mapped task answers a list, or the value itself when only one map index pushed."""
    if pulled is None:
        return []
    if isinstance(pulled, Mapping):
        return [pulled]
    return [item for item in pulled if isinstance(item, Mapping)]


class ChatterTopicEventsOperator(BaseOperator):
    """After a run's drains, emit one asset event per topic they delivered to, through the ``AssetAlias`` in
    ``outlets``: ``kafka://<bootstrap server>/<topic>`` (the Kafka provider's asset of the topic; the server is
    the first of the drains' Kafka connection) and the deprecated ``chatter://<source>/<topic>``, each with
    ``extra`` ``{"published": <messages confirmed by the run's drains>, "leases": [<lease ids that delivered to
    it>]}``.

    It reads each drain's summary (XCom ``return_value``, or ``summary`` of a drain that failed after delivering
    some messages: they are in Kafka all the same). The DAG factories make it a teardown task without setups, so it
    runs when the drains are done, whatever their states, and the run's state stays the drains' (a failed drain
    still fails the run). Returns ``{asset uri: published}``.

    :param source_name: (templated) the source, the middle of the deprecated ``chatter://`` asset URIs.
    :param drain_task_id: the (mapped) drain task whose summaries are read.
    """

    template_fields: Sequence[str] = ("source_name",)
    ui_color = "#e8f4d9"

    def __init__(self, *, source_name: str, drain_task_id: str = "drain", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source_name = source_name
        self.drain_task_id = drain_task_id

    def execute(self, context: Context) -> dict[str, int]:
        ti = context["ti"]
        summaries = [
            *_summaries(ti.xcom_pull(task_ids=self.drain_task_id)),
            *_summaries(ti.xcom_pull(task_ids=self.drain_task_id, key="summary")),
        ]
        published: dict[str | None, Counter[str]] = {}  # per Kafka server (one per source), per topic
        leases: dict[tuple[str | None, str], list[str]] = {}
        for summary in summaries:
            server = summary.get(KAFKA_SERVER_KEY)
            for topic, count in (summary.get(TOPICS_KEY) or {}).items():
                if count > 0:
                    published.setdefault(server, Counter())[topic] += count
                    leases.setdefault((server, topic), []).append(str(summary.get("lease")))
        result: dict[str, int] = {}
        emitted: list[str] = []
        for server, counts in sorted(published.items(), key=lambda item: item[0] or ""):
            extras = {topic: {"leases": sorted(leases[server, topic])} for topic in counts}
            emitted += emit_topic_events(context, self.outlets, self.source_name, counts, extras, server=server)
            for topic, count in sorted(counts.items()):
                result.update(dict.fromkeys(topic_asset_uris(server, self.source_name, topic), count))
        self.log.info(
            "%d drain summaries; asset events: %s",
            len(summaries),
            ", ".join(f"{uri} published={result[uri]}" for uri in emitted) or "none",
        )
        return result
