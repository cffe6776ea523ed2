"""The kafka-python adapter: one settings model (``settings``), one error classification (``errors``), the
publisher port (``publisher``), the message-source port (``source``) and the at-least-once consumer (``consumer``).

Importing it makes kafka-python deliver the bytes that arrive with a broker's close (``transport``): a refused SASL
password is then reported as such, not as an unreachable broker."""

from airflow_chatter.adapters.kafka.admin import check_connectivity, ensure_topics
from airflow_chatter.adapters.kafka.errors import KafkaPublishError
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings, KafkaSettingsError
from airflow_chatter.adapters.kafka.transport import deliver_bytes_before_close

deliver_bytes_before_close()

__all__ = [
    "KafkaPublishError",
    "KafkaPublisher",
    "KafkaSettings",
    "KafkaSettingsError",
    "check_connectivity",
    "ensure_topics",
]
