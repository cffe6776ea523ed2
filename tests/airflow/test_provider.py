"""Provider discovery: Airflow sees the provider and both connection forms without importing the hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _hook_meta() -> dict[str, object]:
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    return {meta.connection_type: meta for meta in HookMetaService.hook_meta_data()}


def test_connection_forms_put_the_endpoint_and_the_brokers_in_host() -> None:
    meta = _hook_meta()
    cosmos, kafka = meta["chattercosmos"], meta["chatterkafka"]
    assert cosmos.hook_class_name == "airflow_chatter.airflow.hooks.cosmos.ChatterCosmosHook"
    assert kafka.hook_class_name == "airflow_chatter.airflow.hooks.kafka.ChatterKafkaHook"
    # What GET /ui/connections/hook_meta serves: the form the connection dialog renders.
    assert cosmos.standard_fields.host.hidden is False and cosmos.standard_fields.host.title == "Cosmos Endpoint URI"
    assert cosmos.standard_fields.login.hidden is True, "the endpoint moved from login to host"
    assert cosmos.standard_fields.password.title == "Cosmos Account Key"
    assert kafka.standard_fields.host.hidden is False and kafka.standard_fields.host.title == "Bootstrap servers"
    assert kafka.standard_fields.password.title == "SASL Password"
    assert {"database_name", "connection_verify", "ca_cert_path"} <= set(cosmos.extra_fields), (
        "the Cosmos form must offer the database and the emulator TLS settings"
    )
    assert {"security_protocol", "sasl_mechanism", "ssl_cafile"} <= set(kafka.extra_fields)
    assert "bootstrap_servers" not in kafka.extra_fields, "the brokers are the host, not an extra"
    assert kafka.extra_fields["security_protocol"]["schema"]["enum"] == [
        "PLAINTEXT",
        "SSL",
        "SASL_PLAINTEXT",
        "SASL_SSL",
    ]


def test_the_kafka_form_offers_sasl_mechanisms_without_a_literal_null() -> None:
    schema = _hook_meta()["chatterkafka"].extra_fields["sasl_mechanism"]["schema"]
    assert schema["enum"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], "None in an enum renders as 'null'"
    assert schema["default"] == "PLAIN"


def test_connection_type_names_are_uri_schemes() -> None:
    from airflow_chatter.airflow.get_provider_info import COSMOS_CONNECTION_TYPE, KAFKA_CONNECTION_TYPE

    for connection in (COSMOS_CONNECTION_TYPE, KAFKA_CONNECTION_TYPE):
        assert "_" not in connection["connection-type"], "Airflow warns for every URI of a scheme with '_'"


def test_the_kafka_form_takes_its_bounds_and_defaults_from_the_settings_model() -> None:
    from airflow_chatter.adapters.kafka.settings import KafkaSettings

    fields = _hook_meta()["chatterkafka"].extra_fields
    model = KafkaSettings(bootstrap_servers="b:9092")
    assert fields["request_timeout_ms"]["schema"]["default"] == model.request_timeout_ms
    assert fields["request_timeout_ms"]["schema"]["exclusiveMinimum"] == 0, "the model refuses 0, so does the form"
    assert fields["client_id"]["schema"]["default"] == model.client_id


def test_every_trigger_module_is_listed() -> None:
    from airflow_chatter.airflow.get_provider_info import get_provider_info

    listed = {m for entry in get_provider_info()["triggers"] for m in entry["python-modules"]}
    shipped = {
        f"airflow_chatter.airflow.triggers.{path.stem}"
        for path in (Path(__file__).resolve().parents[2] / "airflow_chatter/airflow/triggers").glob("*.py")
        if not path.stem.startswith("_")
    }
    assert listed == shipped, "Airflow finds a trigger class only in a module the provider lists"


def test_providers_manager_registers_every_connection_type_as_testable() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "airflow-chatter" in manager.providers
    for conn_type in ("chattercosmos", "chatterkafka"):
        hook = manager._hooks_lazy_dict[conn_type]
        assert hook is not None and hook.connection_testable, f"{conn_type}: the Test button needs test_connection"


def test_airflow_providers_list_shows_the_provider(airflow_home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "plain"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "airflow-chatter" in result.stdout, "the CLI lists the provider by its distribution name"


def test_every_module_and_hook_named_in_provider_info_imports() -> None:
    import importlib

    from airflow_chatter.airflow.get_provider_info import get_provider_info

    info = get_provider_info()
    for group in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[group]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for connection in info["connection-types"]:
        module, _, name = connection["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), name)
        assert hook.conn_type == connection["connection-type"], "discovery rejects a hook whose conn_type differs"
        assert hook.hook_name == connection["hook-name"], "the CLI and the form would name the type differently"


def test_provider_info_does_not_import_airflow() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, airflow_chatter.airflow.get_provider_info; print('airflow' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False", "ProvidersManager reads provider info in every process; keep it plain data"
