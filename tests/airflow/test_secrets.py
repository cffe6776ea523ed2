"""Connection secrets never reach task logs, XCom, rendered template fields or error messages."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator, ChatterListLeasesOperator
from tests.airflow._support import source

COSMOS_KEY = "Q09TTU9TLUtFWS1uZXZlci1pbi1hLWxvZw=="
SASL_PASSWORD = "sasl-password-never-in-a-log"


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT",
        json.dumps({"conn_type": "chatter_cosmos", "login": "https://127.0.0.1:1/", "password": COSMOS_KEY}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT",
        json.dumps(
            {
                "conn_type": "chatter_kafka",
                "login": "relay",
                "password": SASL_PASSWORD,
                "extra": {"bootstrap_servers": "127.0.0.1:1", "security_protocol": "SASL_PLAINTEXT"},
            }
        ),
    )


def test_task_logs_mask_connection_secrets(connections: None) -> None:
    # The task runner's log processor (airflow.sdk.log.mask_logs) redacts through this masker.
    from airflow.sdk._shared.secrets_masker import redact

    ChatterKafkaHook().client_config()
    with mock.patch("airflow_chatter.adapters.cosmos.container.CosmosClient"):
        ChatterCosmosHook().get_conn()
    line = redact(f"a careless line with {COSMOS_KEY} and {SASL_PASSWORD}")
    assert COSMOS_KEY not in line and SASL_PASSWORD not in line, "the hooks register both secrets with the masker"
    assert "a careless line" in line


def test_a_failing_drain_carries_no_secret(connections: None, capsys: pytest.CaptureFixture[str]) -> None:
    failure = ValueError(f"auth failed for key {COSMOS_KEY}")
    with (
        mock.patch("airflow_chatter.adapters.cosmos.container.CosmosClient", side_effect=failure),
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
