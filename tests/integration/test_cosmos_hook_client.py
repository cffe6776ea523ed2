"""The hook's own Cosmos client, as every process the project runs code in builds it (task, trigger, plugin, CLI),
against the project emulator: its 429s reach the drain (counted, limited), and the SDK's per-request HTTP lines stay
out of the log at INFO."""

from __future__ import annotations

import logging
import uuid

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.testing.fakes import FakePublisher
from tests.fixtures.cosmos import (
    ContainerFactory,
    CosmosEndpoint,
    chatter_connection,
    emulator_configured,
    emulator_stats,
)

pytestmark = pytest.mark.cosmos

#: The loggers the Azure SDK's HTTP logging policy writes to: its own two, and the one the project hands it.
HTTP_LOGGERS = {
    "azure.core.pipeline.policies.http_logging_policy",
    "azure.cosmos._cosmos_http_logging_policy",
    "airflow_chatter.cosmos.sdk_http",  # adapters/cosmos/client.py SDK_HTTP_LOGGER
}


def _connection(monkeypatch: pytest.MonkeyPatch, endpoint: CosmosEndpoint, database: str) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_CHATTER_COSMOS_OWN", chatter_connection(endpoint, database))
    return "chatter_cosmos_own"


def _seed(container: CosmosDocumentContainer, count: int) -> None:
    for i in range(count):
        tenant = f"t{i}"
        doc = OutboxMessage(f"own-{uuid.uuid4().hex[:8]}", "orders", '{"n":1}', "application/json", {}).to_document(
            ("/tenantId",), tenant
        )
        container.create(doc, tenant)


def test_f11_every_429_the_emulator_answers_the_hooks_client_is_counted_in_the_summary(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No client of the test's own: the hook's, as a drain task builds it. The SDK used to retry 429s itself (9
    times, up to 30 s each), so the summary said throttled=0 while the server answered dozens."""
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the project emulator's provisioned-RU switch")
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    database = proxy.container_link.split("/")[1]
    hook = ChatterCosmosHook(_connection(monkeypatch, cosmos_endpoint, database), database_name=database)
    monitored = hook.get_container(proxy.id)
    _seed(monitored, 40)
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")
    source = SourceOptions(
        "own-source", ("/tenantId",), stamp_concurrency=4, max_throttle_retries=100, max_throttle_wait_seconds=120
    )
    publisher = FakePublisher()
    with emulator_configured(
        cosmos_endpoint, request_charges=True, containers={proxy.container_link: {"provisioned_ru_per_second": 60}}
    ):
        before = emulator_stats(cosmos_endpoint, proxy)
        engine = DrainEngine.open(source, monitored, leases, publisher, owner="own-test")
        (summary,) = engine.drain_all()
        after = emulator_stats(cosmos_endpoint, proxy)
    summary.raise_for_error()
    assert summary.delivered == 40 and len(publisher.sent) == 40
    server_429s = after["throttled"] - before["throttled"]
    assert server_429s > 0, "the provisioned throughput was exceeded"
    assert summary.throttled == server_429s, "every 429 the server answered is in the summary"


def test_the_sdk_http_logging_policy_emits_nothing_at_info_for_the_trigger_and_the_plugin(
    cosmos_endpoint: CosmosEndpoint,
    cosmos_container_factory: ContainerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The on_pending trigger and the plugin build their containers through the hook outside any task: no quiet
    block around them. With the root logger at INFO, the SDK's per-request header lines must still not appear."""
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.airflow.triggers.pending import ChatterPendingOutboxTrigger

    proxy = cosmos_container_factory(("/tenantId",), default_ttl=-1)
    lease_proxy = cosmos_container_factory(("/id",), default_ttl=-1)
    database = proxy.container_link.split("/")[1]
    conn_id = _connection(monkeypatch, cosmos_endpoint, database)
    records: list[logging.LogRecord] = []
    collector = _Collector(records)
    # Airflow's logging setup replaces the root handlers (caplog's too): listen on the SDK's loggers themselves.
    for name in HTTP_LOGGERS:
        logging.getLogger(name).addHandler(collector)
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)
    trigger = ChatterPendingOutboxTrigger(
        cosmos_conn_id=conn_id,
        database=database,
        monitored_container=proxy.id,
        lease_container=lease_proxy.id,
        lease_ids=["l"],
    )
    monitored, _ = trigger._containers()
    _seed(monitored, 2)
    plugin_read = ChatterCosmosHook(conn_id, database_name=database).get_container(proxy.id)
    rows = list(plugin_read.query("SELECT c.id FROM c"))
    assert len(rows) == 2
    for name in HTTP_LOGGERS:
        logging.getLogger(name).removeHandler(collector)
    noisy = [r for r in records if r.levelno <= logging.INFO]
    assert not noisy, f"{len(noisy)} SDK HTTP lines at INFO, e.g. {noisy[0].getMessage()[:200]!r}"


class _Collector(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
