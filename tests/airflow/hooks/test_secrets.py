"""Connection secrets never reach task logs, XCom, rendered template fields or error messages."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from tests.airflow._support import source

COSMOS_KEY = "Q09TTU9TLUtFWS1uZXZlci1pbi1hLWxvZw=="
SASL_PASSWORD = "sasl-password-never-in-a-log"


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT",
        json.dumps(
            {
                "conn_type": "chattercosmos",
                "host": "https://127.0.0.1:1/",
                "password": COSMOS_KEY,
                "extra": {"ca_cert_path": "/tmp/emulator.pem"},
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": "127.0.0.1:1",
                "login": "relay",
                "password": SASL_PASSWORD,
                "extra": {"security_protocol": "SASL_PLAINTEXT"},
            }
        ),
    )


def test_task_logs_mask_connection_secrets(connections: None) -> None:
    # The task runner's log processor (airflow.sdk.log.mask_logs) redacts through this masker.
    from airflow.sdk._shared.secrets_masker import redact

    ChatterKafkaHook().client_config()
    with mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient"):
        ChatterCosmosHook().get_conn()
    line = redact(f"a careless line with {COSMOS_KEY} and {SASL_PASSWORD}")
    assert COSMOS_KEY not in line and SASL_PASSWORD not in line, "the hooks register both secrets with the masker"
    assert "a careless line" in line


def test_a_sasl_password_put_into_an_extra_is_masked_and_kept_out_of_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk._shared.secrets_masker import redact

    from airflow_chatter.errors import ConfigurationError

    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EXTRA_PASSWORD",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": "127.0.0.1:1",
                "login": "relay",
                "extra": {"sasl_plain_password": SASL_PASSWORD, "security_protocol": "SASL_PLAINTEXT", "linger_ms": -1},
            }
        ),
    )
    with pytest.raises(ConfigurationError, match="extra linger_ms=-1 is refused") as raised:
        ChatterKafkaHook("kafka_extra_password").settings()
    assert SASL_PASSWORD not in str(raised.value)
    assert SASL_PASSWORD not in redact(f"a careless line with {SASL_PASSWORD}")


def test_a_failing_drain_carries_no_secret(connections: None, capsys: pytest.CaptureFixture[str]) -> None:
    failure = ValueError(f"auth failed for key {COSMOS_KEY}")
    with (
        mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient", side_effect=failure),
        pytest.raises(Exception) as raised,
    ):
        ChatterListLeasesOperator(task_id="list", source=source(cosmos_conn_id="chatter_cosmos_default")).execute(
            context={}
        )
    chain = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    text = "\n".join(chain) + capsys.readouterr().out
    assert COSMOS_KEY not in text, "neither the error, its causes, nor the log may echo the account key"
    assert "chatter_cosmos_default" in text, "the error names the connection instead"


def test_xcom_and_rendered_fields_hold_no_secret(connections: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.airflow._support import install_world

    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    config = source(cosmos_conn_id="chatter_cosmos_default", kafka_conn_id="chatter_kafka_default")
    [lease] = ChatterListLeasesOperator(task_id="list", source=config).execute(context={})
    operator = ChatterDrainOperator(
        task_id="drain", source=config, lease_id="{{ params.lease }}", max_documents="{{ params.n }}"
    )
    operator.render_template_fields(context={"params": {"lease": lease, "n": 10}})  # type: ignore[arg-type]
    rendered = json.dumps({field: getattr(operator, field) for field in operator.template_fields}, default=str)
    summary = json.dumps(operator.execute(context={}))
    for secret in (COSMOS_KEY, SASL_PASSWORD):
        assert secret not in rendered, "template fields hold connection ids, never credentials"
        assert secret not in summary, "the XCom summary holds counts and ids only"
    assert json.loads(summary)["published"] == 2


# ---------------------------------------------------------------------------------------------
# Airflow's Test Connection guard: a stored secret is reused only for the stored host.
# ---------------------------------------------------------------------------------------------


class _AllowEverything:
    def is_authorized_connection(self, **_: object) -> bool:
        return True


def _ui_test(**fields: object) -> object:
    """What the connection dialog's Test button does: POST /api/v2/connections/test, the password masked."""
    from airflow.api_fastapi.core_api.datamodels.connections import ConnectionBody
    from airflow.api_fastapi.core_api.routes.public.connections import test_connection

    body = ConnectionBody(**{"password": "***", **fields})  # type: ignore[arg-type]
    return test_connection(test_body=body, user=None, auth_manager=_AllowEverything())  # type: ignore[arg-type]


