"""The kafka-python adapter: one settings model (``settings``), one error classification (``errors``), the
publisher port (``publisher``), the message-source port (``source``) and the at-least-once consumer (``consumer``).

Every kafka-python client it builds first makes kafka-python deliver the bytes that arrive with a broker's close
(``transport``, installed by ``KafkaSettings.client_config``): a refused SASL password is then reported as such, not as
an unreachable broker. Importing the package imports no kafka-python (the UI plugin imports its settings model)."""

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
