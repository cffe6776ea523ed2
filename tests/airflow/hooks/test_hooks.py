"""The two hooks: the address in host, lazy clients, errors that name the field, no secret."""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any
from unittest import mock

import pytest
from azure.cosmos import exceptions as cosmos_errors

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.errors import ConfigurationError
from tests.fixtures.cosmos import chatter_connection

COSMOS_KEY = "c2VjcmV0LWNvc21vcy1rZXktZG8tbm90LWxlYWs="
SASL_PASSWORD = "s3cret-sasl-password-do-not-leak"


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.fixture
def cosmos_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    set_connection(
        monkeypatch,
        "chatter_cosmos_test",
        conn_type="chattercosmos",
        host="https://127.0.0.1:8081/",
        password=COSMOS_KEY,
        extra={"database_name": "orders", "ca_cert_path": "/tmp/emulator.pem"},
    )
    return "chatter_cosmos_test"


def test_constructing_the_cosmos_hook_does_no_network_io(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    ChatterCosmosHook(cosmos_conn)
    assert not patched_cosmos_client.called, "CosmosClient() does network I/O; it must wait for the first use in a task"


def test_the_cosmos_endpoint_is_the_connection_host_and_the_emulator_ca_is_verified(
    cosmos_conn: str, patched_cosmos_client: Any
) -> None:
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
        conn_type="chattercosmos",
        host="https://acct.documents.azure.com:443/",
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


@pytest.mark.parametrize("endpoint", ["https://127.0.0.1:8081/", "https://localhost:8081/"])
def test_verify_tls_without_a_ca_for_a_loopback_endpoint_is_refused_naming_ca_cert_path(
    monkeypatch: pytest.MonkeyPatch, patched_cosmos_client: Any, endpoint: str
) -> None:
    set_connection(monkeypatch, "cosmos_loop", conn_type="chattercosmos", host=endpoint, password=COSMOS_KEY)
    with pytest.raises(ConfigurationError, match=r"connection 'cosmos_loop' extra ca_cert_path=None is required"):
        ChatterCosmosHook("cosmos_loop").get_conn()
    assert not patched_cosmos_client.called, "refused before any request: azure-cosmos would not verify it"


def test_turning_tls_verification_off_for_a_loopback_emulator_connects_unverified_on_purpose(
    monkeypatch: pytest.MonkeyPatch, patched_cosmos_client: Any
) -> None:
    set_connection(
        monkeypatch,
        "cosmos_loop_off",
        conn_type="chattercosmos",
        host="https://127.0.0.1:8081/",
        password=COSMOS_KEY,
        extra={"connection_verify": False},
    )
    ChatterCosmosHook("cosmos_loop_off").get_conn()
    assert patched_cosmos_client.call_args.kwargs["connection_verify"] is False


def test_the_adapter_refuses_an_unverified_loopback_client_too() -> None:
    from airflow_chatter.adapters.cosmos.client import make_cosmos_client

    with pytest.raises(ConfigurationError, match=r"^ca_cert_path=None is required to verify TLS for the loopback"):
        make_cosmos_client("https://localhost:8081/", COSMOS_KEY, verify=True)


def test_cosmos_test_connection_never_echoes_the_key(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    patched_cosmos_client.side_effect = ValueError(f"bad credential {COSMOS_KEY} for endpoint")
    ok, message = ChatterCosmosHook(cosmos_conn).test_connection()
    assert not ok
    assert COSMOS_KEY not in message, "a connection-test message is shown in the UI and logged"
    assert "chatter_cosmos_test" in message, "the message names the connection"


def test_cosmos_get_conn_error_carries_no_key_and_no_cause(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    patched_cosmos_client.side_effect = ValueError(f"bad credential {COSMOS_KEY}")
    with pytest.raises(RuntimeError, match="Cosmos connection 'chatter_cosmos_test' failed") as raised:
        ChatterCosmosHook(cosmos_conn).get_conn()
    assert COSMOS_KEY not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is None, (
        "a chained cause or context would carry the secret into the task traceback"
    )


def test_cosmos_test_connection_reads_the_database(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    ok, message = ChatterCosmosHook(cosmos_conn).test_connection()
    assert ok, message
    patched_cosmos_client.return_value.get_database_client.assert_called_once_with("orders")


def test_cosmos_test_connection_names_a_missing_database(cosmos_conn: str, patched_cosmos_client: Any) -> None:
    database = patched_cosmos_client.return_value.get_database_client.return_value
    database.read.side_effect = cosmos_errors.CosmosResourceNotFoundError(status_code=404, message='{"message":""}')
    ok, message = ChatterCosmosHook(cosmos_conn).test_connection()
    assert not ok
    assert message == "Connected to Cosmos DB at https://127.0.0.1:8081/, but database 'orders' does not exist."


# ---------------------------------------------------------------------------------------------
# Cosmos against the emulator: a missing database or container is named.
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def emulator_conn(monkeypatch: pytest.MonkeyPatch, cosmos_endpoint: Any) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_COSMOS_EMULATOR", chatter_connection(cosmos_endpoint, f"missing-{uuid.uuid4().hex[:8]}")
    )
    return "cosmos_emulator"


@pytest.mark.cosmos
def test_a_missing_database_is_named_instead_of_a_bare_404(emulator_conn: str) -> None:
    hook = ChatterCosmosHook(emulator_conn)
    database = hook.get_connection(emulator_conn).extra_dejson["database_name"]
    container = hook.get_container("orders")
    with pytest.raises(ConfigurationError, match=rf"^database='{database}' does not exist in .*container 'orders'"):
        container.properties()


@pytest.mark.cosmos
def test_a_missing_container_is_named_with_its_database(emulator_conn: str, cosmos_database: Any) -> None:
    hook = ChatterCosmosHook(emulator_conn, database_name=cosmos_database.id)
    with pytest.raises(
        ConfigurationError, match=rf"^container='no-such-container' does not exist in database '{cosmos_database.id}'"
    ):
        hook.get_container("no-such-container").read("x", "pk")


# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------


def test_kafka_bootstrap_servers_are_the_connection_host_and_the_api_version_is_pinned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_connection(monkeypatch, "kafka_plain", conn_type="chatterkafka", host="127.0.0.1:19092, 127.0.0.1:19093")
    config = ChatterKafkaHook("kafka_plain").client_config()
    assert config["bootstrap_servers"] == ["127.0.0.1:19092", "127.0.0.1:19093"]
    assert config["api_version"] == (2, 8), "an unpinned kafka-python client blocks 30 s probing the broker"
    assert config["security_protocol"] == "PLAINTEXT"
    assert config["request_timeout_ms"] == 30_000
    assert "sasl_plain_password" not in config


def test_a_kafka_connection_given_as_a_uri_with_host_and_port_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_URI", "chatterkafka://broker.example:9092")
    assert ChatterKafkaHook("kafka_uri").settings().bootstrap_servers == ("broker.example:9092",)


def test_servers_in_an_extra_are_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch, "kafka_both", conn_type="chatterkafka", host="b1:9092", extra={"bootstrap_servers": "evil:9092"}
    )
    # Only host is compared by Airflow's Test Connection guard before it reuses the stored password.
    with pytest.raises(ConfigurationError, match=r"connection 'kafka_both' extra bootstrap_servers='evil:9092' is not"):
        ChatterKafkaHook("kafka_both").settings()


def test_a_kafka_connection_without_servers_names_the_host_field(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "kafka_none", conn_type="chatterkafka")
    with pytest.raises(ConfigurationError, match=r"connection 'kafka_none' host=None must be the bootstrap servers"):
        ChatterKafkaHook("kafka_none").settings()


def test_kafka_sasl_without_a_password_names_the_password_field(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_sasl",
        conn_type="chatterkafka",
        host="b:9093",
        login="relay",
        extra={"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"},
    )
    with pytest.raises(ConfigurationError, match=r"connection 'kafka_sasl' password=.*sasl_password: required"):
        ChatterKafkaHook("kafka_sasl").settings()


def test_kafka_sasl_ssl_config(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch,
        "kafka_sasl",
        conn_type="chatterkafka",
        host="b:9093",
        login="relay",
        password=SASL_PASSWORD,
        extra={"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl_cafile": "/etc/ca.pem"},
    )
    hook = ChatterKafkaHook("kafka_sasl")
    config = hook.client_config()
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["sasl_plain_username"] == "relay"
    assert config["ssl_cafile"] == "/etc/ca.pem"
    assert SASL_PASSWORD not in repr(hook) and SASL_PASSWORD not in repr(hook.settings())


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({"api_version": "1.0"}, "extra api_version='1.0'"),
        ({"api_version": "banana"}, "extra api_version='banana'"),
        ({"request_timeout_ms": -5}, "extra request_timeout_ms=-5"),
        ({"security_protocol": "TLS"}, "extra security_protocol='TLS'"),
        ({"linger": 5}, "extra linger=5 is refused: linger: not a Kafka publisher setting"),
        ({"acks": 1}, "extra acks=1 is refused: acks=1 would weaken delivery"),
    ],
)
def test_a_refused_kafka_setting_names_where_it_lives_in_the_connection(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any], where: str
) -> None:
    set_connection(monkeypatch, "kafka_bad", conn_type="chatterkafka", host="b:9092", extra=extra)
    with pytest.raises(ConfigurationError) as raised:
        ChatterKafkaHook("kafka_bad").settings()
    assert str(raised.value).startswith(f"connection 'kafka_bad' {where}"), str(raised.value)


