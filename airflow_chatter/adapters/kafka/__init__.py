"""The kafka-python adapter: one settings model (``settings``), one error classification (``errors``), the
publisher port (``publisher``), the message-source port (``source``) and the at-least-once consumer (``consumer``)."""

from airflow_chatter.adapters.kafka.admin import check_connectivity, ensure_topics
from airflow_chatter.adapters.kafka.errors import KafkaPublishError
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings, KafkaSettingsError

__all__ = [
    "KafkaPublishError",
    "KafkaPublisher",
    "KafkaSettings",
    "KafkaSettingsError",
    "check_connectivity",
    "ensure_topics",
]
