"""The Kafka hook on kafka-python: connection type ``chatterkafka``, handing out publishers and consumers.

The Airflow Kafka provider is built on confluent-kafka with its own ``kafka`` connection type, so this hook declares
its own. It only maps the connection onto the one settings model, ``KafkaSettings``, which validates every value
once; an error names where in the connection the value lives (``host``, ``login``, ``password`` or an extra).

The bootstrap servers are the connection's ``host`` (``b1:9092,b2:9092``): that is the address Airflow's Test
Connection guard compares before it reuses a stored password, so a test naming other brokers must bring its own
password.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.hooks._connection import ReadOnceHook
from airflow_chatter.airflow.hooks._tested import tested_connection_id
from airflow_chatter.airflow.utils.secrets import mask, scrub
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_chatter.adapters.kafka.settings import KafkaSettings
    from airflow_chatter.ports import Publisher

_PASSWORD_KEYS = frozenset({"sasl_password", "sasl_plain_password"})
#: Where each setting lives in a connection, for error messages; every other setting is an extra of its name.
_LOCATIONS = {"bootstrap_servers": "host", "sasl_username": "login", "sasl_password": "password"}


class ChatterKafkaHook(ReadOnceHook):
    """Connect to Kafka with kafka-python and hand out a ``KafkaPublisher`` or a ``KafkaConsumer``.

    Connection: ``host`` is the bootstrap servers (``host:port[,host:port]``); login and password are the SASL user
    and password (SASL_* only). Extras: ``security_protocol`` (default PLAINTEXT), ``sasl_mechanism`` (default
    PLAIN), ``ssl_cafile``, ``ssl_check_hostname`` (default true), ``api_version`` (default ``"2.8"``),
    ``request_timeout_ms`` (default 30000), ``client_id`` and any other ``KafkaSettings`` field. Defaults come from
    ``KAFKA_DEFAULTS``, the table the connection form shows too. The hook reads its connection once
    (:meth:`connection`).

    :param chatter_kafka_conn_id: the connection id; default ``chatter_kafka_default``.
    """

    conn_name_attr = "chatter_kafka_conn_id"
    default_conn_name = "chatter_kafka_default"
    conn_type = "chatterkafka"
    hook_name = "Chatter Kafka (kafka-python)"

    def __init__(self, chatter_kafka_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.conn_id = chatter_kafka_conn_id
        self._secrets: list[str] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(conn_id={self.conn_id!r})"

    # -- the connection, mapped onto KafkaSettings ---------------------------------------------

    @staticmethod
    def _servers(conn: Connection) -> str | None:
        """The bootstrap servers: the connection's host (with its port, for one bare host name)."""
        host = (conn.host or "").strip()
        if host and conn.port and "," not in host and ":" not in host:
            host = f"{host}:{conn.port}"
        return host or None

    def _values(self) -> dict[str, Any]:
        conn = self.connection()
        extras = {k: v for k, v in dict(conn.extra_dejson).items() if v is not None and v != ""}
        if "bootstrap_servers" in extras:
            # Only ``host`` is what Airflow's Test Connection guard compares before it reuses a stored password.
            raise ConfigurationError(
                f"connection {self.conn_id!r} extra bootstrap_servers",
                extras["bootstrap_servers"],
                "is not read: put the servers in host",
            )
        servers = self._servers(conn)
        if servers is None:
            raise ConfigurationError(
                f"connection {self.conn_id!r} host", None, "must be the bootstrap servers (host:port[,host:port])"
            )
        values: dict[str, Any] = {"bootstrap_servers": servers, **extras}
        if conn.login:
            values["sasl_username"] = conn.login
        if conn.password:
            values["sasl_password"] = conn.password
        # A password is the connection's, but one put into an extra is kept out of messages and logs all the same.
        self._secrets = [str(v) for k, v in values.items() if k in _PASSWORD_KEYS and v]
        mask(*self._secrets)
        return values

    def bootstrap_server(self) -> str:
        """The first bootstrap server (``host:port``): what names these brokers in asset URIs and OpenLineage
        namespaces (``kafka://<server>``). Reads the connection only: no network I/O, no secret."""
        servers = self._servers(self.connection())
        first = (servers or "").split(",")[0].strip()
        if not first:
            raise ConfigurationError(
                f"connection {self.conn_id!r} host", None, "must be the bootstrap servers (host:port[,host:port])"
            )
        return first

    def settings(self, **overrides: Any) -> KafkaSettings:
        """This connection's ``KafkaSettings`` (``acks=all``, idempotent), validated once; no network I/O."""
        from airflow_chatter.adapters.kafka.settings import KafkaSettings, KafkaSettingsError

        values = self._values() | overrides
        try:
            return KafkaSettings.from_mapping(values)
        except KafkaSettingsError as error:
            names = error.field.split("/")
            where = "/".join("setting " + n if n in overrides else _LOCATIONS.get(n, f"extra {n}") for n in names)
            shown = "***" if "sasl_password" in names or len(names) > 1 else values.get(error.field)
            raise ConfigurationError(
                f"connection {self.conn_id!r} {where}", shown, f"is refused: {scrub(str(error), self._secrets)}"
            ) from None

    def client_config(self) -> dict[str, Any]:
        """kafka-python client settings (bootstrap, security, timeouts). Holds the SASL password: never log it."""
        return self.settings().client_config()

    def get_conn(self) -> Publisher:
        return self.get_publisher()

    def get_publisher(self, **overrides: Any) -> Publisher:
        """Return a ``KafkaPublisher``; it connects on its first send, never here."""
        from airflow_chatter.adapters.kafka.publisher import KafkaPublisher

        return KafkaPublisher(self.settings(**overrides))

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        """Return ``KafkaConsumer`` keyword arguments: this connection's settings (security, SASL, SSL CA,
        pinned ``api_version``, request timeout), ``enable_auto_commit=False``, ``auto_offset_reset="earliest"``
        and ``session_timeout_ms=6000`` unless ``overrides`` say otherwise (auto-commit is refused).

        The result holds the SASL password; it is registered with Airflow's masker, but never log it.
        """
        from airflow_chatter.adapters.kafka.consumer import consumer_config

        settings = self.settings()
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
            from airflow_chatter.adapters.kafka.admin import check_connectivity

            settings = self.settings()
            check_connectivity(settings, timeout_s=timeout_s)
            return True, f"Connected to Kafka at {settings.servers}."
        except Exception as error:  # noqa: BLE001 - the UI's Test button shows the reason instead
            name = tested_connection_id(self.conn_id)  # not the Test button's transient id
            message = scrub(f"{type(error).__name__}: {error}", self._secrets).replace(repr(self.conn_id), repr(name))
            return False, f"Kafka connection {name!r} failed: {message}"
