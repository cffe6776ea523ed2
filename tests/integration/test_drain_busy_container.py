"""F-11 through the public operators and a Cosmos connection, against the project emulator and the real broker: a
container provisioned below what the drain would take unpaced, with no cap set (the default).

The drain tasks of a DAG run are run one after another (``ChatterListLeasesOperator`` then ``ChatterDrainOperator``
per lease, as the DAG factory wires them) until nothing is pending. Every document reaches Kafka, no drain task
fails, and the summaries' ``throttled`` equal the 429s the emulator answered; a container that serves nothing for the
whole wait budget still fails its task with ``ThrottleLimitExceeded`` naming the setting. No timed assertions.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports.throttle import ThrottleLimitExceeded
from tests.fixtures.cosmos import (
    ContainerFactory,
    CosmosEndpoint,
    chatter_connection,
    emulator_configured,
    emulator_stats,
)
from tests.fixtures.kafka import consume_records

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

DOCUMENTS = 120
#: Drain task runs at most, before the test gives up (each run is bounded by ``max_seconds``).
MAX_RUNS = 30


class Rig:
    """A source over fresh containers and a fresh topic, reached through an Airflow Cosmos and Kafka connection."""

    def __init__(
        self,
        endpoint: CosmosEndpoint,
        factory: ContainerFactory,
        bootstrap: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.endpoint = endpoint
        self.bootstrap = bootstrap
        self.monitored = factory(("/tenantId",), default_ttl=-1)
        self.leases = factory(("/id",), default_ttl=-1)
        self.database = self.monitored.container_link.split("/")[1]
        self.topic = f"chatter-busy.{uuid.uuid4().hex[:12]}"
        ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), [self.topic], partitions=3)
        monkeypatch.setenv("AIRFLOW_CONN_CHATTER_COSMOS_BUSY", chatter_connection(endpoint, self.database))
        monkeypatch.setenv(
            "AIRFLOW_CONN_CHATTER_KAFKA_BUSY", json.dumps({"conn_type": "chatterkafka", "host": bootstrap})
        )
        self.message_ids: list[str] = []

    def seed(self, count: int) -> None:
        container = CosmosDocumentContainer(self.monitored)
        for i in range(count):
            tenant = f"t{i % 24}"
            message_id = f"busy-{uuid.uuid4().hex[:12]}"
            body = json.dumps({"n": i, "pad": "x" * 600})
            container.create(
                OutboxMessage(message_id, self.topic, body, "application/json", {}).to_document(("/tenantId",), tenant),
                tenant,
            )
            self.message_ids.append(message_id)

    def source(self, **changes: Any) -> Any:
        from airflow_chatter.airflow.sources import SourceConfig

        values: dict[str, Any] = {
            "name": f"busy-{uuid.uuid4().hex[:6]}",
            "database": self.database,
            "monitored_container": self.monitored.id,
            "lease_container": self.leases.id,
            "partition_key_paths": "/tenantId",
            "cosmos_conn_id": "chatter_cosmos_busy",
            "kafka_conn_id": "chatter_kafka_busy",
            "max_batch_size": 40,
            "max_documents": 100_000,
            "max_seconds": 20,
        }
        values.update(changes)
        return SourceConfig.model_validate(values)

    def run(self, config: Any) -> list[dict[str, Any]]:
        """One DAG run's drain tasks: list the leases, drain each; their XCom summaries (a failed task raises)."""
        from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
        from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator

        leases = ChatterListLeasesOperator(task_id="list_leases", source=config).execute(context={})
        return [
            ChatterDrainOperator(task_id="drain", source=config, lease_id=lease).execute(context={}) for lease in leases
        ]

    def pending(self) -> int:
        rows = self.monitored.query_items(
            "SELECT VALUE COUNT(1) FROM c WHERE c.status = 'pending'", enable_cross_partition_query=True
        )
        return int(next(iter(rows)))

    def throttled(self) -> int:
        return int(emulator_stats(self.endpoint, self.monitored)["throttled"])


