"""The kafka-python adapter: the publisher port (``publisher``) and the at-least-once consumer (``consumer``)."""

from airflow_chatter.adapters.kafka.publisher import (
    KafkaPublisher,
    KafkaPublishError,
    KafkaPublisherSettings,
    check_connectivity,
    ensure_topics,
)

__all__ = [
    "KafkaPublishError",
    "KafkaPublisher",
    "KafkaPublisherSettings",
    "check_connectivity",
    "ensure_topics",
]
