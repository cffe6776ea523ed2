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
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.summary import DrainSummary
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
    engine = DrainEngine.open(source, container, leases, publisher, owner="ru-test")
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
    budget = {link: {"provisioned_ru_per_second": 60}}
    with emulator_configured(emulator, request_charges=True, priority_based_execution=True, containers=budget):
        summary, publisher = _drain(
            CosmosDocumentContainer(unretried), max_throttle_retries=100, max_throttle_wait_seconds=120
        )
        stats = emulator_stats(emulator, proxy)
    summary.raise_for_error()
    assert summary.delivered == 40 and len(publisher.sent) == 40
    assert summary.throttled > 0 and not summary.throttle_limit_reached
    assert summary.throttled == stats["throttled"], "every 429 the server answered was seen and counted"
    assert stats["throttled_low"] == stats["throttled"], "the drain's requests went out at low priority"
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


def test_f11_the_cosmos_connections_429_limit_stops_the_drain_at_a_page_boundary_with_nothing_lost_and_says_so(
    emulator: CosmosEndpoint, cosmos_container_factory: ContainerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limits come from the connection's extras through the hook (the source sets none). The containers use a
    client whose SDK retries no 429 (as above): the hook's own client would wait every 429 out inside the SDK."""
    import json

    from azure.cosmos.documents import ConnectionPolicy, RetryOptions

    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.ports.throttle import ThrottleLimitExceeded, ThrottleLimits

    monkeypatch.setenv(
        "AIRFLOW_CONN_CHATTER_COSMOS_RU",
        json.dumps(
            {
                "conn_type": "chattercosmos",
                "host": emulator.url,
                "password": emulator.key,
                "extra": {"max_throttle_retries": "0", "max_throttle_wait_seconds": "5"},
            }
        ),
    )
    limits = ChatterCosmosHook("chatter_cosmos_ru").throttle_limits()
    assert limits == ThrottleLimits(0, 5.0)

    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    _seed(CosmosDocumentContainer(proxy), 40, tenants=40)
    policy = ConnectionPolicy()
    policy.RetryOptions = RetryOptions(max_retry_attempt_count=0)
    client = emulator.client(connection_policy=policy)
    unretried = CosmosDocumentContainer(
        client.get_database_client(proxy.container_link.split("/")[1]).get_container_client(proxy.id)
    )
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")
    source = SourceOptions("ru-source", ("/tenantId",), max_batch_size=5, stamp_concurrency=4)
    publisher = FakePublisher()

    def engine() -> DrainEngine:
        return DrainEngine.open(source, unretried, leases, publisher, owner="ru-test", throttle_limits=limits)

    link = f"{proxy.container_link}"
    with emulator_configured(emulator, request_charges=True, containers={link: {"provisioned_ru_per_second": 30}}):
        (stopped,) = engine().drain_all()
    assert stopped.throttle_limit_reached and stopped.throttled >= 1
    with pytest.raises(ThrottleLimitExceeded, match=r"max_throttle_retries=0.*stops at this page, nothing lost"):
        stopped.raise_for_error()
    assert "failed with ThrottleLimitExceeded" in stopped.log_line(), "the summary line says why it stopped"
    assert stopped.delivered < 40, "it stopped early"
    pending = {
        row["id"]
        for row in proxy.query_items("SELECT c.id FROM c WHERE c.status = 'pending'", enable_cross_partition_query=True)
    }
    assert pending, "documents were left for the next run"

    (finished,) = engine().drain_all()  # throughput back: the next run resumes from the last confirmed page
    finished.raise_for_error()
    assert _statuses(proxy) == {"delivered"}, "nothing lost"
    assert finished.delivered >= len(pending), "the documents left pending are delivered by the next run"
    sent_ids = {dict(m.headers)["message-id"].decode() for m in publisher.sent}
    assert len(sent_ids) == 40, "every message went out at least once across the two runs"


class _CountingContainer(CosmosDocumentContainer):
    """The Cosmos adapter, counting the stamp requests the drain sends."""

    def __init__(self, proxy: Any) -> None:
        super().__init__(proxy)
        self.stamp_requests: list[str] = []

    def patch(self, *args: Any, **kwargs: Any) -> Any:
        self.stamp_requests.append("patch")
        return super().patch(*args, **kwargs)

    def execute_batch(self, *args: Any, **kwargs: Any) -> Any:
        self.stamp_requests.append("batch")
        return super().execute_batch(*args, **kwargs)


def test_f10_ctr_04_a_mixed_pages_undeliverable_stamps_ride_its_transactional_batches_on_the_emulator(
    cosmos_container_factory: ContainerFactory,
) -> None:
    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    container = _CountingContainer(proxy)
    expected: dict[str, str] = {}
    for tenant in ("t0", "t1"):
        for n, broken in enumerate((False, True, False)):
            doc = OutboxMessage(f"mix-{tenant}-{n}", "orders", '{"n":1}', "application/json", {}).to_document(
                ("/tenantId",), tenant
            )
            if broken:
                doc.pop("Destination")  # violates the Outbox Document Contract: stamped undeliverable (CTR-04)
            container.create(doc, tenant)
            expected[doc["id"]] = "undeliverable" if broken else "delivered"
    container.stamp_requests.clear()
    publisher = FakePublisher()
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")
    engine = DrainEngine.open(SourceOptions("mixed", ("/tenantId",)), container, leases, publisher, owner="mixed")
    (summary,) = engine.drain_all()
    summary.raise_for_error()
    assert (summary.delivered, summary.undeliverable) == (4, 2)
    assert container.stamp_requests == ["batch", "batch"], "one transactional batch per partition key"
    assert [len(batch) for batch in publisher.batches] == [4], "the undeliverable documents cut no send_batch"
    stored = {row["id"]: row for row in proxy.query_items("SELECT * FROM c", enable_cross_partition_query=True)}
    assert {doc_id: row["status"] for doc_id, row in stored.items()} == expected
    assert all("ttl" not in row for row in stored.values() if row["status"] == "undeliverable"), "CTR-04: no ttl"