@pytest.fixture
def rig(
    cosmos_endpoint: CosmosEndpoint,
    cosmos_container_factory: ContainerFactory,
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Rig:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the project emulator's provisioned-RU switch")
    return Rig(cosmos_endpoint, cosmos_container_factory, kafka_bootstrap, monkeypatch)


def _unpaced_ru_per_second(rig: Rig) -> tuple[float, float]:
    """What the drain takes with nothing in its way: RU over the wall time of one run over a backlog, and the RU
    of its busiest lease (setup figures for the provisioning below, never asserted on)."""
    rig.seed(DOCUMENTS)
    config = rig.source()
    started = time.monotonic()
    summaries = rig.run(config)
    elapsed = time.monotonic() - started
    assert rig.pending() == 0 and sum(s["delivered"] for s in summaries) == DOCUMENTS
    return sum(float(s["request_units"]) for s in summaries) / elapsed, max(
        float(s["request_units"]) for s in summaries
    )


def _drain_until_caught_up(rig: Rig, config: Any) -> list[dict[str, Any]]:
    summaries: list[dict[str, Any]] = []
    for _ in range(MAX_RUNS):
        summaries += rig.run(config)  # a failed drain task raises here: the test fails on it
        if rig.pending() == 0:
            return summaries
    raise AssertionError(f"{rig.pending()} documents still pending after {MAX_RUNS} runs")


@pytest.mark.parametrize("provisioned", ["a third of the unpaced demand", "47 RU/s"])
def test_f11_a_container_provisioned_below_the_drains_demand_delivers_everything_with_no_failed_run(
    rig: Rig, provisioned: str
) -> None:
    """No cap set: the drain paces itself to what the container serves; the 429s it meets are waited out, counted,
    and never fail a task while the container serves it."""
    with emulator_configured(rig.endpoint, request_charges=True):
        demand, busiest_lease = _unpaced_ru_per_second(rig)
        # The leases drain one after another, so the run's average spreads over more of the emulator's 1 s windows
        # than one lease's drain uses: a third of it alone may never be exceeded in a window on a fast machine.
        # A third of what one lease's drain spends is: the drain meets the container's limit either way.
        budget = round(min(demand, busiest_lease) / 3, 1) if provisioned.startswith("a third") else 47.0
        rig.seed(DOCUMENTS)
        config = rig.source()
        throttled_before = rig.throttled()
        with emulator_configured(
            rig.endpoint, containers={rig.monitored.container_link: {"provisioned_ru_per_second": budget}}
        ):
            summaries = _drain_until_caught_up(rig, config)
            server_429s = rig.throttled() - throttled_before
    assert server_429s > 0, f"the provisioned {budget} RU/s (unpaced demand {demand:.0f} RU/s) was exceeded"
    assert sum(s["throttled"] for s in summaries) == server_429s, "every 429 the emulator answered is counted"
    assert all(s["error_type"] is None for s in summaries), "no drain task failed"
    assert sum(s["delivered"] for s in summaries) == DOCUMENTS
    assert any(s["paced_request_units_per_second"] is not None for s in summaries), "the drain paced itself"
    records = consume_records(rig.bootstrap, rig.topic, 2 * DOCUMENTS, timeout_s=60)
    published = {dict(r.headers)["message-id"].decode() for r in records}
    assert published == set(rig.message_ids), "every document reached Kafka (both backlogs)"


def test_f11_a_container_that_serves_nothing_for_the_wait_budget_fails_the_task_naming_the_setting(rig: Rig) -> None:
    rig.seed(10)
    config = rig.source(max_throttle_wait_seconds=3.0)
    # A budget this small serves one request, then carries its debt for hours: the container serves nothing more.
    nothing = {rig.monitored.container_link: {"provisioned_ru_per_second": 0.001}}
    with emulator_configured(rig.endpoint, request_charges=True, containers=nothing):
        with pytest.raises(ThrottleLimitExceeded, match=r"max_throttle_wait_seconds=3.0\): raise max_throttle_wait"):
            rig.run(config)
    assert rig.pending() == 10, "nothing was stamped: every document comes again"
