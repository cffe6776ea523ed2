"""The two hooks: lazy clients, connection parsing, bounded test_connection, and no secret in any message."""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from unittest import mock

import pytest

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook, parse_api_version
from airflow_chatter.errors import ConfigurationError

COSMOS_KEY = "c2VjcmV0LWNvc21vcy1rZXktZG8tbm90LWxlYWs="
SASL_PASSWORD = "s3cret-sasl-password-do-not-leak"


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.fixture
def cosmos_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    set_connection(
        monkeypatch,
        "chatter_cosmos_test",
        conn_type="chatter_cosmos",
        login="https://127.0.0.1:8081/",
        password=COSMOS_KEY,
        extra={"database_name": "orders", "ca_cert_path": "/tmp/emulator.pem"},
    )
    return "chatter_cosmos_test"


@pytest.fixture
def patched_cosmos_client() -> Any:
    with mock.patch("airflow_chatter.adapters.cosmos.container.CosmosClient", autospec=False) as client:
        yield client


def test_constructing_the_cosmos_hook_does_no_network_io(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    ChatterCosmosHook(cosmos_conn)
    assert not patched_cosmos_client.called, "CosmosClient() does network I/O; it must wait for the first use in a task"


def test_cosmos_client_uses_the_key_and_the_emulator_certificate(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    hook = ChatterCosmosHook(cosmos_conn)
    hook.get_conn()
    hook.get_conn()
    assert patched_cosmos_client.call_count == 1, "the client is cached per hook"
    kwargs = patched_cosmos_client.call_args.kwargs
    assert patched_cosmos_client.call_args.args == ("https://127.0.0.1:8081/",)
    assert kwargs["credential"] == COSMOS_KEY
    assert kwargs["connection_verify"] == "/tmp/emulator.pem", "a CA path verifies against that certificate"
    assert kwargs["ssl_config"].SSLCaCerts == "/tmp/emulator.pem", "azure-cosmos skips loopback TLS checks without it"


def test_cosmos_without_a_key_uses_default_azure_credential(
    monkeypatch: pytest.MonkeyPatch, patched_cosmos_client: Any
) -> None:
    set_connection(
        monkeypatch,
        "chatter_cosmos_entra",
        conn_type="chatter_cosmos",
        login="https://acct.documents.azure.com:443/",
        extra={"database_name": "orders", "managed_identity_client_id": "mi", "workload_identity_tenant_id": "t"},
    )
    sentinel = object()
    with mock.patch(
        "airflow.providers.microsoft.azure.utils.get_sync_default_azure_credential", return_value=sentinel
    ) as credential:
        ChatterCosmosHook("chatter_cosmos_entra").get_conn()
    credential.assert_called_once_with(managed_identity_client_id="mi", workload_identity_tenant_id="t")
    assert patched_cosmos_client.call_args.kwargs["credential"] is sentinel, "no key means Entra ID (data-plane RBAC)"
    assert patched_cosmos_client.call_args.kwargs["connection_verify"] is True, "TLS is verified unless turned off"


def test_cosmos_test_connection_never_echoes_the_key(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    patched_cosmos_client.side_effect = ValueError(f"bad credential {COSMOS_KEY} for endpoint")
    ok, message = ChatterCosmosHook(cosmos_conn).test_connection()
    assert not ok
    assert COSMOS_KEY not in message, "a connection-test message is shown in the UI and logged"
    assert "chatter_cosmos_test" in message, "the message names the connection"


def test_cosmos_get_conn_error_carries_no_key_and_no_cause(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    patched_cosmos_client.side_effect = ValueError(f"bad credential {COSMOS_KEY}")
    with pytest.raises(RuntimeError) as raised:
        ChatterCosmosHook(cosmos_conn).get_conn()
    assert COSMOS_KEY not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is None, (
        "a chained cause or context would carry the secret into the task traceback"
    )


def test_cosmos_test_connection_reads_the_database(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    ok, message = ChatterCosmosHook(cosmos_conn).test_connection()
    assert ok, message
    patched_cosmos_client.return_value.get_database_client.assert_called_once_with("orders")


# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------


def test_kafka_client_config_pins_the_api_version(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_plain",
        conn_type="chatter_kafka",
        extra={"bootstrap_servers": "127.0.0.1:19092, 127.0.0.1:19093"},
    )
    config = ChatterKafkaHook("kafka_plain").client_config()
    assert config["bootstrap_servers"] == ["127.0.0.1:19092", "127.0.0.1:19093"]
    assert config["api_version"] == (2, 8), "an unpinned kafka-python client blocks 30 s probing the broker"
    assert config["security_protocol"] == "PLAINTEXT"
    assert "sasl_plain_password" not in config


def test_kafka_sasl_needs_user_and_password(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_sasl",
        conn_type="chatter_kafka",
        login="relay",
        extra={"bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"},
    )
    with pytest.raises(ConfigurationError, match="login/password"):
        ChatterKafkaHook("kafka_sasl").client_config()


def test_kafka_sasl_ssl_config(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_sasl",
        conn_type="chatter_kafka",
        login="relay",
        password=SASL_PASSWORD,
        extra={
            "bootstrap_servers": "b:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "ssl_cafile": "/etc/ca.pem",
        },
    )
    hook = ChatterKafkaHook("kafka_sasl")
    config = hook.client_config()
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["sasl_plain_username"] == "relay"
    assert config["ssl_cafile"] == "/etc/ca.pem"
    assert SASL_PASSWORD not in repr(hook)


@pytest.mark.parametrize("value", ["1.0", "banana", "3", "0.11.0"])
def test_kafka_api_version_below_2_1_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match="api_version"):
        parse_api_version(value)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_kafka_test_connection_is_bounded_and_secret_free(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_down",
        conn_type="chatter_kafka",
        login="relay",
        password=SASL_PASSWORD,
        extra={"bootstrap_servers": f"127.0.0.1:{_closed_port()}", "security_protocol": "SASL_PLAINTEXT"},
    )
    started = time.monotonic()
    ok, message = ChatterKafkaHook("kafka_down").test_connection(timeout_s=2)
    elapsed = time.monotonic() - started
    assert not ok
    assert elapsed < 10, f"test_connection must give up after its timeout, took {elapsed:.1f}s"
    assert SASL_PASSWORD not in message
    assert "kafka_down" in message
