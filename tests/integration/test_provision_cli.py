"""``airflow-chatter provision`` against the Cosmos emulator: it creates the lease container with the shape the drain
requires, runs the drain's start-time check, prints what it did, and a second run has nothing to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_chatter.adapters.cosmos.container import create_container
from airflow_chatter.airflow.cli.commands import run

pytestmark = [pytest.mark.cosmos]

SCRIPT = Path(sys.executable).with_name("airflow-chatter")
CONN_ID = "chatter_cosmos_provision"
#: A cold ``import airflow`` plus the emulator round trips; about 10 s on an idle machine.
RUN_TIMEOUT_S = 180


def _connection(cosmos_endpoint: Any, database: str) -> str:
    verify = cosmos_endpoint.verify
    return json.dumps(
        {
            "conn_type": "chattercosmos",
            "host": cosmos_endpoint.url,
            "password": cosmos_endpoint.key,
            "extra": {
                "database_name": database,
                "connection_verify": verify is not False,
                **({"ca_cert_path": verify} if isinstance(verify, str) else {}),
            },
        }
    )


def _sources(tmp_path: Path, database: str, monitored: str, leases: str, **extra: str) -> Path:
    path = tmp_path / "chatter_sources.yaml"
    entry = {
        **extra,
        "name": "orders",
        "cosmos_conn_id": CONN_ID,
        "database": database,
        "monitored_container": monitored,
        "lease_container": leases,
        "partition_key_paths": "/customerId",
    }
    path.write_text(yaml.safe_dump({"sources": [entry]}))
    return path


@pytest.fixture
def setup(cosmos_endpoint: Any, cosmos_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A sources file naming a fresh lease container id, and the connection in the environment."""
    lease_id = f"t-leases-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", _connection(cosmos_endpoint, cosmos_database.id))
    yield lease_id
    try:
        cosmos_database.delete_container(lease_id)
    except Exception:  # noqa: BLE001 - it may never have been created
        pass


def _provision(sources: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "provision", "--source", "orders", "--sources-file", str(sources)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def _key_absent(result: subprocess.CompletedProcess[str]) -> bool:
    key = json.loads(os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"])["password"]
    return key not in result.stdout and key not in result.stderr


def test_provision_creates_the_lease_container_partitioned_on_id_and_a_second_run_has_nothing_to_do(
    setup: str, cosmos_database: Any, cosmos_container_factory: Any, tmp_path: Path
) -> None:
    monitored = cosmos_container_factory(partition_key_paths=("/customerId",), default_ttl=-1)
    sources = _sources(tmp_path, cosmos_database.id, monitored.id, setup)

    first = _provision(sources)

    assert first.returncode == 0, first.stderr
    assert f"created lease container '{setup}' (partition key /id, no default TTL)" in first.stdout
    assert f"monitored container '{monitored.id}' passes the start-time check" in first.stdout
    properties = cosmos_database.get_container_client(setup).read()
    assert properties["partitionKey"]["paths"] == ["/id"]
    assert properties.get("defaultTtl") is None, "no default TTL: it would purge leases and their checkpoints"
    assert _key_absent(first), "the account key is never printed"

    second = _provision(sources)

    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout
    assert f"lease container '{setup}' exists with the right shape: nothing to do" in second.stdout
    assert second.stdout.strip().endswith("nothing to do")


def test_provision_creates_the_sources_ui_idempotency_container_and_verifies_it_on_the_second_run(
    setup: str, cosmos_database: Any, cosmos_container_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monitored = cosmos_container_factory(partition_key_paths=("/customerId",), default_ttl=-1)
    idempotency = f"t-ui-idem-{uuid.uuid4().hex[:12]}"
    sources = _sources(tmp_path, cosmos_database.id, monitored.id, setup, ui_idempotency_container=idempotency)
    try:
        assert run(["provision", "--source", "orders", "--sources-file", str(sources)]) == 0
        first = capsys.readouterr().out
        assert f"created UI idempotency container '{idempotency}' (partition key /scope, defaultTtl -1)" in first
        properties = cosmos_database.get_container_client(idempotency).read()
        assert properties["partitionKey"]["paths"] == ["/scope"] and properties["defaultTtl"] == -1

        assert run(["provision", "--source", "orders", "--sources-file", str(sources)]) == 0
        second = capsys.readouterr().out
        assert f"UI idempotency container '{idempotency}' exists with the right shape: nothing to do" in second
        assert second.strip().endswith("nothing to do")
    finally:
        try:
            cosmos_database.delete_container(idempotency)
        except Exception:  # noqa: BLE001 - cleanup must not mask the outcome
            pass


def test_cnt_provision_refuses_a_monitored_container_with_a_default_ttl_and_creates_nothing(
    setup: str, cosmos_database: Any, cosmos_container_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monitored = cosmos_container_factory(partition_key_paths=("/customerId",), default_ttl=3600)
    sources = _sources(tmp_path, cosmos_database.id, monitored.id, setup)

    status = run(["provision", "--source", "orders", "--sources-file", str(sources)])

    assert status == 1
    err = capsys.readouterr().err
    assert f"Monitored container '{monitored.id}'" in err and "defaultTtl is 3600" in err, err
    assert setup not in [c["id"] for c in cosmos_database.list_containers()], "no lease container was created"


def test_provision_refuses_an_existing_lease_container_not_partitioned_on_id(
    setup: str, cosmos_database: Any, cosmos_container_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monitored = cosmos_container_factory(partition_key_paths=("/customerId",), default_ttl=-1)
    create_container(cosmos_database, setup, ("/pk",))
    sources = _sources(tmp_path, cosmos_database.id, monitored.id, setup)

    status = run(["provision", "--source", "orders", "--sources-file", str(sources)])

    assert status == 1
    err = capsys.readouterr().err
    assert setup in err and "'/id'" in err, err
    assert cosmos_database.get_container_client(setup).read()["partitionKey"]["paths"] == ["/pk"], "left as it was"


def test_provision_without_a_sources_file_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CHATTER_SOURCES_FILE", raising=False)

    status = run(["provision", "--source", "orders"])

    assert status == 2
    assert "--sources-file" in capsys.readouterr().err
