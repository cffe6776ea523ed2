"""The Kafka hook on kafka-python: one connection type, ``chatter_kafka``, handing out publishers and consumers.

The Airflow Kafka provider is built on confluent-kafka with its own ``kafka`` connection type, so this
hook declares its own. Every kafka-python client it builds has ``api_version`` pinned, because an
unpinned client blocks its constructor for up to 30 s probing the broker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_chatter.airflow.hooks._secrets import mask, scrub
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow_chatter.adapters.kafka.publisher import KafkaPublisherSettings
    from airflow_chatter.ports import Publisher

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka 4 dropped client protocol versions older than 2.1 (KIP-896).
MIN_API_VERSION = (2, 1)


def parse_api_version(value: Any, *, option: str = "api_version") -> tuple[int, ...]:
    """Parse ``"3.9"`` / ``"2.8.0"`` / ``[3, 9]`` into a kafka-python ``api_version`` tuple."""
    try:
        parts = tuple(int(p) for p in (value.split(".") if isinstance(value, str) else value))
    except (TypeError, ValueError):
        raise ConfigurationError(option, value, "is not a version such as '3.9'") from None
    if not 2 <= len(parts) <= 3 or parts < MIN_API_VERSION:
        raise ConfigurationError(option, value, "must be a broker version of at least 2.1, such as '3.9'")
    return parts


class ChatterKafkaHook(BaseHook):
    """Connect to Kafka with kafka-python and hand out a ``KafkaPublisher`` or a ``KafkaConsumer``.

    Connection extras: ``bootstrap_servers`` (required, comma-separated), ``security_protocol``
    (default PLAINTEXT), ``sasl_mechanism`` (for SASL_*; login and password are the SASL user and
    password), ``ssl_cafile``, ``ssl_check_hostname`` (default true), ``api_version`` (default
    ``"2.8"``), ``request_timeout_ms`` (default 30000) and ``client_id``.

    :param chatter_kafka_conn_id: the connection id; default ``chatter_kafka_default``.
    """

    conn_name_attr = "chatter_kafka_conn_id"
    default_conn_name = "chatter_kafka_default"
    conn_type = "chatter_kafka"
    hook_name = "Chatter Kafka (kafka-python)"

    def __init__(self, chatter_kafka_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.conn_id = chatter_kafka_conn_id
        self._secrets: list[str] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(conn_id={self.conn_id!r})"

    def client_config(self) -> dict[str, Any]:
        """Return kafka-python client settings (bootstrap, security, timeouts) from the connection.

        The result holds the SASL password; it is registered with Airflow's masker, but never log it.
        """
        conn = self.get_connection(self.conn_id)
        extras = conn.extra_dejson
        where = f"connection {self.conn_id!r} extra"
        servers = extras.get("bootstrap_servers") or conn.host
        if not servers:
            raise ConfigurationError(f"{where} bootstrap_servers", None, "is required (host:port[,host:port])")
        protocol = str(extras.get("security_protocol") or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigurationError(f"{where} security_protocol", protocol, f"must be one of {SECURITY_PROTOCOLS}")
        config: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in str(servers).split(",") if s.strip()],
            "security_protocol": protocol,
            "api_version": parse_api_version(extras.get("api_version") or "2.8", option=f"{where} api_version"),
            "request_timeout_ms": int(extras.get("request_timeout_ms") or 30000),
            "client_id": extras.get("client_id") or "airflow-chatter",
        }
        if protocol.startswith("SASL_"):
            mechanism = str(extras.get("sasl_mechanism") or "PLAIN").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigurationError(f"{where} sasl_mechanism", mechanism, f"must be one of {SASL_MECHANISMS}")
            if not conn.login or not conn.password:
                raise ConfigurationError(
                    f"connection {self.conn_id!r} login/password", "***", f"are required for {protocol}"
                )
            config |= {
                "sasl_mechanism": mechanism,
                "sasl_plain_username": conn.login,
                "sasl_plain_password": conn.password,
            }
            self._secrets = [conn.password]
            mask(conn.password)
        if protocol.endswith("SSL"):
            if extras.get("ssl_cafile"):
                config["ssl_cafile"] = extras["ssl_cafile"]
            check = extras.get("ssl_check_hostname")
            config["ssl_check_hostname"] = True if check is None else str(check).lower() in {"true", "1", "yes"}
        return config

    def publisher_settings(self, **overrides: Any) -> KafkaPublisherSettings:
        """Return the ``KafkaPublisherSettings`` of this connection (``acks=all``, idempotent)."""
        from airflow_chatter.adapters.kafka.publisher import KafkaPublisherSettings

        config = self.client_config() | overrides
        try:
            return KafkaPublisherSettings.from_mapping(config)
        except ValueError as error:
            raise ConfigurationError(f"connection {self.conn_id!r}", "***", scrub(str(error), self._secrets)) from None

    def get_conn(self) -> Publisher:
        return self.get_publisher()

    def get_publisher(self, **overrides: Any) -> Publisher:
        """Return a ``KafkaPublisher``; it connects on its first send, never here."""
        from airflow_chatter.adapters.kafka.publisher import KafkaPublisher

        return KafkaPublisher(self.publisher_settings(**overrides))

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        """Return ``KafkaConsumer`` keyword arguments: this connection's settings (security, SASL, SSL CA,
        pinned ``api_version``, request timeout), ``enable_auto_commit=False``, ``auto_offset_reset="earliest"``
        and ``session_timeout_ms=6000`` unless ``overrides`` say otherwise (auto-commit is refused).

        The result holds the SASL password; it is registered with Airflow's masker, but never log it.
        """
        from airflow_chatter.adapters.kafka.consumer import consumer_config

        settings = self.publisher_settings()
        try:
            return consumer_config(settings, group_id=group_id, **overrides)
        except ValueError as error:
            raise ConfigurationError(f"connection {self.conn_id!r}", "***", scrub(str(error), self._secrets)) from None

    def get_consumer(self, topics: str | Iterable[str], group_id: str, **overrides: Any) -> Any:
        """Return a kafka-python ``KafkaConsumer`` subscribed to ``topics`` in ``group_id``.

        ``api_version`` is pinned, so the constructor never blocks probing the broker; it joins the group
        and fetches on its first ``poll`` (kafka-python 3 does start its bootstrap connection in the
        background, so call this in a task, never at DAG parse time; the hook itself does no I/O). Commit
        offsets yourself (``consumer.commit(...)``) after handling, and ``close(autocommit=False)`` it.
        """
        from kafka import KafkaConsumer
        from kafka.errors import KafkaConfigurationError

        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t.strip() for t in names):
            raise ConfigurationError("topics", names, "must name at least one topic")
        config = self.consumer_config(group_id, **overrides)
        try:
            return KafkaConsumer(*names, **config)
        except (KafkaConfigurationError, TypeError, ValueError) as error:
            message = scrub(f"{type(error).__name__}: {error}", self._secrets)
            raise ConfigurationError(f"connection {self.conn_id!r} consumer", "***", message) from None

    def test_connection(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """Fetch the cluster's topic metadata from a broker, giving up after ``timeout_s`` seconds."""
        try:
            from airflow_chatter.adapters.kafka.publisher import check_connectivity

            settings = self.publisher_settings()
            check_connectivity(settings, timeout_s=timeout_s)
            return True, f"Connected to Kafka at {','.join(settings.bootstrap_servers)}."
        except Exception as error:  # noqa: BLE001 - the UI's Test button shows the reason instead
            message = scrub(f"{type(error).__name__}: {error}", self._secrets)
            return False, f"Kafka connection {self.conn_id!r} failed: {message}"