def test_a_sasl_password_on_a_plaintext_connection_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_connection(
        monkeypatch, "kafka_stray", conn_type="chatterkafka", host="b:9092", login="relay", password=SASL_PASSWORD
    )
    with pytest.raises(ConfigurationError, match=r"login/password.*does not use SASL") as raised:
        ChatterKafkaHook("kafka_stray").settings()
    assert SASL_PASSWORD not in str(raised.value)


def test_what_the_kafka_form_saves_for_a_plaintext_broker_is_a_valid_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_chatter.airflow.get_provider_info import KAFKA_CONNECTION_TYPE

    # The form pre-fills every field's default and saves a cleared field as null.
    extra = {name: field["schema"].get("default") for name, field in KAFKA_CONNECTION_TYPE["conn-fields"].items()}
    set_connection(monkeypatch, "kafka_form", conn_type="chatterkafka", host="127.0.0.1:9092", login="", extra=extra)
    settings = ChatterKafkaHook("kafka_form").settings()
    assert (settings.security_protocol, settings.api_version, settings.request_timeout_ms) == (
        "PLAINTEXT",
        (2, 8),
        30000,
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_kafka_test_connection_fails_naming_the_connection_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_connection(
        monkeypatch,
        "kafka_down",
        conn_type="chatterkafka",
        host=f"127.0.0.1:{_closed_port()}",
        login="relay",
        password=SASL_PASSWORD,
        extra={"security_protocol": "SASL_PLAINTEXT"},
    )
    ok, message = ChatterKafkaHook("kafka_down").test_connection(timeout_s=2)
    assert not ok
    assert SASL_PASSWORD not in message
    assert message.startswith("Kafka connection 'kafka_down' failed: PublishError: cannot reach Kafka at 127.0.0.1:")


def test_kafka_test_connection_from_airflows_test_button_names_the_connection_not_the_transient_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Airflow's Test endpoint builds the hook under a random ``transient_conn_id``; the message names the
    connection the operator is editing (the request's ``test_body.connection_id``)."""
    import inspect
    from types import SimpleNamespace

    from airflow.api_fastapi.core_api.routes.public import connections

    source = inspect.getsource(connections.test_connection)
    assert "transient_conn_id" in source and "test_body" in source, "the endpoint's names the hook looks for"

    def endpoint(test_body: object, transient_conn_id: str) -> tuple[bool, str]:  # as Airflow 3.3's, in short
        return ChatterKafkaHook(transient_conn_id).test_connection(timeout_s=2)

    set_connection(monkeypatch, "x7k2p9q4zt", conn_type="chatterkafka", host=f"127.0.0.1:{_closed_port()}")
    ok, message = endpoint(SimpleNamespace(connection_id="chatter_kafka_prod"), "x7k2p9q4zt")
    assert not ok and message.startswith("Kafka connection 'chatter_kafka_prod' failed: "), message
    assert "x7k2p9q4zt" not in message


def test_a_hook_container_whose_metadata_read_times_out_is_named_in_the_contract_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CNT-05: the drain's container check wraps a failed metadata read in a ContainerContractError naming the
    container and database; a container from the hook is named before the SDK proxy exists (it was '<unknown>')."""
    from azure.core.exceptions import ServiceResponseError

    from airflow_chatter.drain.monitored_container import verify_containers
    from airflow_chatter.errors import ContainerContractError

    set_connection(
        monkeypatch,
        "cosmos_names",
        conn_type="chattercosmos",
        host="https://cosmos.example.com/",
        password="secret-key",
    )
    hook = ChatterCosmosHook("cosmos_names", database_name="shop")
    monkeypatch.setattr(hook, "get_conn", lambda: object())

    def timed_out(*_: Any) -> Any:
        raise ServiceResponseError("Read timed out")

    monkeypatch.setattr("airflow_chatter.adapters.cosmos.client.open_container", timed_out)
    with pytest.raises(ContainerContractError) as raised:
        verify_containers(hook.get_container("orders"), ["/customerId"], hook.get_container("orders-leases"))
    text = str(raised.value)
    assert "'orders'" in text and "'orders-leases'" in text and "'shop'" in text, text
    assert "<unknown>" not in text
