"""What the Airflow benchmarks share: the broker and the emulator (started like the test fixtures start them, and
stopped only if this run started them), and the stack helpers of tests/fixtures/live_airflow.py."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_chatter.adapters.cosmos.container import ensure_database  # noqa: E402
from tests.fixtures import cosmos as cosmos_fixtures  # noqa: E402
from tests.fixtures.kafka import shared_project_broker  # noqa: E402


@contextmanager
def cosmos_service() -> Iterator[Any]:
    """A ``CosmosEndpoint``: ``COSMOS_ENDPOINT``/``COSMOS_KEY``, else the project emulator."""
    if os.environ.get("COSMOS_ENDPOINT"):
        yield cosmos_fixtures.CosmosEndpoint(
            os.environ["COSMOS_ENDPOINT"],
            os.environ.get("COSMOS_KEY", ""),
            cosmos_fixtures._parse_verify(os.environ.get("COSMOS_VERIFY")),
            is_emulator=False,
        )
        return
    env = dict(os.environ)
    result = cosmos_fixtures._script("start", env)
    if result.returncode != 0:
        raise SystemExit(f"scripts/cosmos-emulator.sh start failed:\n{result.stderr[-2000:]}")
    connection = cosmos_fixtures._connection(result.stdout)
    try:
        yield cosmos_fixtures.CosmosEndpoint(
            connection["COSMOS_ENDPOINT"],
            connection["COSMOS_KEY"],
            cosmos_fixtures._parse_verify(connection.get("COSMOS_VERIFY")),
            is_emulator=True,
        )
    finally:
        if connection.get("COSMOS_EMULATOR_STARTED") == "1":
            cosmos_fixtures._script("stop", env)


@contextmanager
def services() -> Iterator[tuple[Any, Any, str]]:
    """(Cosmos endpoint, a benchmark database, Kafka bootstrap servers)."""
    with cosmos_service() as endpoint:
        database = ensure_database(endpoint.client(), "airflow-chatter-bench")
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            yield endpoint, database, os.environ["KAFKA_BOOTSTRAP_SERVERS"]
            return
        with shared_project_broker() as bootstrap:
            yield endpoint, database, bootstrap
