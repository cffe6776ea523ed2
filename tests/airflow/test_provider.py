"""Provider discovery: Airflow sees the provider and both connection forms without importing the hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _hook_meta() -> dict[str, object]:
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    return {meta.connection_type: meta for meta in HookMetaService.hook_meta_data()}


def test_connection_forms_are_declared_for_both_connection_types() -> None:
    meta = _hook_meta()
    cosmos, kafka = meta["chatter_cosmos"], meta["chatter_kafka"]
    assert cosmos.hook_class_name == "airflow_chatter.airflow.hooks.cosmos.ChatterCosmosHook"
    assert kafka.hook_class_name == "airflow_chatter.airflow.hooks.kafka.ChatterKafkaHook"
    # What GET /ui/connections/hook_meta serves: the form the connection dialog renders.
    assert {"database_name", "connection_verify", "ca_cert_path"} <= set(cosmos.extra_fields), (
        "the Cosmos form must offer the database and the emulator TLS settings"
    )
    assert {"bootstrap_servers", "security_protocol", "sasl_mechanism", "ssl_cafile"} <= set(kafka.extra_fields)
    assert kafka.extra_fields["security_protocol"]["schema"]["enum"] == [
        "PLAINTEXT",
        "SSL",
        "SASL_PLAINTEXT",
        "SASL_SSL",
    ]
    assert cosmos.standard_fields.login.title == "Cosmos Endpoint URI", "login is relabelled as the endpoint"
    assert cosmos.standard_fields.host.hidden is True, "unused standard fields are hidden"
    assert kafka.standard_fields.password.title == "SASL Password"


def test_providers_manager_registers_hooks_as_testable() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "airflow-chatter" in manager.providers
    hook = manager._hooks_lazy_dict["chatter_kafka"]
    assert hook.connection_testable, "the connection dialog's Test button needs test_connection"


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

    from airflow_chatter.airflow.provider_info import get_provider_info

    info = get_provider_info()
    for group in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[group]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for connection in info["connection-types"]:
        module, _, name = connection["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), name)
        assert hook.conn_type == connection["connection-type"], "discovery rejects a hook whose conn_type differs"


def test_provider_info_does_not_import_airflow() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import sys, airflow_chatter.airflow.provider_info; print('airflow' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False", "ProvidersManager reads provider info in every process; keep it plain data"
