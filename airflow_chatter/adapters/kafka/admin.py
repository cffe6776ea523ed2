"""Operators' pre-flight checks against a Kafka cluster: ``check_connectivity`` and ``ensure_topics``.

Separate from the publisher: these talk to the cluster through kafka-python's admin client, and change when
provisioning does, not when publishing does. A broker that refuses the handshake is named, as the publisher names it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from airflow_chatter.adapters.kafka.diagnosis import ConnectionFailures
from airflow_chatter.adapters.kafka.errors import describe
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import PublishError

__all__ = ["CHECKPOINT_TOPIC_CONFIGS", "check_connectivity", "ensure_topics", "verify_checkpoint_topic"]

#: A checkpoint topic keeps the last record of each lease (compaction), and compacts within hours rather than the
#: default week, so that reading a lease's record at drain start stays short.
CHECKPOINT_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "3600000", "min.cleanable.dirty.ratio": "0.1"}


def _unreachable(settings: KafkaSettings, timeout_s: float, exc: BaseException, why: str | None) -> PublishError:
    where = f"Kafka at {settings.servers}"
    if why:
        return PublishError(f"{where} refused the connection: {why} (after {describe(exc)})")
    return PublishError(f"cannot reach {where} within {timeout_s:.0f} s: {describe(exc)}")


def _admin_client(settings: KafkaSettings, timeout_s: float) -> Any:
    from kafka import KafkaAdminClient
    from kafka import errors as ke

    config = settings.client_config()
    # The admin client always bootstraps in its constructor, even with a pinned api_version.
    config["bootstrap_timeout_ms"] = int(timeout_s * 1000)
    config["request_timeout_ms"] = max(1000, min(settings.request_timeout_ms, int(timeout_s * 1000)))
    failure: PublishError | None = None
    with ConnectionFailures.listening(settings) as failures:
        try:
            return KafkaAdminClient(**config)
        except ke.KafkaError as exc:
            failure = _unreachable(settings, timeout_s, exc, failures.explain())
            failure.__cause__ = exc
    raise failure


def check_connectivity(settings: KafkaSettings, *, timeout_s: float = 10.0) -> None:
    """Raise ``PublishError`` unless a broker answers (bootstrap + metadata) within ``timeout_s``.

    A broker that refuses the handshake (SASL, TLS) is named as such, not as unreachable.
    """
    admin = _admin_client(settings, timeout_s)
    try:
        admin.list_topics()  # one metadata round trip (describe_cluster trips on pinned versions)
    finally:
        admin.close()


def ensure_topics(
    settings: KafkaSettings,
    names: Iterable[str],
    *,
    partitions: int = 3,
    replication_factor: int = 1,
    timeout_s: float = 30.0,
    configs: dict[str, str] | None = None,
) -> None:
    """Create the topics that do not exist yet (with topic ``configs``, if given) and wait until every partition has a
    leader. An existing topic is left as it is."""
    from kafka import errors as ke

    topics = list(dict.fromkeys(names))
    if not topics:
        return
    deadline = time.monotonic() + timeout_s
    admin = _admin_client(settings, timeout_s)
    try:
        result = admin.create_topics(
            {
                name: {"num_partitions": partitions, "replication_factor": replication_factor, "configs": configs or {}}
                for name in topics
            },
            timeout_ms=int(timeout_s * 1000),
            raise_errors=False,
        )
        for topic in result.get("topics", []):
            code = topic.get("error_code", 0)
            if code and code != ke.TopicAlreadyExistsError.errno:
                err = ke.for_code(code)
                raise PublishError(
                    f"creating topic {topic.get('name')!r} failed: {err.__name__} "
                    f"{topic.get('error_message') or ''}".rstrip()
                )
        left_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        admin.wait_for_topics(topics, timeout_ms=left_ms)
    finally:
        admin.close()


def verify_checkpoint_topic(settings: KafkaSettings, topic: str, *, timeout_s: float = 10.0) -> None:
    """Raise ``ConfigurationError`` naming ``checkpoint_topic`` unless ``topic`` exists with ``cleanup.policy``
    compact (an exactly-once drain's checkpoint records must outlive the retention of a deleting topic)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    from airflow_chatter.errors import ConfigurationError

    admin = _admin_client(settings, timeout_s)
    try:
        if topic not in set(admin.list_topics()):
            raise ConfigurationError(
                "checkpoint_topic",
                topic,
                f"does not exist on Kafka at {settings.servers}; `airflow-chatter provision` creates it compacted",
            )
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    finally:
        admin.close()
    policy = str(found.get("topic", {}).get(topic, {}).get("cleanup.policy", {}).get("value", ""))
    if "compact" not in policy.split(","):
        raise ConfigurationError(
            "checkpoint_topic",
            topic,
            f"has cleanup.policy={policy or 'unknown'} on Kafka at {settings.servers}; it must be compact, or a "
            "lease's last checkpoint record could be deleted by retention",
        )
