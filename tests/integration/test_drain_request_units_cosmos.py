"""F-10 / F-11 against the project emulator with its account-like switches on (docs/emulator.md).

Request units summed by the drain equal the charges the server reported for the same requests; a provisioned
RU/s the drain exceeds answers 429s that the drain retries, counts and survives with nothing lost; a cap below the
provisioned throughput keeps the drain clear of 429s by pacing it. No timed assertions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.engine import DrainEngine, DrainSummary
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.testing.fakes import FakePublisher
from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint, emulator_configured, emulator_stats


@pytest.fixture
def emulator(cosmos_endpoint: CosmosEndpoint) -> Iterator[CosmosEndpoint]:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("switches of the project emulator (a real account has its own charges and throughput)")
    yield cosmos_endpoint


def _seed(container: CosmosDocumentContainer, count: int, tenants: int) -> None:
    for i in range(count):
        tenant = f"t{i % tenants}"
        doc = OutboxMessage(f"ru-{uuid.uuid4().hex[:8]}", "orders", '{"n":1}', "application/json", {}).to_document(
            ("/tenantId",), tenant
        )
        container.create(doc, tenant)


def _drain(container: CosmosDocumentContainer, **options: Any) -> tuple[DrainSummary, FakePublisher]:
    publisher = FakePublisher()
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")
    source = SourceOptions("ru-source", ("/tenantId",), stamp_concurrency=4, **options)
    engine = DrainEngine(source, container, leases, publisher, owner="ru-test")
    (summary,) = engine.drain_all()
    return summary, publisher


def _statuses(proxy: Any) -> set[str]:
    return {row["status"] for row in proxy.query_items("SELECT c.status FROM c", enable_cross_partition_query=True)}


def test_f11_the_drains_request_units_are_the_servers_reported_charges(
    emulator: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    container = CosmosDocumentContainer(proxy)
    with emulator_configured(emulator, request_charges=True):
        _seed(container, 12, tenants=3)
        before = emulator_stats(emulator, proxy)
        summary, _ = _drain(container)
        after = emulator_stats(emulator, proxy)
    summary.raise_for_error()
    assert summary.delivered == 12
    by_kind = summary.request_units_by_kind
    # The server's stats count document requests (feed pages, patches, batches); "other" holds metadata calls.
    assert by_kind["feed"] + by_kind["stamps"] == pytest.approx(after["request_charge"] - before["request_charge"])
    assert by_kind["stamps"] > 12 * 4, "a 1 KB patch is charged about 5 RU"
    assert summary.request_units_per_delivered == pytest.approx(summary.request_units / 12)


def test_f11_429s_from_provisioned_throughput_are_retried_counted_and_nothing_is_lost(
    emulator: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    from azure.cosmos.documents import ConnectionPolicy, RetryOptions

    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    _seed(CosmosDocumentContainer(proxy), 40, tenants=40)
    policy = ConnectionPolicy()
    policy.RetryOptions = RetryOptions(max_retry_attempt_count=0)  # the SDK hands every 429 to the drain
    client = emulator.client(connection_policy=policy)
    unretried = client.get_database_client(proxy.container_link.split("/")[1]).get_container_client(proxy.id)
    link = f"{proxy.container_link}"
    with emulator_configured(emulator, request_charges=True, containers={link: {"provisioned_ru_per_second": 60}}):
        summary, publisher = _drain(
            CosmosDocumentContainer(unretried), max_throttle_retries=100, max_throttle_wait_seconds=120
        )
        stats = emulator_stats(emulator, proxy)
    summary.raise_for_error()
    assert summary.delivered == 40 and len(publisher.sent) == 40
    assert summary.throttled > 0 and not summary.throttle_limit_reached
    assert summary.throttled == stats["throttled"], "every 429 the server answered was seen and counted"
    assert _statuses(proxy) == {"delivered"}


def test_f11_a_cap_below_the_provisioned_throughput_paces_the_drain_clear_of_429s(
    emulator: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    container = CosmosDocumentContainer(proxy)
    _seed(container, 30, tenants=30)
    link = f"{proxy.container_link}"
    with emulator_configured(emulator, request_charges=True, containers={link: {"provisioned_ru_per_second": 300}}):
        summary, _ = _drain(container, max_request_units_per_second=100)
        stats = emulator_stats(emulator, proxy)
    summary.raise_for_error()
    assert summary.delivered == 30
    assert stats["throttled"] == 0 and summary.throttled == 0
    assert _statuses(proxy) == {"delivered"}