@pytest.fixture
def test_button(monkeypatch: pytest.MonkeyPatch, airflow_db: object) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__TEST_CONNECTION", "Enabled")


def _stored_cosmos(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    extra = {"database_name": "orders", "ca_cert_path": "/tmp/emulator.pem"}
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "chattercosmos", "password": COSMOS_KEY, "extra": extra, **fields}),
    )


@pytest.mark.airflow
def test_a_ui_test_of_the_stored_cosmos_endpoint_reuses_the_stored_key(
    monkeypatch: pytest.MonkeyPatch, test_button: None
) -> None:
    _stored_cosmos(monkeypatch, "cosmos_guarded", host="https://127.0.0.1:8081/")
    with mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient") as client:
        result = _ui_test(connection_id="cosmos_guarded", conn_type="chattercosmos", host="https://127.0.0.1:8081/")
    assert result.status is True, result.message  # type: ignore[attr-defined]
    assert client.call_args.kwargs["credential"] == COSMOS_KEY, "the masked '***' was replaced by the stored key"


@pytest.mark.airflow
def test_a_ui_test_naming_another_cosmos_endpoint_cannot_reuse_the_stored_key(
    monkeypatch: pytest.MonkeyPatch, test_button: None
) -> None:
    from fastapi import HTTPException

    _stored_cosmos(monkeypatch, "cosmos_guarded", host="https://127.0.0.1:8081/")
    with (
        mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient") as client,
        pytest.raises(HTTPException, match="differs from the stored connection") as refused,
    ):
        _ui_test(connection_id="cosmos_guarded", conn_type="chattercosmos", host="https://attacker.example:443/")
    assert refused.value.status_code == 400
    assert not client.called, "the stored key was never handed to a client for another endpoint"


@pytest.mark.airflow
def test_a_ui_test_with_an_endpoint_in_login_sends_the_key_only_to_the_stored_host(
    monkeypatch: pytest.MonkeyPatch, test_button: None
) -> None:
    # Airflow's guard compares host/port only: an endpoint in login is never read, so the key cannot go there.
    _stored_cosmos(monkeypatch, "cosmos_login_guard", host="https://127.0.0.1:8081/")
    with mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient") as client:
        _ui_test(connection_id="cosmos_login_guard", conn_type="chattercosmos", login="https://attacker.example:443/")
    assert all(call.args == ("https://127.0.0.1:8081/",) for call in client.call_args_list)
    assert "attacker" not in repr(client.call_args_list)


@pytest.mark.airflow
def test_a_ui_test_naming_other_kafka_brokers_cannot_reuse_the_stored_sasl_password(
    monkeypatch: pytest.MonkeyPatch, test_button: None
) -> None:
    from fastapi import HTTPException

    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_GUARDED",
        json.dumps(
            {
                "conn_type": "chatterkafka",
                "host": "127.0.0.1:1",
                "login": "relay",
                "password": SASL_PASSWORD,
                "extra": {"security_protocol": "SASL_PLAINTEXT"},
            }
        ),
    )
    with pytest.raises(HTTPException, match="differs from the stored connection"):
        _ui_test(connection_id="kafka_guarded", conn_type="chatterkafka", host="attacker.example:9092", login="relay")
